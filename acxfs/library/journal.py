"""One change of the library at a time, and every change finished once begun.

Invariant: the library changes only under `locked`; a change of more than one step is
written down whole (`Intent`: the links to make, re-point and remove, the state to commit,
the store files to delete) and synced before its first step, and every step is idempotent, so
`recover` can always carry an interrupted change to its end.  A change killed before its intent
was written left the old library (an unrecorded store file is removed as an orphan); one killed
after it is finished by the next command or `acxfs up`.  The intent is read back as untrusted
input (`acxfs.safe.own_files`), the state it holds included, before its first step: a damaged
one stops the command with one line (`acxfs repair` gives it up).
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import re
import stat
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path

from acxfs.errors import EnvironmentProblem
from acxfs.library import agent_links, guard
from acxfs.library.state import (
    MAX_STATE_BYTES,
    LibraryState,
    Link,
    Places,
    load_state,
    save_state,
    store_name_problem,
    write_private,
)
from acxfs.paths import LibraryPaths
from acxfs.safe import own_files
from acxfs.safe.own_files import Field, list_of, pair_of, text

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


@dataclass
class Intent:
    """A change written down before its first step."""

    op: str
    make: list[Link] = field(default_factory=list)
    repoint: list[tuple[Link, Link]] = field(default_factory=list)  # (old, new), same path
    remove: list[Link] = field(default_factory=list)
    state: str = ""  # the LibraryState to commit, as JSON
    delete_files: list[str] = field(default_factory=list)  # store file names, after the commit

    def to_json(self) -> str:
        return json.dumps({
            "op": self.op, "make": [asdict(x) for x in self.make],
            "repoint": [[asdict(a), asdict(b)] for a, b in self.repoint],
            "remove": [asdict(x) for x in self.remove], "state": self.state,
            "deleteFiles": self.delete_files,
        }, indent=1) + "\n"

    @classmethod
    def from_json(cls, text: str | bytes, source: Path, places: Places) -> Intent:
        """The intent `text` holds, its state included (`DamagedState` unless every field,
        and every field of the state, is of its kind)."""
        intent = own_files.parse(text, _intent_table(places), source=str(source),
                                 max_depth=MAX_DEPTH)
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


def _intent_table(places: Places) -> own_files.Table[Intent]:
    link = places.link_table()
    return own_files.Table(Intent, {
        "op": Field(text(_op)),
        "make": Field(list_of(link)),
        "repoint": Field(list_of(pair_of(link))),
        "remove": Field(list_of(link)),
        "state": Field(text(max_len=MAX_STATE_BYTES)),
        "deleteFiles": Field(list_of(text(store_name_problem)), attr="delete_files"),
    }, check=_same_link_path)


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
    save_state(paths.state, LibraryState.from_json(intent.state, paths.intent))
    fault_point(f"{intent.op}:commit")
    sync_daemon()
    _delete_from_store(paths, intent.delete_files)
    fault_point(f"{intent.op}:cleanup")
    with contextlib.suppress(FileNotFoundError):
        os.unlink(paths.intent)
    return outcome


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
    intent); whether there were any."""
    state = load_state(paths.state)
    keep = state.store_files() if state else set()
    store = guard.open_store(paths)
    if store is None:
        return False
    try:
        orphans = [name for name in os.listdir(store) if name not in keep]
    finally:
        os.close(store)
    _delete_from_store(paths, orphans)
    return bool(orphans)
