"""Hardened read-only access to a cartridge file: its first bytes, connections, a pool.

Invariant: every connection acxfs opens on a cartridge is read-only and immutable, with
`trusted_schema` off, cell size checks on and extension loading off, so nothing stored in
the file can run code or be written; `read_head` reads only a regular file (never blocks
on a FIFO) and turns every failure into one EnvironmentProblem line.

A served cartridge is the file its check read, not whatever its path names later:
`PinnedFile` opens the file once (one descriptor) and, while `pinned()` is active, the
check's `read_head` and `connect_readonly` of that path read through that descriptor
(`file:/proc/self/fd/N?mode=ro&immutable=1`).  SQLite resolves that link to the file's
current name before it opens it (a file renamed over is then `NAME (deleted)`, which another
user may create), so every connection is compared, by device and inode, with the pinned file
right after it opened, and one that opened anything else is closed unused.  A `ConnectionPool`
made from a pin keeps one connection on the checked file open for as long as it serves (its
anchor: the check's own connection when the pin kept it, `PinnedFile.keep`, so a served file
is opened and its schema parsed once): reads go on from the checked inode after a rename
over it or a new file written at its path, and any further connection that cannot be opened
on that inode waits for the anchor instead; the checked inode written in place (another size
or mtime) is a changed file (`changed_in_place`), whatever pages the anchor cached.  Whatever
a serving connection runs is bounded: a statement longer than `STEP_SECONDS` is interrupted
(a progress handler), a value is at most `SERVE_LENGTH` bytes and a schema statement at most
`SERVE_SQL_LENGTH` (SQLite does not interrupt straight-line expressions, so their size is what
bounds them); the failure is the read's, never a hang.

Descriptors: each served cartridge keeps exactly one (its anchor; 200 bundles are 200
descriptors, far under the default limit of 1024), and the connections opened beyond the
anchors, for concurrent reads, are at most `MAX_OPEN` across the whole process: the least
recently used idle one is closed to make room, and when all are busy a reader waits for its
source's anchor.  A served cartridge thus holds one descriptor and one small connection
(`ANCHOR_CACHE_KIB` of page cache) however much is read from it.
"""

from __future__ import annotations

import contextlib
import contextvars
import math
import os
import sqlite3
import stat
import threading
import time
import urllib.parse
from collections import OrderedDict
from collections.abc import Iterator

from acxfs.errors import EnvironmentProblem
from acxfs.safe.inputs import open_input

MAX_OPEN = 64  # connections beyond the anchors, open at once in the whole process
STEP_SECONDS = 5.0  # one serving statement, at most
SERVE_LENGTH = 1024 * 1024  # largest value a serving statement may build (rows read: 64 KiB)
SERVE_SQL_LENGTH = 256 * 1024  # longest schema statement a serving connection parses
ANCHOR_CACHE_KIB = 64
CACHED_STATEMENTS = 4  # prepared statements a connection keeps: a serving one runs few
_PROGRESS_STEPS = 1000


@contextlib.contextmanager
def _readable(path: str) -> Iterator[None]:
    """Turn a failure to open or read `path` into its one EnvironmentProblem line."""
    try:
        yield
    except FileNotFoundError as exc:
        raise EnvironmentProblem(f"{path}: no such file") from exc
    except IsADirectoryError as exc:
        raise EnvironmentProblem(f"{path}: is a directory") from exc
    except OSError as exc:
        raise EnvironmentProblem(f"{path}: cannot read ({exc.strerror})") from exc


class PinnedFile:
    """One open descriptor on a cartridge, and the (device, inode) of the file it reads.

    With `keep`, the check's connection on the pinned file is not closed when the check is
    done (`release`) but kept here for the pool that will serve the file
    (`ConnectionPool.serving`), which then opens no second one; `close` closes it if no pool
    took it."""

    def __init__(self, path: str, *, keep: bool = False) -> None:
        self.path = path
        self.keep = keep
        self.kept: sqlite3.Connection | None = None
        self._opened: sqlite3.Connection | None = None  # the last connection on this pin
        with _readable(path), open_input(path) as handle:
            self.fd = os.dup(handle.fileno())
        os.set_inheritable(self.fd, False)
        st = os.fstat(self.fd)
        self.identity = (st.st_dev, st.st_ino)
        self.stamp = (st.st_size, st.st_mtime_ns)  # what a write in place would change

    @property
    def uri(self) -> str:
        return f"file:/proc/self/fd/{self.fd}?mode=ro&immutable=1"

    def close(self) -> None:
        if self.kept is not None:
            self.kept.close()
            self.kept = None
        self._opened = None
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1


_PINNED: contextvars.ContextVar[PinnedFile | None] = contextvars.ContextVar(
    "acxfs_pinned", default=None)


@contextlib.contextmanager
def pinned(pin: PinnedFile) -> Iterator[PinnedFile]:
    """While active, `read_head` and `connect_readonly` of `pin.path` read the pinned file."""
    token = _PINNED.set(pin)
    try:
        yield pin
    finally:
        _PINNED.reset(token)


def _pin_for(path: str) -> PinnedFile | None:
    pin = _PINNED.get()
    return pin if pin is not None and pin.fd >= 0 and pin.path == path else None


def _harden(conn: sqlite3.Connection) -> None:
    conn.execute("PRAGMA trusted_schema=OFF")
    conn.execute("PRAGMA cell_size_check=ON")
    conn.execute("PRAGMA query_only=ON")
    if hasattr(conn, "enable_load_extension"):
        conn.enable_load_extension(False)


class _FileChanged(sqlite3.OperationalError):
    """A connection opened another file than the one that was checked."""


def _same_file(conn: sqlite3.Connection, identity: tuple[int, int]) -> None:
    """Refuse a connection whose file is not the one of `identity`."""
    opened = conn.execute("PRAGMA database_list").fetchone()[2]
    try:
        st = os.stat(opened)
    except OSError as exc:
        raise _FileChanged("the file changed since it was checked") from exc
    if (st.st_dev, st.st_ino) != identity or not stat.S_ISREG(st.st_mode):
        raise _FileChanged("the file changed since it was checked")


def _serving_limits(conn: sqlite3.Connection) -> None:
    conn.setlimit(sqlite3.SQLITE_LIMIT_LENGTH, SERVE_LENGTH)
    conn.setlimit(sqlite3.SQLITE_LIMIT_SQL_LENGTH, SERVE_SQL_LENGTH)


def _connect(uri: str, identity: tuple[int, int] | None, *, serving: bool) -> sqlite3.Connection:
    conn = sqlite3.connect(uri, uri=True, check_same_thread=False, isolation_level=None,
                           cached_statements=CACHED_STATEMENTS)
    try:
        if serving:
            _serving_limits(conn)
        if identity is not None:
            _same_file(conn, identity)
        _harden(conn)
    except BaseException:
        conn.close()
        raise
    return conn


def connect_readonly(path: str) -> sqlite3.Connection:
    """A hardened read-only connection: nothing in the file can run code or be written.
    Inside `pinned()` for `path`, on the pinned file (sqlite3.Error if it cannot be)."""
    pin = _pin_for(path)
    if pin is not None:
        pin._opened = _connect(pin.uri, pin.identity, serving=False)
        return pin._opened
    uri = "file:" + urllib.parse.quote(os.path.abspath(path)) + "?mode=ro&immutable=1"
    return _connect(uri, None, serving=False)


def release(conn: sqlite3.Connection) -> None:
    """Done with a connection of `connect_readonly`: closed, unless it is the one on a pinned
    file that keeps it for serving (`PinnedFile.keep`, the first such connection only)."""
    pin = _PINNED.get()
    if pin is not None and pin.keep and pin.kept is None and conn is pin._opened:
        pin.kept = conn
        return
    conn.close()


def read_head(path: str, size: int) -> bytes:
    """The first `size` bytes of a container; EnvironmentProblem if it cannot be read at all."""
    pin = _pin_for(path)
    with _readable(path):
        if pin is not None:
            return os.pread(pin.fd, size, 0)
        with open_input(path) as handle:
            return handle.read(size)


class _Bounded:
    """A serving connection whose statements stop at a deadline (set when it is taken)."""

    def __init__(self, conn: sqlite3.Connection) -> None:
        self.conn = conn
        self.deadline = math.inf
        conn.set_progress_handler(self._over, _PROGRESS_STEPS)

    def _over(self) -> int:
        return 1 if time.monotonic() > self.deadline else 0


class _Budget:
    """The process-wide count of connections open beyond the anchors, and the idle ones
    (least recently used first), so that one can be closed to make room."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.open = 0
        self.idle: OrderedDict[int, tuple[ConnectionPool, _Bounded]] = OrderedDict()
        self.cond = threading.Condition()


_BUDGET = _Budget(MAX_OPEN)


class ConnectionPool:
    """Read-only connections on one cartridge, handed to whichever thread needs one.

    libfuse's worker threads are short-lived native threads, so per-thread storage would open
    a connection per request; connections are taken and given back instead.  Made from a
    `PinnedFile` (`ConnectionPool.serving`), the pool owns an anchor on the checked file and
    only ever reads that file (a mount, and `verify`'s deep check); made from a path, its
    connections are on whatever file the first one opened, each later one compared with it."""

    def __init__(self, path: str) -> None:
        self._path = path
        self._absolute = os.path.abspath(path)
        self._uri = "file:" + urllib.parse.quote(self._absolute) + "?mode=ro&immutable=1"
        self._identity: tuple[int, int] | None = None
        self._stamp: tuple[int, int] | None = None  # the pinned file's (size, mtime) at its check
        self._anchor: _Bounded | None = None  # None again once closed
        self._anchor_of_pool: _Bounded | None = None
        self._anchor_lock = threading.Lock()
        self._idle: list[_Bounded] = []
        self._busy: dict[int, _Bounded] = {}
        self._anchor_only = False
        self._closed = False

    @classmethod
    def serving(cls, pin: PinnedFile) -> ConnectionPool:
        """A pool on the pinned file; the pin's descriptor is no longer needed afterwards."""
        pool = cls(pin.path)
        pool._identity = pin.identity
        pool._stamp = pin.stamp
        conn, pin.kept = pin.kept, None
        try:
            if conn is None:
                conn = _connect(pin.uri, pin.identity, serving=True)
            else:  # the check's own, on the same pinned file: bounded from now on
                _serving_limits(conn)
            conn.execute(f"PRAGMA cache_size=-{ANCHOR_CACHE_KIB}")
            conn.execute("PRAGMA shrink_memory")  # the check's pages: only what serving reads
        except sqlite3.Error as exc:
            if conn is not None:
                conn.close()
            raise EnvironmentProblem(f"cannot open {pin.path} ({exc})") from exc
        pool._anchor = pool._anchor_of_pool = _Bounded(conn)
        return pool

    def changed_in_place(self) -> bool:
        """Whether the checked file was written in place since its check: its path still names
        that inode, with another size or mtime (a path that names another file, or none, is
        no change of the checked one: the anchor reads that).  A served file's pages may come
        from the serving connection's cache, which would hide such a write from its reads."""
        if self._stamp is None:
            return False
        try:
            st = os.stat(self._absolute)
        except OSError:
            return False
        return (st.st_dev, st.st_ino) == self._identity and \
            (st.st_size, st.st_mtime_ns) != self._stamp

    def take(self) -> sqlite3.Connection:
        """A connection on the checked file; hand it back with `give` (in a `finally`)."""
        bounded = self._take()
        bounded.deadline = time.monotonic() + STEP_SECONDS
        return bounded.conn

    def _take(self) -> _Bounded:
        anchor = self._anchor
        if anchor is not None and self._anchor_lock.acquire(blocking=False):
            return self._held(anchor)
        budget = _BUDGET
        victim: _Bounded | None = None
        slot = False
        with budget.cond:
            while True:
                if self._closed:
                    raise EnvironmentProblem(f"{self._path} is no longer served")
                if self._idle:
                    bounded = self._idle.pop()
                    budget.idle.pop(id(bounded), None)
                    self._busy[id(bounded.conn)] = bounded
                    return bounded
                if anchor is not None and self._anchor_only:
                    break
                if budget.open >= budget.limit and budget.idle:
                    _, (owner, victim) = budget.idle.popitem(last=False)
                    owner._idle.remove(victim)
                    budget.open -= 1
                if budget.open < budget.limit:
                    budget.open += 1
                    slot = True
                    break
                if anchor is not None:
                    break
                budget.cond.wait()
        if victim is not None:
            victim.conn.close()
        if slot:
            try:
                bounded = self._open()
            except EnvironmentProblem as exc:
                with budget.cond:
                    budget.open -= 1
                    budget.cond.notify()
                if anchor is None:
                    raise
                if isinstance(exc.__cause__, _FileChanged):
                    self._anchor_only = True  # its path names another file: the anchor serves
            else:
                with budget.cond:
                    self._busy[id(bounded.conn)] = bounded
                return bounded
        assert anchor is not None
        self._anchor_lock.acquire()
        return self._held(anchor)

    def _held(self, anchor: _Bounded) -> _Bounded:
        """`anchor`, whose lock the caller now holds, unless the pool was closed meanwhile."""
        if self._anchor is not anchor:
            self._anchor_lock.release()
            raise EnvironmentProblem(f"{self._path} is no longer served")
        return anchor

    def _open(self) -> _Bounded:
        try:
            conn = _connect(self._uri, self._identity, serving=True)
        except sqlite3.Error as exc:  # e.g. out of descriptors: retried, never tampering
            raise EnvironmentProblem(f"cannot open {self._path} ({exc})") from exc
        if self._identity is None:  # the first connection of a pool made from a path
            try:
                st = os.stat(conn.execute("PRAGMA database_list").fetchone()[2])
            except (OSError, sqlite3.Error) as exc:
                conn.close()
                raise EnvironmentProblem(f"cannot open {self._path} ({exc})") from exc
            self._identity = (st.st_dev, st.st_ino)
        return _Bounded(conn)

    def give(self, conn: sqlite3.Connection) -> None:
        anchor = self._anchor_of_pool
        if anchor is not None and conn is anchor.conn:
            anchor.deadline = math.inf
            self._anchor_lock.release()
            return
        budget = _BUDGET
        with budget.cond:
            bounded = self._busy.pop(id(conn), None)
            keep = not self._closed and bounded is not None
            if keep and bounded is not None:
                bounded.deadline = math.inf
                self._idle.append(bounded)
                budget.idle[id(bounded)] = (self, bounded)
            elif bounded is not None:
                budget.open -= 1
            budget.cond.notify()
        if not keep:
            conn.close()

    def renew(self, conn: sqlite3.Connection) -> None:
        """A fresh `STEP_SECONDS` for `conn`, taken from this pool, before its next step: for a
        caller that works between the rows of one statement (the bound is on SQLite's steps,
        not on the caller's work)."""
        anchor = self._anchor_of_pool
        bounded = anchor if anchor is not None and conn is anchor.conn \
            else self._busy.get(id(conn))
        if bounded is not None:
            bounded.deadline = time.monotonic() + STEP_SECONDS

    @contextlib.contextmanager
    def connection(self) -> Iterator[sqlite3.Connection]:
        conn = self.take()
        try:
            yield conn
        finally:
            self.give(conn)

    def close(self) -> None:
        budget = _BUDGET
        with budget.cond:
            self._closed = True
            idle, self._idle = self._idle, []
            for bounded in idle:
                budget.idle.pop(id(bounded), None)
            budget.open -= len(idle)
            budget.cond.notify_all()
        for bounded in idle:
            bounded.conn.close()
        with self._anchor_lock:  # a read in progress on the anchor finishes first
            anchor, self._anchor = self._anchor, None
        if anchor is not None:
            anchor.conn.close()
