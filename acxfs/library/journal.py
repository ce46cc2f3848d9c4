"""One change of the library at a time, and every change finished once begun.

Invariant: the library changes only under `locked`; a change of more than one step is
written down whole (`Intent`: the links to make, re-point and remove, the state to commit,
the store files to delete, a project's exclude lines and lock) and synced before its first
step, and every step is idempotent, so `recover` can always carry an interrupted change to
its end.  A change killed before its intent was written left the old library (an unrecorded
store file is removed as an orphan); one killed after it is finished by the next command or
`acxfs up`.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path

from acxfs.errors import EnvironmentProblem
from acxfs.library import agent_links, git_exclude, lockfile
from acxfs.library.state import LibraryState, Link, load_state, save_state, write_private
from acxfs.paths import LibraryPaths
from acxfs.safe import strict_json

FaultHook = Callable[[str], None]


def _no_fault(step: str) -> None:
    del step


fault_point: FaultHook = _no_fault
"""Called at each step boundary with the step's name; tests replace it (through the
ACXFS_TEST_KILL_AT variable, below) to kill the command there."""


def _env_fault(step: str) -> None:
    if os.environ.get("ACXFS_TEST_KILL_AT") == step:
        os.kill(os.getpid(), 9)


if os.environ.get("ACXFS_TEST_KILL_AT"):
    fault_point = _env_fault


@contextlib.contextmanager
def locked(paths: LibraryPaths) -> Iterator[None]:
    """Hold the library's lock (waits for another command to finish its change).

    A POSIX record lock, not `flock`: a daemon forked while the lock is held does not
    inherit it, so starting the daemon from inside a change never keeps the library locked."""
    agent_links.private_dir(paths.root)
    try:
        fd = os.open(paths.lock, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    except OSError as exc:
        raise EnvironmentProblem(f"cannot open the library lock {paths.lock} "
                                 f"({exc.strerror})") from exc
    try:
        fcntl.lockf(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


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


@dataclass
class Intent:
    """A change written down before its first step."""

    op: str
    make: list[Link] = field(default_factory=list)
    repoint: list[tuple[Link, Link]] = field(default_factory=list)  # (old, new), same path
    remove: list[Link] = field(default_factory=list)
    state: str = ""  # the LibraryState to commit, as JSON
    delete_files: list[str] = field(default_factory=list)  # store file names, after the commit
    project: ProjectFiles | None = None  # a project's exclude lines and lock

    def to_json(self) -> str:
        return json.dumps({
            "op": self.op, "make": [asdict(x) for x in self.make],
            "repoint": [[asdict(a), asdict(b)] for a, b in self.repoint],
            "remove": [asdict(x) for x in self.remove], "state": self.state,
            "deleteFiles": self.delete_files,
            "project": None if self.project is None else asdict(self.project),
        }, indent=1) + "\n"

    @classmethod
    def from_json(cls, text: str) -> Intent:
        doc = strict_json.loads(text)
        if not isinstance(doc, dict):
            raise ValueError("not an object")
        return cls(
            op=str(doc["op"]), make=[Link(**x) for x in doc["make"]],
            repoint=[(Link(**a), Link(**b)) for a, b in doc["repoint"]],
            remove=[Link(**x) for x in doc["remove"]], state=str(doc["state"]),
            delete_files=[str(f) for f in doc["deleteFiles"]],
            project=_project_files(doc.get("project")),
        )


def _project_files(doc: object) -> ProjectFiles | None:
    if doc is None:
        return None
    if not isinstance(doc, dict):
        raise ValueError("project: not an object")
    return ProjectFiles(
        project=str(doc["project"]), exclude=_text_or_none(doc["exclude"]),
        exclude_add=[str(x) for x in doc["exclude_add"]],
        exclude_remove=[str(x) for x in doc["exclude_remove"]],
        lock_old=_text_or_none(doc["lock_old"]), lock_new=_text_or_none(doc["lock_new"]))


def _text_or_none(value: object) -> str | None:
    if value is not None and not isinstance(value, str):
        raise ValueError(f"{value!r} is not text")
    return value


@dataclass
class Outcome:
    """What carrying out an intent met: links it left alone because they were not acxfs's."""

    skipped: list[str] = field(default_factory=list)


def carry_out(paths: LibraryPaths, intent: Intent, sync_daemon: Callable[[], None]) -> Outcome:
    """Write the intent, then do every step of it, then forget it."""
    write_private(paths.intent, intent.to_json())
    fault_point(f"{intent.op}:intent")
    return _finish(paths, intent, sync_daemon)


def _finish(paths: LibraryPaths, intent: Intent, sync_daemon: Callable[[], None]) -> Outcome:
    outcome = Outcome()
    for old, new in intent.repoint:
        _step(outcome, agent_links.repoint(old, new))
        fault_point(f"{intent.op}:repoint")
    for link in intent.remove:
        _step(outcome, agent_links.remove(link))
        fault_point(f"{intent.op}:unlink")
    for link in intent.make:
        _step(outcome, agent_links.make(link))
        fault_point(f"{intent.op}:link")
    if intent.project is not None:
        _project_step(outcome, intent.op, intent.project)
    save_state(paths.state, LibraryState.from_json(intent.state, paths.intent))
    fault_point(f"{intent.op}:commit")
    sync_daemon()
    for name in intent.delete_files:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(paths.store / name)
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


def _step(outcome: Outcome, refusal: str | None) -> None:
    if refusal:
        outcome.skipped.append(refusal)


def recover(paths: LibraryPaths, sync_daemon: Callable[[], None]) -> Outcome | None:
    """Finish the change an earlier command began, if any; remove orphan store files (and
    have the daemon drop what it loaded of them)."""
    outcome = None
    try:
        text = paths.intent.read_text(encoding="utf-8")
    except FileNotFoundError:
        text = None
    if text is not None:
        try:
            intent = Intent.from_json(text)
        except (ValueError, KeyError, TypeError) as exc:
            raise EnvironmentProblem(f"the library's unfinished change {paths.intent} is damaged "
                                     f"({exc}); remove it to give it up") from exc
        outcome = _finish(paths, intent, sync_daemon)
    if _remove_orphans(paths):
        sync_daemon()
    return outcome


def _remove_orphans(paths: LibraryPaths) -> bool:
    """Remove the store files no state names (copies of an `add` killed before it wrote its
    intent); whether there were any."""
    state = load_state(paths.state)
    keep = state.store_files() if state else set()
    try:
        orphans = [name for name in os.listdir(paths.store) if name not in keep]
    except FileNotFoundError:
        return False
    for name in orphans:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(paths.store / name)
    return bool(orphans)
