"""libfuse3's low-level API, through ctypes, serving the same `AcxOperations` as the bindings.

Why a binding of our own: fusepy and mfusepy drive libfuse's high-level API, which names nodes
by path and always answers OPENDIR itself.  The kernel then sends OPENDIR, READDIR and
RELEASEDIR every time any program lists a directory, because the high-level API never passes
on the flag that lets the kernel keep a listing (FOPEN_CACHE_DIR).  An agent that walks 200
skill directories and their parents at start-up pays thousands of round trips through the
daemon for listings that never change.  Here OPENDIR (and OPEN) answer ENOSYS once: the kernel
then stops sending them and their releases for the life of the mount, and keeps every file's
pages and every directory's listing in its own caches (its defaults for a filesystem without
open).  Entries, attributes and negative lookups carry the mount's timeouts, as under the
high-level API.  What changes (the made-up directories above the sources, when one is attached
or detached) is invalidated through the notify calls (`acxfs.mount.invalidation`), which take
the node ids assigned here.

Invariants:
- A node id names one path for as long as the kernel holds it (until its lookups are all
  forgotten), and only a reply that counts as a lookup makes one, so the table holds no more
  than the kernel does; a path's node id is also its st_ino, so an lstat through the mount
  tells the node id the notify calls need.  The root is node 1.
- Every request gets exactly one reply (forget: none), whatever the operation raised: an
  OSError is its errno, anything else is EIO.  Content and metadata come only from the
  operations, which serve verified entries; this module touches no stored byte.

libfuse's C threads call in here; each request takes the node table's lock only to map ids.
The structures of libfuse 3 come from mfusepy (its `c_stat`, `c_statvfs`, and the library it
loaded), so this backend is there exactly where the libfuse3 backend is.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import os
import signal
import threading
from collections.abc import Callable
from typing import Any

ROOT = 1
UNKNOWN_INO = 0xFFFFFFFF  # the d_ino of a listed entry without a node id (as libfuse's)
NOT_IMPLEMENTED = errno.ENOSYS

_init_session = threading.local()  # the session whose init callback runs on this thread


def session_in_init() -> int | None:
    """The session of the mount whose init callback runs on this thread (else None)."""
    return getattr(_init_session, "session", None)


def required_calls() -> tuple[str, ...]:
    """The libfuse3 calls this binding makes."""
    return ("fuse_session_new", "fuse_session_mount", "fuse_session_unmount",
            "fuse_session_destroy", "fuse_set_signal_handlers", "fuse_remove_signal_handlers",
            "fuse_reply_err", "fuse_reply_none", "fuse_reply_entry", "fuse_reply_attr",
            "fuse_reply_buf", "fuse_reply_statfs", "fuse_reply_xattr", "fuse_add_direntry",
            "fuse_add_direntry_plus", "fuse_session_loop")


class _Types:
    """The C structures and callback types, built once from mfusepy's definitions."""

    def __init__(self, mfusepy: Any) -> None:
        self.stat = mfusepy.c_stat
        self.statvfs = mfusepy.c_statvfs
        self.set_attrs = mfusepy.set_st_attrs
        req, ino, size, off = ctypes.c_void_p, ctypes.c_uint64, ctypes.c_size_t, ctypes.c_int64
        fi = ctypes.c_void_p

        class EntryParam(ctypes.Structure):
            _fields_ = [("ino", ctypes.c_uint64), ("generation", ctypes.c_uint64),
                        ("attr", mfusepy.c_stat), ("attr_timeout", ctypes.c_double),
                        ("entry_timeout", ctypes.c_double)]

        class Args(ctypes.Structure):
            _fields_ = [("argc", ctypes.c_int), ("argv", ctypes.POINTER(ctypes.c_char_p)),
                        ("allocated", ctypes.c_int)]

        self.entry, self.args = EntryParam, Args
        hook = ctypes.CFUNCTYPE
        self.callbacks: dict[str, Any] = {
            "init": hook(None, ctypes.c_void_p, ctypes.c_void_p),
            "destroy": hook(None, ctypes.c_void_p),
            "lookup": hook(None, req, ino, ctypes.c_char_p),
            "forget": hook(None, req, ino, ctypes.c_uint64),
            "getattr": hook(None, req, ino, fi),
            "readlink": hook(None, req, ino),
            "open": hook(None, req, ino, fi),
            "read": hook(None, req, ino, size, off, fi),
            "opendir": hook(None, req, ino, fi),
            "readdir": hook(None, req, ino, size, off, fi),
            "statfs": hook(None, req, ino),
            "getxattr": hook(None, req, ino, ctypes.c_char_p, size),
            "listxattr": hook(None, req, ino, size),
            "readdirplus": hook(None, req, ino, size, off, fi),
        }
        # struct fuse_lowlevel_ops, in libfuse's order; what is not served stays NULL, and
        # libfuse answers ENOSYS for it (the mount is read-only: the kernel refuses writes).
        order = [
            "init", "destroy", "lookup", "forget", "getattr", "setattr", "readlink", "mknod",
            "mkdir", "unlink", "rmdir", "symlink", "rename", "link", "open", "read", "write",
            "flush", "release", "fsync", "opendir", "readdir", "releasedir", "fsyncdir",
            "statfs", "setxattr", "getxattr", "listxattr", "removexattr", "access", "create",
            "getlk", "setlk", "bmap", "ioctl", "poll", "write_buf", "retrieve_reply",
            "forget_multi", "flock", "fallocate", "readdirplus", "copy_file_range", "lseek"]

        class Ops(ctypes.Structure):
            _fields_ = [(name, self.callbacks.get(name, ctypes.c_void_p)) for name in order]

        self.ops = Ops


class LowLevelFUSE:
    """Mount `operations` at `mountpoint` and serve it until unmounted or signalled (the
    constructor returns then), as fusepy's `FUSE` does."""

    def __init__(self, operations: Any, mountpoint: str, *, mfusepy: Any,
                 fsname: str = "acxfs", subtype: str = "acxfs", ro: bool = True,
                 default_permissions: bool = True, attr_timeout: float = 1.0,
                 entry_timeout: float = 1.0, negative_timeout: float = 0.0,
                 max_threads: int = 16, **_ignored: object) -> None:
        self.operations = operations
        self.encoding = "utf-8"
        self._lib = mfusepy._libfuse
        self._types = _Types(mfusepy)
        self._attr_timeout, self._entry_timeout = float(attr_timeout), float(entry_timeout)
        self._negative_timeout = float(negative_timeout)
        # One negative entry for every ENOENT lookup (libfuse copies it into each reply); it
        # also sizes a listing's entries, which takes only a name.
        self._negative = self._types.entry(0, 0, self._types.stat(), 0.0, self._negative_timeout)
        self._lock = threading.Lock()
        self._paths: dict[int, str] = {ROOT: "/"}  # node id -> its path in the mount
        self._ids: dict[str, int] = {"/": ROOT}
        self._lookups: dict[int, int] = {}  # node id -> lookups the kernel holds
        self._next = ROOT + 1
        self._declare()
        options = ",".join(o for o in ("ro" if ro else "", f"fsname={fsname}",
                                       f"subtype={subtype}",
                                       "default_permissions" if default_permissions else "")
                           if o)
        self._serve(mountpoint, options, max_threads)

    # --- the C side --------------------------------------------------------------------

    def _declare(self) -> None:
        lib, t = self._lib, self._types
        p, sz = ctypes.c_void_p, ctypes.c_size_t
        for name, args, result in (
                ("fuse_session_new", [p, p, sz, p], p),
                ("fuse_session_mount", [p, ctypes.c_char_p], ctypes.c_int),
                ("fuse_session_unmount", [p], None), ("fuse_session_destroy", [p], None),
                ("fuse_session_loop", [p], ctypes.c_int),
                ("fuse_set_signal_handlers", [p], ctypes.c_int),
                ("fuse_remove_signal_handlers", [p], None),
                ("fuse_reply_err", [p, ctypes.c_int], ctypes.c_int),
                ("fuse_reply_none", [p], None),
                ("fuse_reply_entry", [p, ctypes.POINTER(t.entry)], ctypes.c_int),
                ("fuse_reply_attr", [p, ctypes.POINTER(t.stat), ctypes.c_double], ctypes.c_int),
                ("fuse_reply_buf", [p, p, sz], ctypes.c_int),
                ("fuse_reply_readlink", [p, ctypes.c_char_p], ctypes.c_int),
                ("fuse_reply_statfs", [p, ctypes.POINTER(t.statvfs)], ctypes.c_int),
                ("fuse_reply_xattr", [p, sz], ctypes.c_int),
                ("fuse_add_direntry", [p, p, sz, ctypes.c_char_p, ctypes.POINTER(t.stat),
                                       ctypes.c_int64], sz),
                ("fuse_add_direntry_plus", [p, p, sz, ctypes.c_char_p, ctypes.POINTER(t.entry),
                                            ctypes.c_int64], sz),
                ("fuse_loop_cfg_create", [], p), ("fuse_loop_cfg_destroy", [p], None),
                ("fuse_loop_cfg_set_max_threads", [p, ctypes.c_uint], None),
                ("fuse_session_loop_mt_312", [p, p], ctypes.c_int)):
            call = getattr(lib, name, None)
            if call is not None:
                call.argtypes, call.restype = args, result

    def _serve(self, mountpoint: str, options: str, max_threads: int) -> None:
        lib, t = self._lib, self._types
        handlers = {name: t.callbacks[name](getattr(self, f"_{name}"))
                    for name in t.callbacks}
        self._handlers = handlers  # kept alive while libfuse may call them
        ops = t.ops(**handlers)
        argv_list = [b"acxfs", b"-o", options.encode()]
        argv = (ctypes.c_char_p * len(argv_list))(*argv_list)
        args = t.args(len(argv_list), argv, 0)
        session = lib.fuse_session_new(ctypes.byref(args), ctypes.byref(ops),
                                       ctypes.sizeof(ops), None)
        if not session:
            raise RuntimeError("libfuse3 refused the session options")
        self._session = session
        # libfuse takes over only signals left at their default: Python's SIGINT handler would
        # wait for a main thread that is inside the loop until the mount ends.
        interrupt = signal.signal(signal.SIGINT, signal.SIG_DFL)
        try:
            if lib.fuse_set_signal_handlers(session) != 0:
                raise RuntimeError("libfuse3 could not install its signal handlers")
            try:
                if lib.fuse_session_mount(session, os.fsencode(mountpoint)) != 0:
                    raise RuntimeError(f"libfuse3 could not mount {mountpoint}")
                try:
                    self._loop(session, max_threads)
                finally:
                    lib.fuse_session_unmount(session)
            finally:
                lib.fuse_remove_signal_handlers(session)
        finally:
            lib.fuse_session_destroy(session)
            signal.signal(signal.SIGINT, interrupt)

    def _loop(self, session: int, max_threads: int) -> None:
        lib = self._lib
        if getattr(lib, "fuse_session_loop_mt_312", None) is None or \
                getattr(lib, "fuse_loop_cfg_create", None) is None:
            lib.fuse_session_loop(session)  # libfuse before 3.12: one thread
            return
        config = lib.fuse_loop_cfg_create()
        try:
            lib.fuse_loop_cfg_set_max_threads(config, max_threads)
            lib.fuse_session_loop_mt_312(session, config)
        finally:
            lib.fuse_loop_cfg_destroy(config)

    # --- node ids ----------------------------------------------------------------------

    def _path(self, ino: int) -> str:
        with self._lock:
            path = self._paths.get(ino)
        if path is None:
            raise OSError(errno.ESTALE, "unknown node")
        return path

    def _looked_up(self, path: str) -> int:
        """The node id of `path` (a new one if the kernel holds none), counting the reply that
        carries it as one lookup the kernel will forget."""
        with self._lock:
            ino = self._ids.get(path)
            if ino is None:
                ino, self._next = self._next, self._next + 1
                self._ids[path], self._paths[ino] = ino, path
            self._lookups[ino] = self._lookups.get(ino, 0) + 1
            return ino

    def _known_id(self, path: str) -> int:
        """The node id of `path` if the kernel holds one, else libfuse's unknown inode number
        (for a listed name the kernel has not looked up: no id is made that nothing forgets)."""
        with self._lock:
            return self._ids.get(path, UNKNOWN_INO)

    def _forget_node(self, ino: int, count: int) -> None:
        with self._lock:
            left = self._lookups.get(ino, 0) - count
            if left > 0:
                self._lookups[ino] = left
                return
            self._lookups.pop(ino, None)
            if ino != ROOT:
                path = self._paths.pop(ino, None)
                if path is not None:
                    self._ids.pop(path, None)

    @staticmethod
    def _child(parent: str, name: str) -> str:
        return f"/{name}" if parent == "/" else f"{parent}/{name}"

    # --- replies -----------------------------------------------------------------------

    def _answer(self, req: int, work: Callable[[], None]) -> None:
        """Run `work` (which replies), or reply its failure: exactly one reply per request."""
        try:
            work()
        except OSError as exc:
            self._lib.fuse_reply_err(req, exc.errno or errno.EIO)
        except BaseException as exc:  # a C callback must never raise
            log = getattr(self.operations, "log", None)
            if log is not None:
                log(f"error in the low-level binding: {type(exc).__name__}: {exc}")
            self._lib.fuse_reply_err(req, errno.EIO)

    def _stat(self, attrs: dict[str, int], ino: int) -> Any:
        st = self._types.stat()
        self._types.set_attrs(st, attrs, use_ns=True)
        st.st_ino = ino
        return st

    def _entry(self, path: str, attrs: dict[str, int]) -> Any:
        ino = self._looked_up(path)
        return self._types.entry(ino, 0, self._stat(attrs, ino), self._attr_timeout,
                                 self._entry_timeout)

    # --- the operations ----------------------------------------------------------------

    def _init(self, userdata: int, conn: int) -> None:
        _init_session.session = self._session
        try:
            self.operations.init("/")
        except BaseException as exc:  # a C callback must never raise
            log = getattr(self.operations, "log", None)
            if log is not None:
                log(f"error in init: {type(exc).__name__}: {exc}")
        finally:
            _init_session.session = None

    def _destroy(self, userdata: int) -> None:
        with contextlib.suppress(BaseException):  # a C callback must never raise
            self.operations.destroy("/")

    def _lookup(self, req: int, parent: int, name: bytes) -> None:
        def work() -> None:
            path = self._child(self._path(parent), os.fsdecode(name))
            attrs = self.operations.lookup(path)
            if attrs is None:
                if not self._negative_timeout:
                    raise OSError(errno.ENOENT, "no such entry")
                # A negative entry the kernel keeps for the negative timeout.
                self._lib.fuse_reply_entry(req, ctypes.byref(self._negative))
                return
            self._lib.fuse_reply_entry(req, ctypes.byref(self._entry(path, attrs)))
        self._answer(req, work)

    def _forget(self, req: int, ino: int, nlookup: int) -> None:
        try:
            self._forget_node(ino, nlookup)
        finally:
            self._lib.fuse_reply_none(req)

    def _getattr(self, req: int, ino: int, fi: int) -> None:
        def work() -> None:
            attrs = self.operations.getattr(self._path(ino), None)
            self._lib.fuse_reply_attr(req, ctypes.byref(self._stat(attrs, ino)),
                                      self._attr_timeout)
        self._answer(req, work)

    def _readlink(self, req: int, ino: int) -> None:
        def work() -> None:
            readlink = getattr(self.operations, "readlink", None)
            if readlink is None:
                raise OSError(errno.EINVAL, "not a symbolic link")
            self._lib.fuse_reply_readlink(req, os.fsencode(readlink(self._path(ino))))
        self._answer(req, work)

    def _open(self, req: int, ino: int, fi: int) -> None:
        # ENOSYS once: the kernel stops sending OPEN and RELEASE and keeps file pages.
        self._lib.fuse_reply_err(req, NOT_IMPLEMENTED)

    def _opendir(self, req: int, ino: int, fi: int) -> None:
        # ENOSYS once: the kernel stops sending OPENDIR and RELEASEDIR and caches listings.
        self._lib.fuse_reply_err(req, NOT_IMPLEMENTED)

    def _read(self, req: int, ino: int, size: int, off: int, fi: int) -> None:
        def work() -> None:
            data = self.operations.read(self._path(ino), size, off, None)
            self._lib.fuse_reply_buf(req, data, len(data))
        self._answer(req, work)

    def _readdir(self, req: int, ino: int, size: int, off: int, fi: int) -> None:
        self._listing(req, ino, size, off, plus=False)

    def _readdirplus(self, req: int, ino: int, size: int, off: int, fi: int) -> None:
        self._listing(req, ino, size, off, plus=True)

    def _listing(self, req: int, ino: int, size: int, off: int, plus: bool) -> None:
        """Entries from `off` on, as many as fit in `size` bytes; entry i has offset i + 1,
        where the kernel resumes.  With `plus`, each entry with attributes counts as a lookup
        (the kernel forgets it later); "." and ".." and an entry whose attributes failed
        carry only a name and a type."""
        def work() -> None:
            path = self._path(ino)
            entries = self.operations.readdir_plus(path)
            buf = ctypes.create_string_buffer(size)
            base, used = ctypes.addressof(buf), 0
            for index in range(off, len(entries)):
                name, attrs, mode = entries[index]
                raw = os.fsencode(name)
                child = path if name in (".", "..") else self._child(path, name)
                left = size - used
                if plus:
                    if attrs is not None and name not in (".", ".."):
                        needed = self._lib.fuse_add_direntry_plus(
                            req, None, 0, raw, ctypes.byref(self._negative), index + 1)
                        if needed > left:
                            break
                        e = self._entry(child, attrs)
                    else:
                        st = self._types.stat()
                        st.st_mode, st.st_ino = mode, self._known_id(child)
                        e = self._types.entry(0, 0, st, 0.0, 0.0)
                    added = self._lib.fuse_add_direntry_plus(
                        req, base + used, left, raw, ctypes.byref(e), index + 1)
                else:
                    st = self._types.stat()
                    st.st_mode, st.st_ino = mode, self._known_id(child)
                    added = self._lib.fuse_add_direntry(req, base + used, left, raw,
                                                        ctypes.byref(st), index + 1)
                if added > left:
                    break
                used += added
            self._lib.fuse_reply_buf(req, base, used)
        self._answer(req, work)

    def _statfs(self, req: int, ino: int) -> None:
        def work() -> None:
            found = self.operations.statfs(self._path(ino))
            sv = self._types.statvfs()
            for key, value in found.items():
                if hasattr(sv, key):
                    setattr(sv, key, value)
            self._lib.fuse_reply_statfs(req, ctypes.byref(sv))
        self._answer(req, work)

    def _getxattr(self, req: int, ino: int, name: bytes, size: int) -> None:
        def work() -> None:
            value = self.operations.getxattr(self._path(ino), os.fsdecode(name))
            self._xattr_reply(req, value, size)
        self._answer(req, work)

    def _listxattr(self, req: int, ino: int, size: int) -> None:
        def work() -> None:
            names = self.operations.listxattr(self._path(ino))
            self._xattr_reply(req, b"".join(os.fsencode(n) + b"\0" for n in names), size)
        self._answer(req, work)

    def _xattr_reply(self, req: int, value: bytes, size: int) -> None:
        if size == 0:
            self._lib.fuse_reply_xattr(req, len(value))
        elif len(value) > size:
            self._lib.fuse_reply_err(req, errno.ERANGE)
        else:
            self._lib.fuse_reply_buf(req, value, len(value))
