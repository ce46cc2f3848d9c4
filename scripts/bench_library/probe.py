"""`python3 -m scripts.bench_library.probe OUT -- ACXFS-ARGS...`: one acxfs command, run in this
process with timers around the steps a profile names, for `scripts.bench_library.profile`.

Nothing in acxfs changes: the timers wrap functions and methods by name before the command
runs (a name that no longer exists is skipped, and the profile shows it as absent). The command
(`up`) checks every bundle here, then forks the library daemon, which inherits the timers:

- this process writes `OUT.command.json` when the command returns: seconds and calls per step;
- the daemon starts its own figures when the mount is live, takes a snapshot named L at each
  `getxattr(mnt, "user.acxprobe.mark.L")` (answered ENODATA, counted nowhere) and writes
  `OUT.daemon.json` when it is unmounted: per FUSE operation and per step of a first read
  (the row's SQLite fetch, inflate and sha256), calls and seconds of Python time.

Timers are wall time on the calling thread; nested steps are counted in their parents too.
"""

from __future__ import annotations

import functools
import importlib
import json
import os
import sys
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

MARK = "user.acxprobe.mark."

# (module, attribute path, step name): what the command's profile times.
COMMAND_STEPS = (
    ("acxfs.library.manager", "Library.up", "up: the whole command after imports"),
    ("acxfs.library.manager", "Library.recover", "up: recover (journal)"),
    ("acxfs.library.manager", "Library.state", "up: load library.json"),
    ("acxfs.library.manager", "Library.trust", "up: load the trust store"),
    ("acxfs.library.serving.control", "running", "up: ping the daemon"),
    ("acxfs.library.serving.daemon", "LibraryDaemon.initial", "check: every bundle"),
    ("acxfs.library.serving.daemon", "LibraryDaemon.open_revision",
     "check: one bundle (open_revision)"),
    ("acxfs.library.serving.daemon", "LibraryDaemon._digest_check",
     "check: sha256 of the store file"),
    ("acxfs.formats.acx.source", "PinnedFile", "check: pin the file"),
    ("acxfs.formats.acx.rows", "check_file_header", "check: header and sidecars"),
    ("acxfs.formats.acx.rows", "check_sidecars", "check: header and sidecars"),
    ("acxfs.formats.acx.rows", "connect_readonly", "check: connect"),
    ("acxfs.formats.acx.rows", "_read", "check: read rows (SQL)"),
    ("acxfs.formats.acx.rows", "_check_tables", "check: rows: tables and columns"),
    ("acxfs.formats.acx.rows", "_read_sqlar", "check: rows: sqlar"),
    ("acxfs.formats.acx.rows", "_read_objects", "check: rows: objects"),
    ("acxfs.formats.acx.rows", "_live_oids", "check: rows: live oids"),
    ("acxfs.formats.acx.check", "check_signatures", "check: Ed25519 signature"),
    ("acxfs.formats.acx.check", "parse_envelope", "check: DSSE envelope"),
    ("acxfs.formats.acx.check", "manifest_hash", "check: manifest sha256"),
    ("acxfs.formats.acx.check", "_check_exact_rom", "check: exact ROM"),
    ("acxfs.formats.acx.check", "_report", "check: verified tree"),
    ("acxfs.formats.acx.check", "TrustContext.evaluate", "check: trust decision"),
    ("acxfs.formats.acx.source", "ConnectionPool.serving", "check: serving connection"),
    ("acxfs.formats.acx.source", "CartridgeSource", "check: source object"),
    ("acxfs.library.serving.daemon", "LibraryDaemon._prefix", "check: identity and skills"),
    ("acxfs.library.serving.daemon", "lifecycle.mount", "mount: fork until the daemon is live"),
    ("acxfs.library.manager", "Library._reconcile", "up: reconcile links"),
    ("acxfs.library.manager", "Library._report_links", "up: look at every link"),
)

OPERATIONS = ("getattr", "readdir", "readdir_plus", "read", "access", "getxattr", "listxattr",
              "statfs", "open", "readlink")
READ_STEPS = (
    ("acxfs.content.cache", "rule.verify_content", "read: verify (fetch + inflate + sha256)"),
    ("acxfs.formats.acx.source", "_small_blob", "read: SQLite fetch of the row"),
    ("acxfs.formats.acx.source", "ConnectionPool.take", "read: take a connection"),
)


class Timers:
    """Calls and seconds per step name, safe across threads."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.steps: dict[str, list[float]] = {}
        self.absent: list[str] = []

    def add(self, name: str, seconds: float, cpu: float = 0.0) -> None:
        with self.lock:
            entry = self.steps.setdefault(name, [0, 0.0, 0.0])
            entry[0] += 1
            entry[1] += seconds
            entry[2] += cpu

    def take(self) -> dict[str, list[float]]:
        with self.lock:
            taken, self.steps = self.steps, {}
            return taken


TIMERS = Timers()


def timed(name: str, func: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        start, cpu = time.perf_counter(), time.thread_time()
        try:
            return func(*args, **kwargs)
        finally:
            TIMERS.add(name, time.perf_counter() - start, time.thread_time() - cpu)

    return wrapper


def timed_class(name: str, cls: type[Any]) -> type[Any]:
    """A subclass whose construction is timed (for classes called by name at a use site)."""
    init: Callable[..., None] = cls.__init__

    def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
        start, cpu = time.perf_counter(), time.thread_time()
        try:
            init(self, *args, **kwargs)
        finally:
            TIMERS.add(name, time.perf_counter() - start, time.thread_time() - cpu)

    return type(cls.__name__, (cls,), {"__init__": __init__})


def wrap(module_name: str, path: str, name: str) -> None:
    """Time `module.path` (an attribute path: a function, a method, or a class called there)."""
    try:
        owner: Any = importlib.import_module(module_name)
        *parents, attr = path.split(".")
        for part in parents:
            owner = getattr(owner, part)
        target = getattr(owner, attr)
    except (ImportError, AttributeError):
        TIMERS.absent.append(f"{module_name}.{path}")
        return
    if isinstance(target, type) and not parents:
        setattr(owner, attr, timed_class(name, target))
    elif isinstance(owner, type) and isinstance(owner.__dict__.get(attr), staticmethod):
        setattr(owner, attr, staticmethod(timed(name, target)))
    else:
        setattr(owner, attr, timed(name, target))


def install_daemon_hooks(out: str) -> None:
    """Time every FUSE operation; start at `init`, snapshot at a mark, write at `destroy`."""
    try:
        from acxfs.mount.operations import AcxOperations  # here: acxfs loads after the timers
    except ImportError:
        return
    phases: list[tuple[str, dict[str, list[float]]]] = []
    for op in OPERATIONS:
        if op in AcxOperations.__dict__:
            setattr(AcxOperations, op, timed(f"op: {op}", AcxOperations.__dict__[op]))
    getxattr, init, destroy = (AcxOperations.__dict__[n] for n in ("getxattr", "init", "destroy"))

    def probe_getxattr(self: Any, path: str, name: str, position: int = 0) -> bytes:
        if name.startswith(MARK):
            phases.append((name.removeprefix(MARK), TIMERS.take()))
            from acxfs.mount.operations import FuseOSError

            raise FuseOSError(61)  # ENODATA
        return bytes(getxattr(self, path, name, position))

    def probe_init(self: Any, path: str) -> None:
        TIMERS.take()  # what the check counted before the fork is the command's
        init(self, path)
        phases.append(("live", TIMERS.take()))

    def probe_destroy(self: Any, path: str) -> None:
        phases.append(("end", TIMERS.take()))
        with open(out + ".daemon.json", "w", encoding="utf-8") as handle:
            json.dump({"pid": os.getpid(), "phases": phases}, handle)
        destroy(self, path)

    AcxOperations.getxattr = probe_getxattr  # type: ignore[method-assign]
    AcxOperations.init = probe_init  # type: ignore[method-assign]
    AcxOperations.destroy = probe_destroy  # type: ignore[method-assign]


def _timed_iter(name: str, func: Callable[..., Iterator[bytes]]) -> Callable[..., Iterator[bytes]]:
    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Iterator[bytes]:
        inner = func(*args, **kwargs)
        while True:
            start, cpu = time.perf_counter(), time.thread_time()
            try:
                item = next(inner)
            except StopIteration:
                TIMERS.add(name, time.perf_counter() - start, time.thread_time() - cpu)
                return
            TIMERS.add(name, time.perf_counter() - start, time.thread_time() - cpu)
            yield item

    return wrapper


def main(argv: list[str]) -> int:
    if len(argv) < 3 or argv[1] != "--":
        print("usage: python3 -m scripts.bench_library.probe OUT -- ACXFS-ARGS...",
              file=sys.stderr)
        return 2
    out, args = argv[0], argv[2:]
    started, cpu = time.perf_counter(), time.thread_time()
    import acxfs.cli  # here: timed, the imports every command pays

    TIMERS.add("up: imports", time.perf_counter() - started, time.thread_time() - cpu)
    for module, path, name in (*COMMAND_STEPS, *READ_STEPS):
        wrap(module, path, name)
    try:
        source: Any = importlib.import_module("acxfs.formats.acx.source")
        source.stored_chunks = _timed_iter("read: stored chunks (fetch)", source.stored_chunks)
    except (ImportError, AttributeError):
        TIMERS.absent.append("acxfs.formats.acx.source.stored_chunks")
    install_daemon_hooks(out)
    me = os.getpid()
    start, cpu = time.perf_counter(), time.thread_time()
    code = acxfs.cli.main(args)
    if os.getpid() == me:
        TIMERS.add("up: acxfs.cli.main", time.perf_counter() - start, time.thread_time() - cpu)
        with open(out + ".command.json", "w", encoding="utf-8") as handle:
            json.dump({"code": code, "steps": TIMERS.take(), "absent": TIMERS.absent}, handle)
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
