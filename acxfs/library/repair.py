"""`acxfs repair`: the library's state rebuilt from what acxfs can prove, when its own files
are damaged (or `library.json` is gone while the store is not).

Invariant: repair runs under the library's lock, changes nothing while the library is
sound, and otherwise keeps every damaged file it replaces (renamed to
`NAME.damaged-<UTC time>`, never deleted) and records only what it proved itself: a store
file whose bytes hash to its name and that passes its check against the trust store now (its
identity, version and skills read from its signed facts, as `add` reads them), and a link
that is provably acxfs's: a symbolic link in an agent directory of this home, named like a
skill of such a store file and aimed exactly at that skill's path in the library's
mountpoint (or at the path an earlier acxfs served it at, re-pointed then).  An agent
directory that is itself a link aimed exactly at a view right below that mountpoint is
acxfs's, served whole: it stays so, showing the skills its view's name proves it showed
(the skills the daemon lists in it, or all of them, or those linked elsewhere, whichever
hashes to that name), or, when none does, every skill the library keeps, said.  Links are
changed only through one journalled intent, as every other change.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import hashlib
import os
import stat
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from acxfs import formats, semver
from acxfs.errors import AcxfsError, DaemonDown, DamagedState, ForeignDirectory, UnsafePathError
from acxfs.library.changes import journal
from acxfs.library.changes.plan import library_intent, target
from acxfs.library.links import agent_links, guard
from acxfs.library.links.agent_links import Link
from acxfs.library.links.agents import AGENTS
from acxfs.library.manager import Library
from acxfs.library.serving.control import ControlClient
from acxfs.library.store import views
from acxfs.library.store.served_names import earlier_path
from acxfs.library.store.state import (
    Floor,
    Installed,
    LibraryState,
    Places,
    Revision,
    load_state,
    store_name_problem,
)
from acxfs.paths import trust_dir
from acxfs.safe import dirs as safe_dirs
from acxfs.safe import own_files, ownership
from acxfs.text import printable
from acxfs.trust.policy import TrustContext
from acxfs.trust.store import load_trust

Say = Callable[[str], None]


@dataclass
class _Rebuilt:
    """The state repair will commit and the link steps that take the links there."""

    state: LibraryState
    whole: dict[str, str] = field(default_factory=dict)  # directory served whole -> its view
    make: list[Link] = field(default_factory=list)
    repoint: list[tuple[Link, Link]] = field(default_factory=list)
    remove: list[Link] = field(default_factory=list)


def repair(library: Library) -> int:
    """Repair `library` (see the module docstring); 0 when it is sound or was repaired."""
    paths = library.paths
    places = Places.of(paths.root, library.home)
    stamp = dt.datetime.now(dt.UTC).strftime("%Y%m%dT%H%M%SZ")
    with journal.locked(paths):
        root = guard.open_root(paths)
        try:
            old, state_damaged = _read_state(paths.state, places, library.note)
            if state_damaged:
                _keep_aside(root, paths.state.name, stamp, library.note)
            intent_damaged = False
            data = None
            try:
                data = own_files.read_file(paths.intent, journal.MAX_INTENT_BYTES)
                if data is not None:
                    journal.Intent.from_json(data, paths.intent, places)
            except DamagedState as exc:
                library.note(printable(f"acxfs: note: {exc}"))
                _keep_aside(root, paths.intent.name, stamp, library.note)
                intent_damaged = True
        finally:
            os.close(root)
        if not intent_damaged and data is not None:
            # A sound unfinished change: finishing it writes the state it was making.
            library.recover()
            library.say("repaired the library: finished the change an earlier command left "
                        "unfinished")
            return 0
        store_files = _store_names(paths.store)
        if not (state_damaged or intent_damaged) and (old is not None or not store_files):
            library.say("the library is not damaged: nothing to repair")
            return 0
        recorded = old.trust_dir if old is not None else str(trust_dir())
        trust = load_trust(store=Path(recorded))
        found = [rev for name in store_files
                 if (rev := _check_store_file(paths.store, name, trust, library.note))]
        rebuilt = _rebuild(library, found, old, recorded)
        before = LibraryState(recorded, whole=dict(rebuilt.whole))
        intent = library_intent("repair", before, rebuilt.state, paths.mnt, rebuilt.make,
                                rebuilt.repoint, rebuilt.remove)
        outcome = journal.carry_out(paths, intent, lambda: _sync(library))
    for line in outcome.skipped:
        library.note(printable(f"acxfs: note: {line}"))
    for identity, item in sorted(rebuilt.state.installed.items()):
        previous = f", previous {item.previous.version}" if item.previous else ""
        library.say(printable(f"{identity}: {item.current.version}{previous} "
                              f"({len(item.links)} links)"))
    library.say(f"repaired the library: {len(rebuilt.state.installed)} bundles "
                "(acxfs list shows them)")
    return 0


def _sync(library: Library) -> None:
    with contextlib.suppress(DaemonDown):
        ControlClient(library.paths.socket).sync()


def _read_state(path: Path, places: Places, note: Say) -> tuple[LibraryState | None, bool]:
    """The state if it is sound, and whether it is damaged."""
    try:
        return load_state(path, places), False
    except DamagedState as exc:
        note(printable(f"acxfs: note: {exc}"))
        return None, True


def _keep_aside(root_fd: int, name: str, stamp: str, note: Say) -> None:
    """Rename the damaged `name` to a name of its own beside it (whatever it is: a FIFO or
    a link is renamed, never opened)."""
    for count in range(100):
        aside = f"{name}.damaged-{stamp}" + (f"-{count}" if count else "")
        try:
            safe_dirs.rename_noreplace_at(root_fd, name, root_fd, aside)
        except FileExistsError:
            continue
        note(printable(f"acxfs: note: kept the damaged {name} as {aside}"))
        return
    raise FileExistsError(f"no free name to keep the damaged {name} as")


def _store_names(store: Path) -> list[str]:
    try:
        fd = safe_dirs.open_dir(store)
    except FileNotFoundError:
        return []
    try:
        listing = os.open(".", os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC, dir_fd=fd)
    finally:
        os.close(fd)
    try:
        return sorted(os.listdir(listing))
    finally:
        os.close(listing)


def _check_store_file(store: Path, name: str, trust: TrustContext,
                      note: Say) -> Revision | None:
    """The revision the store file `name` is, if its bytes hash to its name and it passes
    its check now; otherwise None, said."""
    problem = store_name_problem(name)
    if problem is not None:
        if not name.startswith(".acxfs-"):  # a temporary file of an interrupted add
            note(printable(f"acxfs: note: store entry {name} is left out: {problem}"))
        return None
    store_fd = safe_dirs.open_dir(store)
    try:
        fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC,
                     dir_fd=store_fd)
    except OSError as exc:
        note(printable(f"acxfs: note: store entry {name} is left out: {exc.strerror}"))
        return None
    finally:
        os.close(store_fd)
    try:
        info = os.fstat(fd)
        why = _why_not(fd, name, info, trust)
        if isinstance(why, Revision):
            return why
        note(printable(f"acxfs: note: store file {name} is left out ({why}); the next "
                       "library command deletes it: add the bundle again once it verifies"))
        return None
    finally:
        os.close(fd)


def _why_not(fd: int, name: str, info: os.stat_result, trust: TrustContext) -> Revision | str:
    if not stat.S_ISREG(info.st_mode):
        return "not a regular file"
    hasher = hashlib.sha256()
    while chunk := os.read(fd, 1024 * 1024):
        hasher.update(chunk)
    if hasher.hexdigest() != name[:64]:
        return "its bytes do not hash to its name"
    try:
        report = formats.check(f"/proc/self/fd/{fd}", trust, deep=False)
        if report.verdict.status != "verified":
            return report.verdict.line
        identity = formats.identity(report)
        skills = formats.skills(report)
    except AcxfsError as exc:
        return str(exc)
    if name != f"{name[:64]}.{report.format}":
        return "its name does not say its format"
    installed = dt.datetime.fromtimestamp(info.st_mtime, dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    return Revision(digest=name[:64], file=name, format=report.format, identity=identity.name,
                    version=identity.version, manifest=identity.release,
                    keyid=report.verdict.keyid or "", publisher=report.verdict.publisher,
                    skills=skills, installed_at=installed)


def _whole_directories(library: Library) -> dict[str, str]:
    """Every agent directory that is provably acxfs's served whole (a link aimed exactly at a
    view right below the library's mountpoint): directory -> that view."""
    found: dict[str, str] = {}
    for directory in _agent_directories(library.home):
        try:
            aimed = os.readlink(directory)
        except OSError:
            continue  # absent, or not a link: not served whole
        if views.view_target_problem(str(library.paths.mnt), aimed) is None:
            found[directory] = aimed
    return found


def _provable_links(library: Library, found: list[Revision],
                    whole: dict[str, str]) -> list[tuple[Link, Revision]]:
    """Every link in the agent directories not served whole (`whole`) that is provably
    acxfs's (module docstring), with the revision it serves."""
    mnt = library.paths.mnt
    expected = {(skill, target(mnt, rev, skill)): rev for rev in found for skill in rev.skills}
    expected |= {(skill, str(mnt / earlier_path(rev.identity, rev.version, rev.digest) / skill)):
                 rev for rev in found for skill in rev.skills}
    links: list[tuple[Link, Revision]] = []
    for directory in _agent_directories(library.home):
        if directory in whole:
            continue  # never listed through its link
        try:
            path_fd = ownership.open_dir(directory, allow_user_symlink=True)
        except (FileNotFoundError, NotADirectoryError):
            continue
        except (ForeignDirectory, UnsafePathError) as exc:
            library.note(printable(f"acxfs: note: {exc}; its links are left as they are"))
            continue
        try:
            listing = os.open(".", os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC, dir_fd=path_fd)
            try:
                names = sorted(os.listdir(listing))
            finally:
                os.close(listing)
            for name in names:
                try:
                    aimed = os.readlink(name, dir_fd=path_fd)
                except OSError:
                    continue  # not a link: not acxfs's
                rev = expected.get((name, aimed))
                if rev is not None:
                    links.append((Link(directory, name, aimed), rev))
        finally:
            os.close(path_fd)
    return links


def _agent_directories(home: Path) -> list[str]:
    return list(dict.fromkeys(str(home / agent.directory) for agent in AGENTS))


def _by_version(revisions: list[Revision]) -> list[Revision]:
    """Highest SemVer precedence first (a version that is none last), then latest first."""
    parsed = [r for r in revisions if semver.is_semver(r.version)]
    rest = [r for r in revisions if not semver.is_semver(r.version)]
    parsed.sort(key=lambda r: (semver.parse(r.version), r.installed_at), reverse=True)
    return parsed + rest


def _rebuild(library: Library, found: list[Revision], old: LibraryState | None,
             recorded: str) -> _Rebuilt:
    whole = _whole_directories(library)
    links = _provable_links(library, found, whole)
    rebuilt = _Rebuilt(LibraryState(recorded, {}, dict(old.floors) if old else {}), whole=whole)
    if old is not None:
        rebuilt.state.refresh_every = old.refresh_every
    by_identity: dict[str, list[Revision]] = {}
    for rev in found:
        by_identity.setdefault(rev.identity, []).append(rev)
    linked = {rev.digest: 0 for rev in found}
    for _, rev in links:
        linked[rev.digest] += 1
    # Identities with links first: they are what agents read now, and win a skill name.
    order = sorted(by_identity, key=lambda i: (-max(linked[r.digest] for r in by_identity[i]),
                                               i))
    taken: set[str] = set()
    for identity in order:
        ranked = _by_version(by_identity[identity])
        # The highest version an agent reads now (an interrupted update is finished forward).
        current = next((r for r in ranked if linked[r.digest]), ranked[0])
        others = [r for r in ranked if r is not current]
        if taken & set(current.skills):
            library.note(printable(f"acxfs: note: {identity} is left out: one of its skills "
                                   "is another bundle's"))
            rebuilt.remove.extend(link for link, rev in links if rev.identity == identity)
            continue
        taken |= set(current.skills)
        previous = others[0] if others else None
        for dropped in others[1:]:
            library.note(printable(f"acxfs: note: {identity} {dropped.version} is left out "
                                   "(the library keeps two revisions of an identity)"))
        item = Installed(current, previous)
        if old is not None and identity in old.installed:
            item.updates = old.installed[identity].updates
        for link, rev in links:
            if rev.identity != identity:
                continue
            if link.directory not in item.directories:
                item.directories.append(link.directory)
            now = Link(link.directory, link.name, target(library.paths.mnt, current, link.name))
            if rev is current and link.target == now.target:
                item.links.append(link)
            elif link.name in current.skills:
                rebuilt.repoint.append((link, now))
                item.links.append(now)
            else:
                rebuilt.remove.append(link)
        _complete(item, library.paths.mnt, rebuilt, library.note)
        rebuilt.state.installed[identity] = item
        _raise_floor(rebuilt.state, current, previous)
    for directory, view in sorted(whole.items()):
        _show_whole(rebuilt.state, directory, view, library.paths.mnt, library.note)
    return rebuilt


def _show_whole(state: LibraryState, directory: str, view: str, mnt: Path, note: Say) -> None:
    """Record `directory` served whole in `state`, showing the skills its view's name proves
    it showed (module docstring), or every skill of `state` when no candidate hashes to it."""
    offered = {skill: item for item in state.installed.values() for skill in item.current.skills}

    def content(skills: set[str]) -> dict[str, str]:
        return {s: target(mnt, offered[s].current, s) for s in skills}

    try:
        listed = set(os.listdir(view)) & set(offered)  # the daemon's, when it is up
    except OSError:
        listed = set()
    linked = {link.name for item in state.installed.values() for link in item.links}
    name = os.path.basename(view)
    chosen = next((skills for skills in (listed, set(offered), linked & set(offered))
                   if views.view_name(content(skills)) == name), None)
    if chosen is None:
        chosen = set(offered)
        note(printable(f"acxfs: note: {directory} is served whole; which skills it showed "
                       "cannot be proved, so it shows every skill of the library"))
    for skill in sorted(chosen):
        item = offered[skill]
        item.links.append(Link(directory, skill, target(mnt, item.current, skill)))
        if directory not in item.directories:
            item.directories.append(directory)
    state.whole[directory] = view


def _complete(item: Installed, mnt: Path, rebuilt: _Rebuilt, note: Say) -> None:
    """Links of the current revision missing in a directory it is linked into (a change
    interrupted midway) are made, where nothing is in their way."""
    have = {(link.directory, link.name) for link in item.links}
    for directory in item.directories:
        for skill in sorted(item.current.skills):
            if (directory, skill) in have:
                continue
            link = Link(directory, skill, target(mnt, item.current, skill))
            problem = agent_links.conflict(link)
            if problem:
                note(printable(f"acxfs: note: {problem}; not linked"))
                continue
            rebuilt.make.append(link)
            item.links.append(link)


def _raise_floor(state: LibraryState, *revisions: Revision | None) -> None:
    for rev in revisions:
        if rev is None:
            continue
        floor = state.floors.get(rev.identity)
        try:
            higher = floor is None or semver.parse(rev.version) > semver.parse(floor.version)
        except ValueError:
            continue
        if higher:
            state.floors[rev.identity] = Floor(rev.version, rev.manifest, rev.installed_at)
