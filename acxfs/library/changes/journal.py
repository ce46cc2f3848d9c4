"""One change of the library at a time, and every change finished once begun.

Invariant: the library changes only under `locked`; a change of more than one step is written
down whole (`Intent`: the links to make, re-point and remove, the state to commit, the store
files to delete, the temporary name each link step may use, a project's exclude lines and
lock) and synced before its first step, and every step is idempotent, so `recover` can always
carry an interrupted change to its end.  A change killed before its intent was written left
the old library (an unrecorded store file is removed as an orphan, unless the state itself is
gone while acxfs's links point into the library: then the store is kept for `acxfs repair`);
one killed after it is finished by the next command or `acxfs up`.  A link step an agent
directory refuses (read-only, full) turns the change around: the intent is marked undone and
the steps taken are taken back, newest first, before the state is committed, so agents see the
old library or the new one, never a mix; a kill while undoing is undone again by the next
command.  Temporary entries a killed step left in an agent directory are removed by the names
the intent gave them.  The intent is read back as untrusted input (`acxfs.safe.own_files`),
the state it holds included, before its first step: a damaged one stops the command with one
line (`acxfs repair` gives it up).
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import re
import stat
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

from acxfs.errors import AgentDirectoryError, DamagedState, EnvironmentProblem
from acxfs.library.links import agent_links, git_exclude, guard
from acxfs.library.links.agent_links import Link
from acxfs.library.store import lockfile
from acxfs.library.store.state import (
    MAX_STATE_BYTES,
    LibraryState,
    Places,
    load_state,
    store_name_problem,
    write_private,
)
from acxfs.paths import LibraryPaths
from acxfs.safe import links as safe_links
from acxfs.safe import own_files
from acxfs.safe.own_files import Field, integer, list_of, optional, pair_of, text

FaultHook = Callable[[str], None]
TEMP_NAME = re.compile(r"\.acxfs-[0-9a-f]{16}\.tmp")


def _no_fault(step: str) -> None:
    del step


fault_point: FaultHook = _no_fault
"""Called at each step boundary with the step's name; tests replace it (through the
ACXFS_TEST_KILL_AT variable, below) to kill the command there, also inside one link step
(`acxfs.safe.links.on_checkpoint`: e.g. `replace_symlink_at:exchange`)."""


def _env_fault(step: str) -> None:
    if os.environ.get("ACXFS_TEST_KILL_AT") == step:
        os.kill(os.getpid(), 9)


if os.environ.get("ACXFS_TEST_KILL_AT"):
    fault_point = _env_fault
    safe_links.on_checkpoint(_env_fault)


@contextlib.contextmanager
def locked(paths: LibraryPaths) -> Iterator[None]:
    """Hold the library's lock (waits for another command to finish its change).

    The library's root is checked (`guard`) before the lock is opened in it and again once
    the lock is held.  A POSIX record lock, not `flock`: a daemon forked while the lock is
    held does not inherit it, so starting the daemon from inside a change never keeps the
    library locked."""
    root = guard.open_root(paths)
    try:
        try:
            fd = os.open("lock", os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600,
                         dir_fd=root)
        except OSError as exc:
            raise EnvironmentProblem(f"cannot open the library lock {paths.lock} "
                                     f"({exc.strerror})") from exc
        try:
            fcntl.lockf(fd, fcntl.LOCK_EX)
            guard.check_again(paths, root)
            yield
        finally:
            os.close(fd)
    finally:
        os.close(root)


@dataclass(frozen=True)
class ProjectFiles:
    """What a change of a project does to files in it: the lines to add to and remove from its
    git exclude file, and its lock's bytes before and after (`new` None: the lock is left
    alone; written only while the file still holds `old`, None meaning no file)."""

    project: str
    exclude: str | None = None
    exclude_add: list[str] = field(default_factory=list)
    exclude_remove: list[str] = field(default_factory=list)
    lock_old: str | None = None
    lock_new: str | None = None


@dataclass(frozen=True)
class WholeStep:
    """An agent directory served whole, changed: made the link to the view `new` (from an
    empty or absent directory: `old` None), re-pointed from `old` to `new`, or made an empty
    directory again (`new` None: for the links the change makes in it)."""

    directory: str
    old: str | None
    new: str | None

    def links(self) -> tuple[Link | None, Link | None]:
        """The link that is the directory, before and after, as a link in its parent."""
        return (None if self.old is None else agent_links.whole_link(self.directory, self.old),
                None if self.new is None else agent_links.whole_link(self.directory, self.new))


@dataclass(frozen=True)
class Step:
    """One link step of an intent, with the temporary name it may use in its directory."""

    kind: str  # "repoint" (old -> new), "remove" (old), "make" (new), "whole" (WholeStep)
    old: Link | None
    new: Link | None
    temp: str

    @property
    def directory(self) -> str:
        link = self.old or self.new
        assert link is not None
        return link.directory

    @property
    def fault(self) -> str:
        return {"repoint": "repoint", "remove": "unlink", "make": "link",
                "whole": "whole"}[self.kind]

    def targets(self) -> set[str]:
        return {link.target for link in (self.old, self.new) if link is not None}

    def forward(self) -> str | None:
        if self.kind == "whole":
            return self._whole(self.old, self.new)
        if self.kind == "repoint":
            assert self.old is not None and self.new is not None
            return agent_links.repoint(self.old, self.new, self.temp)
        if self.kind == "remove":
            assert self.old is not None
            return agent_links.remove(self.old, self.temp)
        assert self.new is not None
        return agent_links.make(self.new)

    def backward(self) -> str | None:
        if self.kind == "whole":
            return self._whole(self.new, self.old)
        if self.kind == "repoint":
            assert self.old is not None and self.new is not None
            return agent_links.unrepoint(self.old, self.new, self.temp)
        if self.kind == "remove":
            assert self.old is not None
            return agent_links.unremove(self.old)
        assert self.new is not None
        return agent_links.unmake(self.new, self.temp)

    def _whole(self, old: Link | None, new: Link | None) -> str | None:
        """An agent directory served whole, from `old` to `new` (either way round)."""
        if old is None:
            assert new is not None
            return agent_links.make_whole(new)
        if new is None:
            return agent_links.unmake_whole(old, self.temp)
        return agent_links.repoint(old, new, self.temp)


@dataclass
class Undo:
    """A change whose link step failed, being taken back: its first `done` steps, in reverse."""

    done: int
    failure: str  # the step's failure: the agent directory and the system's reason


@dataclass
class Intent:
    """A change written down before its first step (with the temporary name each step may use
    in an agent directory, so whatever a kill leaves there is known and removed)."""

    op: str
    make: list[Link] = field(default_factory=list)
    repoint: list[tuple[Link, Link]] = field(default_factory=list)  # (old, new), same path
    remove: list[Link] = field(default_factory=list)
    state: str = ""  # the LibraryState to commit, as JSON
    delete_files: list[str] = field(default_factory=list)  # store file names, after the commit
    project: ProjectFiles | None = None  # a project's exclude lines and lock
    whole: list[WholeStep] = field(default_factory=list)  # agent directories served whole
    temps: list[str] = field(default_factory=list)  # one per step, in the order of `steps`
    undo: Undo | None = None  # set once a step failed: the change is being undone

    def __post_init__(self) -> None:
        """Temporary names are chosen here, when the change is written down (an intent
        written before they were kept gets them now); ValueError unless one per step."""
        count = len(self.repoint) + len(self.remove) + len(self.whole) + len(self.make)
        if not self.temps:
            self.temps = [safe_links.fresh_temp_name() for _ in range(count)]
        if len(self.temps) != count or len(set(self.temps)) != count:
            raise ValueError("not one temporary name for each link step")
        if self.undo is not None and not 0 <= self.undo.done <= count:
            raise ValueError(f"undo.done {self.undo.done} is not a number of steps")

    def steps(self) -> list[Step]:
        """Every link step in the order it is carried out: re-point, remove, the directories
        served whole (emptied of acxfs's links before one becomes a link, an empty directory
        again before links are made in it), make."""
        steps = [Step("repoint", old, new, "") for old, new in self.repoint]
        steps += [Step("remove", link, None, "") for link in self.remove]
        steps += [Step("whole", *whole.links(), "") for whole in self.whole]
        steps += [Step("make", None, link, "") for link in self.make]
        return [replace(step, temp=temp) for step, temp in zip(steps, self.temps, strict=True)]

    def to_json(self) -> str:
        return json.dumps({
            "op": self.op, "make": [asdict(x) for x in self.make],
            "repoint": [[asdict(a), asdict(b)] for a, b in self.repoint],
            "remove": [asdict(x) for x in self.remove], "state": self.state,
            "deleteFiles": self.delete_files, "temps": self.temps,
            "undo": None if self.undo is None else asdict(self.undo),
            "project": None if self.project is None else asdict(self.project),
            "whole": [asdict(x) for x in self.whole],
        }, indent=1) + "\n"

    @classmethod
    def from_json(cls, text: str | bytes, source: Path, places: Places) -> Intent:
        """The intent `text` holds, its state included (`DamagedState` unless every field,
        and every field of the state, is of its kind)."""
        try:
            intent = own_files.parse(text, _intent_table(places), source=str(source),
                                     max_depth=MAX_DEPTH)
        except ValueError as exc:  # a record the fields allow that Intent refuses
            raise DamagedState(str(source), "temps", str(exc)) from exc
        LibraryState.from_json(intent.state, source, places, prefix="state")
        return intent


MAX_INTENT_BYTES = 4 * MAX_STATE_BYTES  # the state it holds, escaped, and its link steps
MAX_DEPTH = 8  # the intent nests four deep; its state is a string, read on its own


def _op(value: str) -> str | None:
    return None if re.fullmatch(r"[a-z][a-z-]{0,31}", value) else "not an operation name"


def _same_link_path(intent: Intent) -> tuple[str, str] | None:
    for index, (old, new) in enumerate(intent.repoint):
        if (old.directory, old.name) != (new.directory, new.name):
            return f"repoint[{index}]", "re-points one link to another path"
    return None


def _temp_name(value: str) -> str | None:
    """A temporary name of acxfs's own form (never a path, never another entry's name)."""
    return None if TEMP_NAME.fullmatch(value) else "not a temporary name of acxfs"


def _optional_absolute(value: str) -> str | None:
    return None if os.path.isabs(value) and "\0" not in value else "not an absolute path"


def _intent_table(places: Places) -> own_files.Table[Intent]:
    link = places.link_table(projects=True)
    view = optional(text(places.view_target))
    whole = own_files.Table(WholeStep, {"directory": Field(text(places.agent_directory)),
                                        "old": Field(view), "new": Field(view)})
    undo = own_files.Table(Undo, {"done": Field(integer), "failure": Field(text())})
    project = own_files.Table(ProjectFiles, {
        "project": Field(text(_optional_absolute)),
        "exclude": Field(optional(text(_optional_absolute))),
        "exclude_add": Field(list_of(text())),
        "exclude_remove": Field(list_of(text())),
        "lock_old": Field(optional(text(max_len=MAX_STATE_BYTES))),
        "lock_new": Field(optional(text(max_len=MAX_STATE_BYTES))),
    })
    return own_files.Table(Intent, {
        "op": Field(text(_op)),
        "make": Field(list_of(link)),
        "repoint": Field(list_of(pair_of(link))),
        "remove": Field(list_of(link)),
        "state": Field(text(max_len=MAX_STATE_BYTES)),
        "deleteFiles": Field(list_of(text(store_name_problem)), attr="delete_files"),
        "temps": Field(list_of(text(_temp_name)), default=[]),
        "undo": Field(optional(undo), default=None),
        "project": Field(optional(project), default=None),
        "whole": Field(list_of(whole), default=[]),
    }, check=_same_link_path)


@dataclass
class Outcome:
    """What carrying out an intent met: links it left alone because they were not acxfs's,
    and, for a change that was undone, why."""

    skipped: list[str] = field(default_factory=list)
    undone: str | None = None


def carry_out(paths: LibraryPaths, intent: Intent, sync_daemon: Callable[[], None]) -> Outcome:
    """Write the intent, then do every step of it, then forget it.  A link step an agent
    directory refuses undoes the change (EnvironmentProblem naming the directory)."""
    write_private(paths.intent, intent.to_json())
    fault_point(f"{intent.op}:intent")
    outcome = _finish(paths, intent, sync_daemon, first=True)
    if outcome.undone is not None:
        raise EnvironmentProblem(f"{outcome.undone}; nothing was changed (the change was "
                                 "undone in every agent directory)")
    return outcome


def _finish(paths: LibraryPaths, intent: Intent, sync_daemon: Callable[[], None],
            first: bool = False) -> Outcome:
    if intent.undo is not None:
        return _undo(paths, intent, sync_daemon)
    outcome = Outcome()
    steps = intent.steps()
    taken = 0
    if intent.whole:
        sync_daemon()  # the views a directory served whole is re-pointed to are served first
    try:
        _clean_temps(steps)
        for step in steps:
            taken += 1
            _step(outcome, step.forward())
            fault_point(f"{intent.op}:{step.fault}")
        _clean_temps(steps)
    except AgentDirectoryError as exc:
        # In the first run exactly the steps up to this one were taken; a change finished
        # after a crash may have taken any of them.
        intent.undo = Undo(taken if first else len(steps), str(exc))
        write_private(paths.intent, intent.to_json())
        fault_point(f"{intent.op}:undo-intent")
        return _undo(paths, intent, sync_daemon)
    if intent.project is not None:
        _project_step(outcome, intent.op, intent.project)
    write_private(paths.state, intent.state)  # sound: made by to_json, or read back checked
    fault_point(f"{intent.op}:commit")
    sync_daemon()
    _delete_from_store(paths, intent.delete_files)
    fault_point(f"{intent.op}:cleanup")
    with contextlib.suppress(FileNotFoundError):
        os.unlink(paths.intent)
    return outcome


def _project_step(outcome: Outcome, op: str, files: ProjectFiles) -> None:
    if files.exclude is not None:
        _step(outcome, git_exclude.apply(Path(files.exclude), files.exclude_add,
                                         files.exclude_remove))
        fault_point(f"{op}:exclude")
    if files.lock_new is not None:
        old = None if files.lock_old is None else files.lock_old.encode()
        _step(outcome, lockfile.replace(Path(files.project), old, files.lock_new.encode()))
        fault_point(f"{op}:lock")


def _undo(paths: LibraryPaths, intent: Intent, sync_daemon: Callable[[], None]) -> Outcome:
    """Take the first `undo.done` steps back, newest first, and keep the state as it was; the
    store files only this change brought are orphans then (AgentDirectoryError, the intent
    kept, when a directory refuses a step back too)."""
    assert intent.undo is not None
    outcome = Outcome(undone=intent.undo.failure)
    steps = intent.steps()
    try:
        _clean_temps(steps)
        for step in reversed(steps[:intent.undo.done]):
            _step(outcome, step.backward())
            fault_point(f"{intent.op}:undo")
        _clean_temps(steps)
    except AgentDirectoryError as exc:  # the intent stays: the next command goes on undoing
        raise AgentDirectoryError(
            exc.directory, f"{exc.reason}; acxfs {intent.op} failed ({intent.undo.failure}) "
            "and cannot be undone there yet: the next acxfs command finishes undoing it once "
            "that directory can be written") from exc
    _remove_orphans(paths)
    sync_daemon()  # it drops what it loaded for the change
    fault_point(f"{intent.op}:undone")
    with contextlib.suppress(FileNotFoundError):
        os.unlink(paths.intent)
    return outcome


def _clean_temps(steps: list[Step]) -> None:
    for step in steps:
        agent_links.clean_temp(step.directory, step.temp, step.targets())


def _step(outcome: Outcome, refusal: str | None) -> None:
    if refusal:
        outcome.skipped.append(refusal)


def recover(paths: LibraryPaths, sync_daemon: Callable[[], None]) -> Outcome | None:
    """Finish the change an earlier command began, if any; remove orphan store files (and
    have the daemon drop what it loaded of them).  A damaged intent or state stops it before
    any step (`DamagedState`)."""
    outcome = None
    places = Places.of(paths.root)
    data = own_files.read_file(paths.intent, MAX_INTENT_BYTES)
    if data is not None:
        intent = Intent.from_json(data, paths.intent, places)
        outcome = _finish(paths, intent, sync_daemon)
    if _remove_orphans(paths):
        sync_daemon()
    return outcome


def _delete_from_store(paths: LibraryPaths, names: list[str]) -> None:
    """Remove the store files `names` (files or links, never followed: no directory)."""
    store = guard.open_store(paths)
    if store is None:
        return
    try:
        for name in names:
            with contextlib.suppress(FileNotFoundError, IsADirectoryError):
                info = os.stat(name, dir_fd=store, follow_symlinks=False)
                if not stat.S_ISDIR(info.st_mode):
                    os.unlink(name, dir_fd=store)
    finally:
        os.close(store)


def _remove_orphans(paths: LibraryPaths) -> bool:
    """Remove the store files no state names (copies of an `add` killed before it wrote its
    intent); whether there were any.  With no state at all while links of acxfs in the
    agent directories point into the library, the state was lost, not never written: the
    store is what `acxfs repair` rebuilds it from, so nothing is removed (DamagedState)."""
    state = load_state(paths.state)
    keep = state.store_files() if state else set()
    store = guard.open_store(paths)
    if store is None:
        return False
    try:
        orphans = [name for name in os.listdir(store) if name not in keep]
    finally:
        os.close(store)
    if state is None and orphans and _links_into(paths.mnt, Places.of(paths.root)):
        raise DamagedState(str(paths.state), "(the file)",
                           f"missing, while {len(orphans)} store files are there and links "
                           "of acxfs point into the library")
    _delete_from_store(paths, orphans)
    return bool(orphans)


def _links_into(mnt: Path, places: Places) -> bool:
    """Whether any agent directory of this home holds a link into the library's `mnt`."""
    inside = f"{mnt}{os.sep}"
    for directory in sorted(places.agent_directories):
        with contextlib.suppress(OSError):  # a directory served whole is itself such a link
            if os.readlink(directory).startswith(inside):
                return True
        with contextlib.suppress(OSError), os.scandir(directory) as entries:
            for entry in entries:
                if entry.is_symlink() and os.readlink(entry.path).startswith(inside):
                    return True
    return False
