"""The library daemon: one FUSE mount serving every installed bundle at its immutable path.

Invariant: a bundle is served only after this process itself checked its store file (its
sha256 against the digest its name records, structure, signature, trust against the trust
store as it is now, identity, signed release and skills as the library recorded them), while
the policy in effect (`policy.json`) allows its source, publisher and key, and only under a
served name no other bundle has (`served_names`); from then on every byte is verified
when read, as in any acxfs mount.  A bundle that fails its check is not served and the reason
is kept for `acxfs list`.  An agent directory served whole is a view (`views`) of skills of
served bundles, each the very source its bundle is served through; the views of a change
written down but not yet carried out (the journal's intent) are served before its links
move, and the views a change superseded are served on (the newest few), showing what they
named only while it is served.  The daemon takes changes only over its control channel
(`control.py`), from its owner.  A daemon whose control socket is gone, or the stale mount of
one that died, is found by its mount (`orphan`) and unmounted by `down` and before `up`
starts a new one.  Whether a daemon runs is asked of its socket (`control.running`): only a
command that starts or stops one imports this module and the mount stack under it.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import posixpath
import re
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path

from acxfs import formats
from acxfs.container import Report
from acxfs.content.cache import VerifiedCache, process_cache
from acxfs.errors import AcxfsError, EnvironmentProblem, TrustConfigError, UntrustedError
from acxfs.library.changes import journal
from acxfs.library.links import agent_links, guard
from acxfs.library.serving.control import ControlServer, Op, running
from acxfs.library.serving.last_read import LastRead
from acxfs.library.serving.schedule import Schedule, run_check
from acxfs.library.store import views
from acxfs.library.store.checks import load_checks, parse_time
from acxfs.library.store.served_names import served_name
from acxfs.library.store.state import (
    DEFAULT_REFRESH_EVERY,
    MAX_STATE_BYTES,
    LibraryState,
    Places,
    Revision,
    load_state,
)
from acxfs.limits import DEFAULT_LIMITS
from acxfs.mount import backend as fuse_backend
from acxfs.mount import lifecycle
from acxfs.mount.operations import AcxOperations
from acxfs.mount.records import alive, log_line, read_state
from acxfs.mount.router import Mounted
from acxfs.mount.table import canonical, live_mounts
from acxfs.paths import LibraryPaths
from acxfs.safe import own_files
from acxfs.sources.policy import load_policy
from acxfs.trust.policy import TrustContext
from acxfs.trust.store import load_trust

STORE_NAME = re.compile(r"([0-9a-f]{64})\.([a-z]+)")
FAILURES_KEPT = 1000
EXPIRY_RECHECK = 3600.0  # seconds between re-checks of key expiry and revocation
# Contents never change under a served path, so the kernel keeps entries, attributes and
# negative lookups for a day; the mount invalidates the made-up directories'
# entries whenever the served set changes (acxfs.mount.invalidation), so a new path is seen
# the moment it is loaded and a path no longer served (removed, or its signer no longer
# trusted) is gone at once.  Where libfuse cannot invalidate: nothing negative is cached and
# the rest for a minute.
KERNEL_CACHE = {"negative_timeout": 86400, "entry_timeout": 86400, "attr_timeout": 86400}
UNCACHED = {"negative_timeout": 0, "entry_timeout": 60, "attr_timeout": 60}
START_LINE = re.compile(r"^\S+ \[(\d+)\] start: library ")  # records.log_line's form
LOG_TAIL = 1024 * 1024
HASH_CHUNK = 1024 * 1024  # bytes of the log read back for the last start


# Views superseded by a change that are served on: Codex tells its model each skill's real
# path, through the view its agent directory linked to when it started.
KEPT_VIEWS = 8


@dataclass
class LibraryDaemon:
    """What the daemon serves, what it refused and why, and the files that failed."""

    paths: LibraryPaths
    trust_dir: Path
    cache: VerifiedCache
    ops: AcxOperations | None = None
    served: dict[str, Mounted] = field(default_factory=dict)
    files: dict[str, str] = field(default_factory=dict)  # prefix -> store file
    refused: dict[str, str] = field(default_factory=dict)  # prefix -> why
    shown: dict[str, Mounted] = field(default_factory=dict)  # "<view>/<skill>" -> its source
    views: frozenset[str] = frozenset()  # the views the agent directories link to
    contents: dict[str, dict[str, str]] = field(default_factory=dict)  # of `views`
    # views no agent directory links to any more, served on (oldest first, at most
    # KEPT_VIEWS): a running agent may have been told a skill's path through one
    superseded: dict[str, dict[str, str]] = field(default_factory=dict)
    _control: ControlServer | None = None
    _states: LastRead[LibraryState] = field(init=False)
    _intents: LastRead[LibraryState | None] = field(init=False)
    schedule: Schedule | None = None
    after_live: Callable[[], None] | None = None

    def __post_init__(self) -> None:
        self._states = LastRead(lambda data: LibraryState.from_json(data, self.paths.state))
        self._intents = LastRead(self._pending)

    # --- checking ------------------------------------------------------------------------

    def _trust(self) -> TrustContext:
        return load_trust(store=self.trust_dir)

    def _barred(self) -> Callable[[Revision], str | None]:
        """Why the policy in effect now bars a revision (None: it allows it); an unusable
        policy bars every one, as it stops every library command."""
        try:
            policy = load_policy(self.trust_dir)
        except TrustConfigError as exc:
            reason = str(exc)
            return lambda rev: reason
        return lambda rev: policy.refusal_of(rev.source, rev.publisher, rev.keyid)

    def _barred_in(self, state: LibraryState) -> Callable[[Revision], str | None]:
        """`_barred`, and a release its source withdrew, yanked or revoked is barred too
        (unless the policy keeps serving it: then the library never marks it)."""
        policy = self._barred()
        try:
            warn = load_policy(self.trust_dir).warn_withdrawn
        except TrustConfigError:
            warn = False
        pulled = {} if warn else state.pulled_prefixes()
        return lambda rev: pulled.get(rev.prefix) or policy(rev)

    def _prefix(self, file: str, report: Report, expected: Revision | None) -> str:
        """The path a verified store file is served under (AcxfsError unless `report` is
        verified and, when `expected`, still what was installed)."""
        match = STORE_NAME.fullmatch(file)
        if match is None:
            raise AcxfsError(f"{file!r} is not a store file name")
        verdict = report.verdict
        if verdict.status != "verified":
            raise AcxfsError(verdict.line)
        identity = formats.identity(report)
        skills = formats.skills(report)
        prefix = served_name(identity.name, identity.version, match.group(1))
        if expected is not None and (expected.prefix, expected.skills) != (prefix, skills):
            raise AcxfsError("the store file no longer matches what was installed")
        if expected is not None and identity.release != expected.manifest:
            raise AcxfsError(f"the store file is another signed release ({identity.release}) "
                             f"than the one installed ({expected.manifest})")
        return prefix

    def _digest_check(self, file: str) -> tuple[int, int]:
        """The store file's sha256 must be the digest its name records (the one `acxfs list`
        shows); the (device, inode) of the file hashed."""
        match = STORE_NAME.fullmatch(file)
        if match is None:
            raise AcxfsError(f"{file!r} is not a store file name")
        fd = os.open(self.paths.store / file, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
        try:
            hasher = hashlib.sha256()
            while piece := os.read(fd, HASH_CHUNK):
                hasher.update(piece)
            info = os.fstat(fd)
        finally:
            os.close(fd)
        if hasher.hexdigest() != match.group(1):
            raise AcxfsError(f"the store file's sha256 is {hasher.hexdigest()}, not the digest "
                             "it was installed with: it was replaced or changed since")
        return info.st_dev, info.st_ino

    def recheck(self, file: str, trust: TrustContext, expected: Revision | None) -> str:
        """Check the store file again without opening it to serve (a bundle already served
        stays served through the source it has); its prefix."""
        report = formats.check(str(self.paths.store / file), trust, deep=False)
        return self._prefix(file, report, expected)

    def open_revision(self, file: str, trust: TrustContext,
                      expected: Revision | None) -> Mounted:
        """The store file, checked once now, as a source ready to serve at its prefix."""
        path = str(self.paths.store / file)
        hashed = self._digest_check(file)
        try:
            source, report = formats.open_source(path, trust, self.cache, min_trust="verified")
        except UntrustedError as exc:
            raise AcxfsError(exc.verdict.line) from exc
        try:
            info = os.stat(path, follow_symlinks=False)
            if (info.st_dev, info.st_ino) != hashed:
                raise AcxfsError("the store file was replaced while it was checked")
            prefix = self._prefix(file, report, expected)
            identity = formats.identity(report)
            # Shown no older than the install: an agent that polls mtimes (Claude Code)
            # notices an update even when the new SKILL.md has the old one's size and mtime.
            installed = os.stat(path).st_mtime_ns
        except BaseException:
            source.close()
            raise
        return Mounted(prefix, source, source.skills_root, report.verdict,
                       f"{identity.name} {identity.version}", min_mtime_ns=installed)

    def _attach(self, mounted: Mounted, file: str) -> None:
        """Serve `mounted` (AcxfsError, and it is closed, if its served name is taken)."""
        if mounted.prefix in self.served:
            mounted.source.close()
            raise AcxfsError(f"its served name {mounted.prefix} is another bundle's")
        if self.ops is not None:
            self.ops.attach(mounted.prefix, mounted)
        self.served[mounted.prefix] = mounted
        self.files[mounted.prefix] = file
        self.refused.pop(mounted.prefix, None)

    def _detach(self, prefix: str) -> None:
        mounted = self.served.pop(prefix, None)
        self.files.pop(prefix, None)
        if mounted is not None and self.ops is not None:
            self.ops.detach(prefix)
        if mounted is not None:  # and every view showing a skill of it, with it
            self._hide([e for e, m in self.shown.items() if m.source is mounted.source])

    # --- views of agent directories served whole ---------------------------------------

    def _show(self, wanted: dict[str, dict[str, str]]) -> None:
        """Serve the views `wanted` (name -> content) and the newest KEPT_VIEWS views they
        superseded, each skill in them through the source its revision is served with now
        (none for a revision not served)."""
        for name in self.views - set(wanted):
            self.superseded[name] = self.contents[name]
        oldest = list(self.superseded)[:max(0, len(self.superseded) - KEPT_VIEWS)]
        for name in [*wanted, *oldest]:
            self.superseded.pop(name, None)
        self.contents = dict(wanted)
        entries: dict[str, Mounted] = {}
        for name, content in {**self.superseded, **wanted}.items():
            for skill, (served, inside) in views.served_paths(content, self.paths.mnt).items():
                mounted = self.served.get(served)
                if mounted is not None:
                    entry = f"{name}/{skill}"
                    root = posixpath.join(mounted.root, inside) if mounted.root else inside
                    entries[entry] = replace(mounted, prefix=entry, root=root)
        self._hide([entry for entry, mounted in self.shown.items()
                    if entries.get(entry) != mounted])
        self.views = frozenset(wanted)
        if self.ops is not None:
            self.ops.reserve(self.views)
        adding = {entry: mounted for entry, mounted in entries.items()
                  if entry not in self.shown}
        if self.ops is not None and adding:
            self.ops.attach_all(adding)
        self.shown.update(adding)

    def _hide(self, entries: list[str]) -> None:
        gone = [entry for entry in entries if self.shown.pop(entry, None) is not None]
        if self.ops is not None and gone:
            self.ops.detach_all(gone)

    def _wanted(self) -> tuple[LibraryState | None, list[LibraryState]]:
        """The committed state, and every state whose revisions and views are served: it
        and the state of a change written down and not being undone (whose links move once
        what they lead to is served)."""
        state = self._committed()
        states = [state] if state is not None else []
        try:
            data = own_files.read_file(self.paths.intent, journal.MAX_INTENT_BYTES)
            pending = None if data is None else self._intents.of(data)
            if pending is not None:
                states.append(pending)
        except (AcxfsError, OSError):
            pass  # a damaged intent is the next command's to report; nothing of it is served
        return state, states

    def _committed(self) -> LibraryState | None:
        try:
            data = own_files.read_file(self.paths.state, MAX_STATE_BYTES)
        except OSError as exc:
            raise EnvironmentProblem(f"cannot read the library state {self.paths.state} "
                                     f"({exc.strerror})") from exc
        return None if data is None else self._states.of(data)

    def _pending(self, data: bytes) -> LibraryState | None:
        """The state a change written down in the intent `data` makes (None: being undone)."""
        intent = journal.Intent.from_json(data, self.paths.intent, Places.of(self.paths.root))
        if intent.undo is not None:
            return None
        return self._states.of(intent.state.encode())

    def initial(self, state: LibraryState) -> list[Mounted]:
        """Check every installed revision before the mount exists."""
        trust, barred = self._trust(), self._barred_in(state)
        revisions = list(state.revisions())
        read_ahead(self.paths.store, [rev.file for rev in revisions])
        for rev in revisions:
            if (why := barred(rev)) is not None:
                self.refused[rev.prefix] = why
                continue
            try:
                self._attach(self.open_revision(rev.file, trust, rev), rev.file)
            except (AcxfsError, OSError, ValueError) as exc:
                self.refused[rev.prefix] = str(exc)
        self._show(state.views(self.paths.mnt))
        return [*self.served.values(), *self.shown.values()]

    def sync(self, recheck: bool) -> None:
        """Serve exactly the library's revisions (re-checking the served ones on `recheck`)."""
        state, states = self._wanted()
        wanted = {r.prefix: r for each in states for r in each.revisions()}
        for prefix in list(self.served):
            if prefix not in wanted:
                self._detach(prefix)
        for prefix in list(self.refused):
            if prefix not in wanted:
                del self.refused[prefix]
        trust = self._trust()
        barred = self._barred_in(state) if state else self._barred()
        for prefix, rev in wanted.items():
            if (why := barred(rev)) is not None:
                self._detach(prefix)
                self.refused[prefix] = why
                continue
            if prefix in self.served and not recheck:
                continue
            try:
                if prefix in self.served:
                    self.recheck(rev.file, trust, rev)  # still good: keep the one serving
                else:
                    self._attach(self.open_revision(rev.file, trust, rev), rev.file)
            except (AcxfsError, OSError, ValueError) as exc:
                self._detach(prefix)
                self.refused[prefix] = str(exc)
        self._show({name: content for each in states
                    for name, content in each.views(self.paths.mnt).items()})

    # --- the control channel -------------------------------------------------------------

    def handle(self, doc: dict[str, object]) -> dict[str, object]:
        op = doc.get("op")
        try:
            if op == Op.PING:
                return {"ok": True, "pid": os.getpid()}
            if op == Op.STATUS:
                return self.status()
            if op == Op.LOAD:
                file = str(doc.get("file"))
                trust = self._trust()
                if file in self.files.values():  # served already: its check again
                    prefix = self.recheck(file, trust, None)
                else:  # one check, by the open that serves it
                    mounted = self.open_revision(file, trust, None)
                    prefix = mounted.prefix
                    self._attach(mounted, file)
                return {"ok": True, "path": str(self.paths.mnt / prefix)}
            if op == Op.SCHEDULE:
                if self.schedule is not None:
                    self.schedule.wake()
                return {"ok": True}
            if op in (Op.SYNC, Op.RELOAD):
                self.sync(recheck=op == Op.RELOAD)
                return self.status()
        except (AcxfsError, OSError, ValueError) as exc:  # ValueError: the tree refused it
            return {"ok": False, "error": str(exc)}
        return {"ok": False, "error": f"unknown request {op!r}"}

    def status(self) -> dict[str, object]:
        return {"ok": True, "pid": os.getpid(), "mountpoint": str(self.paths.mnt),
                "served": dict(self.files), "refused": dict(self.refused),
                "views": {name: sorted(e.partition("/")[2] for e in self.shown
                                       if e.partition("/")[0] == name) for name in self.views},
                "failures": self.failures()}

    def failures(self) -> list[dict[str, str]]:
        """The files that failed verification since the daemon started."""
        events = self.ops.tamper_events() if self.ops is not None else []
        return [{"bundle": e.prefix, "label": e.label, "path": e.path, "reason": e.reason}
                for e in events[:FAILURES_KEPT]]

    def serving(self, ops: AcxOperations) -> None:
        """In the daemon, once the mount is live: take requests from now on."""
        self.ops = ops
        agent_links.private_dir(self.paths.control_dir)
        ops.reserve(self.views)  # an empty view has no entry to make it
        self._control = ControlServer(self.paths.socket, self.handle)
        self._control.start()
        if self.after_live is not None:
            threading.Thread(target=self.after_live, name="acxfs-links", daemon=True).start()
        threading.Thread(target=self._recheck_loop, name="acxfs-recheck", daemon=True).start()
        self.schedule = Schedule(self._refresh_interval, self._run_check, self._last_check)
        self.schedule.start()

    def _refresh_interval(self) -> float | None:
        """The library's check interval now (its default while the state cannot be read)."""
        try:
            state = load_state(self.paths.state)
        except AcxfsError:
            return DEFAULT_REFRESH_EVERY
        if state is None:
            return DEFAULT_REFRESH_EVERY
        return None if state.refresh_every is None else float(state.refresh_every)

    def _last_check(self) -> float | None:
        last = load_checks(self.paths.checks).last_round
        return None if last is None else parse_time(last).timestamp()

    def _run_check(self) -> None:
        run_check(lambda message: log_line(self.paths.log, message))

    def _recheck_loop(self) -> None:
        event = threading.Event()
        while not event.wait(EXPIRY_RECHECK):
            if self._control is not None:
                self._control.run(lambda: self.sync(recheck=True))


def read_ahead(store: Path, files: list[str]) -> None:
    """Ask the kernel to read the store files into the page cache, all at once and in the
    background: a start after boot then waits for the disk once, not once per bundle while
    the check of the others waits (the check hashes each file whole anyway; nothing is read
    here, let alone inflated). Best effort: a file that cannot be opened is the check's."""
    for file in files:
        if STORE_NAME.fullmatch(file) is None:
            continue
        try:
            fd = os.open(store / file, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
        except OSError:
            continue
        with contextlib.suppress(OSError):
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_WILLNEED)
        os.close(fd)


@dataclass(frozen=True)
class Orphan:
    """A library mount no control socket reaches: a daemon that lost its socket (`pid`
    alive) or the stale mount of one that died (`pid` None)."""

    pid: int | None

    def describe(self) -> str:
        if self.pid is not None:
            return f"a library daemon (pid {self.pid}) that had lost its control socket"
        return "the stale mount of a library daemon that had died"


def orphan(paths: LibraryPaths) -> Orphan | None:
    """The library's mount when no daemon answers on its socket (None: nothing mounted)."""
    point = canonical(str(paths.mnt))
    if not any(mp == point for _, mp in live_mounts()) or running(paths.socket):
        return None
    return Orphan(_daemon_pid(paths))


def _daemon_pid(paths: LibraryPaths) -> int | None:
    """The live process serving the library's mount, by its mount record or its log, and
    only if /proc shows it is this user's and holds a FUSE connection."""
    record = read_state(str(paths.mnt))
    candidates = [record.pid] if record is not None else []
    candidates += reversed(_started_pids(paths.log))
    for pid in candidates:
        if alive(pid) and _holds_fuse(pid):
            return pid
    return None


def _started_pids(log: Path) -> list[int]:
    """The pids the library's log says started the library's mount, oldest first."""
    try:
        with open(log, "rb") as handle:
            lines = handle.read()[-LOG_TAIL:].decode("utf-8", "replace").splitlines()
    except OSError:
        return []
    return [int(m.group(1)) for m in map(START_LINE.search, lines) if m]


def _holds_fuse(pid: int) -> bool:
    try:
        if os.stat(f"/proc/{pid}").st_uid != os.geteuid():
            return False
        fds = os.listdir(f"/proc/{pid}/fd")
    except OSError:
        return False
    for fd in fds:
        with contextlib.suppress(OSError):
            if os.readlink(f"/proc/{pid}/fd/{fd}") == "/dev/fuse":
                return True
    return False


def _wait_gone(pid: int | None, timeout: float = 5.0) -> None:
    deadline = time.monotonic() + timeout
    while pid is not None and alive(pid) and time.monotonic() < deadline:
        time.sleep(0.02)


def start(paths: LibraryPaths, state: LibraryState, foreground: bool,
          say: Callable[[str], None], on_live: Callable[[], None] | None = None) -> int:
    """Check every bundle, mount the library and serve it (returns once live, or, in the
    foreground, once unmounted).  `on_live` runs on a thread of its own once the daemon
    takes requests."""
    server = LibraryDaemon(paths, Path(state.trust_dir), process_cache(DEFAULT_LIMITS))
    server.after_live = on_live
    mounts = server.initial(state)
    agent_links.private_dir(paths.root)
    guard.make_dir(paths.mnt, 0o755)  # no link on the way: the mount goes where it says
    plan = lifecycle.MountPlan(
        mountpoint=str(paths.mnt), mounts=mounts, cache=server.cache, view="skills library",
        foreground=foreground, log_file=paths.log, created=None, announce=say,
        name=f"library {paths.root}", fuse_options=dict(KERNEL_CACHE),
        uncached_options=dict(UNCACHED), backend=fuse_backend.preferred(),
        on_live=server.serving, reserved=paths.mnt,
        note="every bundle checked at start and at each load; acxfs list shows them",
    )
    for prefix, why in server.refused.items():
        say(f"acxfs: note: not serving {prefix}: {why}")
    return lifecycle.mount(plan)


def stop(paths: LibraryPaths, pid: int | None = None) -> str:
    """Unmount the library (a live daemon's mount or a dead one's stale mount); the daemon
    (`pid`, when known) exits, and its socket goes with it."""
    said = lifecycle.umount(str(paths.mnt))
    _wait_gone(pid)
    if not running(paths.socket):
        with contextlib.suppress(FileNotFoundError):
            os.unlink(paths.socket)
    return said
