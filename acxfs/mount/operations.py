"""The FUSE operations: a protocol adapter from mount paths to verified entries of sources.

Which source serves a path is the router's (`acxfs.mount.router`); this module reads no
container itself.  Metadata comes from each source's verified tree; content comes only from
the source's verified reads, which return bytes whose sha256 matched the signed digest.  A
failed check is EIO for that file, recorded once with the source it belongs to; every
write-type operation is EROFS; an unexpected failure is a logged EIO, never a crash of the
daemon.

Threading: libfuse calls the operations from many threads at once.  The set of sources is
replaced whole by `attach` and `detach` (serialised by the router) and read without a lock:
each request works on the set it found when it started, and a source detached meanwhile
finishes the requests already routed to it.
"""

from __future__ import annotations

import errno
import functools
import json
import os
import stat
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, TypeVar

from acxfs.container import Entry
from acxfs.content.cache import VerifiedCache
from acxfs.errors import TamperError, UnverifiableError
from acxfs.mount.invalidation import KernelNotifier
from acxfs.mount.router import Listing, Mounted, PrefixRouter, Served, route
from acxfs.mount.threads import pin_current_thread

F = TypeVar("F", bound=Callable[..., Any])
BLOCK = 128 * 1024
DIRECTORY = stat.S_IFDIR | 0o555

class FuseOSError(OSError):
    """An intended answer to the kernel: both fusepy and mfusepy reply -errno to an OSError."""

    def __init__(self, code: int) -> None:
        super().__init__(code, os.strerror(code))


@dataclass(frozen=True)
class TamperEvent:
    """A file that failed its check: the source it belongs to and its path in that source."""

    prefix: str
    label: str
    path: str
    reason: str


def _guard(func: F) -> F:
    """Turn any failure other than an intended errno into a logged EIO."""

    @functools.wraps(func)
    def wrapper(self: AcxOperations, *args: Any) -> Any:
        pin_current_thread()
        try:
            return func(self, *args)
        except FuseOSError:
            raise
        except (TamperError, UnverifiableError) as exc:
            raise FuseOSError(errno.EIO) from exc
        except Exception as exc:
            self.log(f"error in {func.__name__}{args[:1]}: {type(exc).__name__}: {exc}")
            raise FuseOSError(errno.EIO) from exc

    return wrapper  # type: ignore[return-value]


class AcxOperations:
    """A read-only tree of verified sources, each under its prefix.

    It serves fusepy (libfuse2), which dispatches through `__call__`, and mfusepy (libfuse2 or
    libfuse3), which calls the methods; either registers with libfuse only the operations
    defined here, and libfuse answers ENOSYS for the rest.
    """

    use_ns = True

    def __init__(
        self, mounts: Iterable[Mounted], store: VerifiedCache,
        log: Callable[[str], None] = lambda message: None,
        on_ready: Callable[[], None] = lambda: None,
    ) -> None:
        self.store = store
        self.log = log
        self._on_ready = on_ready
        self._uid, self._gid = os.getuid(), os.getgid()
        self._made_at = int(time.time())  # the mtime of made-up directories
        self._lock = threading.Lock()
        self._router = PrefixRouter()
        self._events: dict[tuple[str, str], TamperEvent] = {}
        self.listings = 0  # listing requests (READDIR) this mount answered
        self.kernel: KernelNotifier | None = None  # told of every change once the mount is live
        for mounted in mounts:
            self.attach(mounted.prefix, mounted)

    def __call__(self, op: str, *args: Any) -> Any:
        """fusepy's entry point for every request."""
        return getattr(self, op)(*args)

    # --- the set of sources ------------------------------------------------------------

    def attach(self, prefix: str, mounted: Mounted) -> None:
        """Serve `mounted` at `prefix` from now on (`PrefixRouter.attach`); once this returns,
        no negative entry the kernel cached hides it."""
        self.attach_all({prefix: mounted})

    def attach_all(self, adding: dict[str, Mounted]) -> None:
        """`attach` of each of `adding`, at once (`PrefixRouter.attach_all`)."""
        before = self._router.layout.dirs
        self._router.attach_all(adding)
        self._changed(before)

    def detach(self, prefix: str) -> Mounted | None:
        """Stop serving what is at `prefix` (`PrefixRouter.detach`); once this returns, no
        entry the kernel cached reaches it."""
        gone = self.detach_all([prefix])
        return gone[0] if gone else None

    def detach_all(self, prefixes: list[str]) -> list[Mounted]:
        """`detach` of each of `prefixes`, at once (`PrefixRouter.detach_all`)."""
        before = self._router.layout.dirs
        gone = self._router.detach_all(prefixes)
        self._changed(before)
        return gone

    def reserve(self, names: frozenset[str]) -> None:
        """Show these made-up directories below the root even when empty
        (`PrefixRouter.reserve`), with the kernel told as for `attach`."""
        before = self._router.layout.dirs
        self._router.reserve(names)
        self._changed(before)

    def _changed(self, before: dict[str, tuple[str, ...]]) -> None:
        if self.kernel is not None:
            self.kernel.changed(before, self._router.layout.dirs)

    def mounted(self) -> list[Mounted]:
        """What is served now, by prefix."""
        return self._router.mounted()

    def tamper_events(self) -> list[TamperEvent]:
        """Every file that failed its check since the mount started, in the order found."""
        with self._lock:
            return list(self._events.values())

    def _tampered(self, served: Served, exc: TamperError) -> None:
        """Record (and log once) that a file of `served` failed its check."""
        mounted = served.mounted
        path = exc.path or ""
        with self._lock:
            key = (mounted.prefix, path)
            if key in self._events:
                return
            self._events[key] = TamperEvent(mounted.prefix, mounted.label, path, str(exc))
        self.log(f"tamper: {mounted.label}: {exc}")

    # --- lifecycle ---------------------------------------------------------------------

    def init(self, path: str) -> None:
        self._on_ready()

    def destroy(self, path: str) -> None:
        if self.kernel is not None:
            self.kernel.release()
        for served in self._router.layout.served.values():
            served.mounted.source.close()

    # --- metadata ----------------------------------------------------------------------

    def _find(self, path: str) -> tuple[Served | None, Entry]:
        """The source serving `path` (None for a made-up directory) and the entry there."""
        found = self._locate(path)
        if found is None:
            raise FuseOSError(errno.ENOENT)
        return found

    def _locate(self, path: str) -> tuple[Served | None, Entry] | None:
        """As `_find`, with None for a path that does not exist (no exception: a lookup of a
        missing name is the commonest request an agent's start-up sends)."""
        layout = self._router.layout
        rel = path.strip("/")
        routed = route(layout, rel)
        if routed is None:
            if rel in layout.dirs:
                return None, Entry(rel, True, mtime=self._made_at)
            return None
        served, inner = routed
        root = served.mounted.root
        entry = served.mounted.source.tree.lookup(
            f"{root}/{inner}" if root and inner else (inner or root))
        if entry is None:
            return None
        return served, entry

    def _stat(self, served: Served | None, entry: Entry) -> dict[str, int]:
        if served is None:
            return self._made_stat(entry)
        cached = served.attrs.get(entry.path)
        if cached is not None:
            return cached
        tree = served.mounted.source.tree
        ns = max(entry.mtime * 1_000_000_000, served.mounted.min_mtime_ns)
        if entry.is_dir:
            subdirs = sum(
                1 for n in tree.list(entry.path)
                if (e := tree.child(entry.path, n)) and e.is_dir
            )
            nlink, size = 2 + subdirs, 0
        else:
            nlink, size = 1, entry.size
            if not size and entry.digest is not None:
                # The kernel never sends a read for an empty file, so the check that reads
                # would make happens here: an empty file whose digest is not that of no bytes
                # is EIO like any file that fails (legacy and unverified views; signed ones
                # were refused at mount).
                self._checked(served, entry)
        attrs = {
            "st_mode": entry.mode, "st_nlink": nlink, "st_size": size,
            "st_uid": self._uid, "st_gid": self._gid,
            "st_atime": ns, "st_mtime": ns, "st_ctime": ns,
            "st_blocks": (size + 511) // 512, "st_blksize": BLOCK,
        }
        served.attrs[entry.path] = attrs
        return attrs

    def _made_stat(self, entry: Entry) -> dict[str, int]:
        ns = entry.mtime * 1_000_000_000
        return {
            "st_mode": DIRECTORY, "st_nlink": 2 + len(self._router.layout.dirs.get(entry.path, ())),
            "st_size": 0, "st_uid": self._uid, "st_gid": self._gid,
            "st_atime": ns, "st_mtime": ns, "st_ctime": ns, "st_blocks": 0, "st_blksize": BLOCK,
        }

    def _names(self, served: Served | None, entry: Entry) -> tuple[str, ...]:
        if served is None:
            return self._router.layout.dirs.get(entry.path, ())
        return served.mounted.source.tree.list(entry.path)

    @_guard
    def getattr(self, path: str, fh: object = None) -> dict[str, int]:
        return self._stat(*self._find(path))

    @_guard
    def lookup(self, path: str) -> dict[str, int] | None:
        """`getattr`, with None for a missing path (the low-level binding's LOOKUP)."""
        found = self._locate(path)
        return None if found is None else self._stat(*found)

    @_guard
    def readdir(self, path: str, fh: object) -> list[str]:
        # Names only: libfuse2 has no READDIRPLUS, so the kernel would use nothing of a full
        # stat but the type, and filling one per entry through ctypes costs more than the
        # lookup it does not save. Attributes come from getattr, cached by the kernel.
        served, entry = self._find(path)
        if not entry.is_dir:
            raise FuseOSError(errno.ENOTDIR)
        self._listed()
        return [".", "..", *self._names(served, entry)]

    def _listed(self) -> None:
        with self._lock:
            self.listings += 1

    @_guard
    def readdir_plus(self, path: str) -> Listing:
        """The listing with each child's attributes, for libfuse3's READDIRPLUS: the kernel
        then knows every listed name and sends no LOOKUP when one is opened.  The kernel
        asks for a large directory in many parts, so each listing is built once."""
        served, entry = self._find(path)
        if not entry.is_dir:
            raise FuseOSError(errno.ENOTDIR)
        self._listed()
        if served is None:  # a made-up directory: its children are made up or a source's root
            base = path.rstrip("/")
            listing: Listing = [(".", None, DIRECTORY), ("..", None, DIRECTORY)]
            for name in self._names(None, entry):
                try:
                    attrs: dict[str, int] | None = self._stat(*self._find(f"{base}/{name}"))
                except (FuseOSError, TamperError):
                    attrs = None
                listing.append((name, attrs, DIRECTORY))
            return listing
        cached = served.listings.get(entry.path)
        if cached is not None:
            return cached
        tree = served.mounted.source.tree
        listing = [(".", None, DIRECTORY), ("..", None, DIRECTORY)]
        for name in tree.list(entry.path):
            child = tree.child(entry.path, name)
            if child is None:
                continue
            try:
                attrs = self._stat(served, child)
            except TamperError:
                attrs = None  # listed by name and type; its lookup then answers EIO
            listing.append((name, attrs, child.mode))
        served.listings[entry.path] = listing
        return listing

    @_guard
    def access(self, path: str, amode: int) -> int:
        _, entry = self._find(path)
        if amode & os.W_OK:
            raise FuseOSError(errno.EROFS)
        if amode & os.X_OK and not entry.mode & 0o111:
            raise FuseOSError(errno.EACCES)
        return 0

    @_guard
    def statfs(self, path: str) -> dict[str, int]:
        layout = self._router.layout
        total, count = 0, len(layout.dirs) or 1
        for served in layout.served.values():
            if served.usage is None:  # computed once, not at mount: a source never changes
                root = served.mounted.root
                prefix = f"{root}/" if root else ""
                inside = [e for p, e in served.mounted.source.tree.entries.items()
                          if p.startswith(prefix) and p]
                served.usage = (sum(e.size for e in inside if not e.is_dir), len(inside))
            total += served.usage[0]
            count += served.usage[1]
        return {
            "f_bsize": BLOCK, "f_frsize": BLOCK, "f_blocks": (total + BLOCK - 1) // BLOCK,
            "f_bfree": 0, "f_bavail": 0, "f_files": count, "f_ffree": 0, "f_favail": 0,
            "f_namemax": 255, "f_flag": os.ST_RDONLY,
        }

    # --- extended attributes -----------------------------------------------------------

    def _xattrs(self, served: Served | None, entry: Entry) -> dict[str, bytes]:
        found: dict[str, bytes] = {}
        if served is None:
            if entry.path == "":
                found["user.acx.stats"] = self._stats()
            return found
        if not entry.is_dir and entry.digest is not None:
            # SAVE files are unsigned: their digest is only what the file records.
            name = "user.acx.recorded_oid" if entry.path.startswith("save/") else "user.acx.oid"
            found[name] = ("sha256:" + entry.digest.hex()).encode()
        if entry.path == served.mounted.root:
            v = served.mounted.verdict
            found["user.acx.trust"] = v.trust.encode()
            found["user.acx.verdict"] = v.line.encode()
            if v.keyid:  # an UNVERIFIED signature's keyid is only what its envelope claims
                found["user.acx.claimed_keyid" if v.unverified else "user.acx.keyid"] = \
                    v.keyid.encode()
            if v.publisher:
                found["user.acx.publisher"] = v.publisher.encode()
            found["user.acx.stats"] = self._stats()
        return found

    def _stats(self) -> bytes:
        stats = self.store.stats
        return json.dumps({
            "blobs_inflated": stats.blobs_inflated, "bytes_verified": stats.bytes_verified,
            "tamper_events": stats.tamper_events, "cache_hits": stats.cache_hits,
            "cache_misses": stats.cache_misses, "listings": self.listings},
            sort_keys=True).encode()

    @_guard
    def getxattr(self, path: str, name: str, position: int = 0) -> bytes:
        if not name.startswith("user."):  # ACLs, labels: not supported, so ls stops asking
            raise FuseOSError(errno.ENOTSUP)
        if not name.startswith("user.acx."):
            raise FuseOSError(errno.ENODATA)
        value = self._xattrs(*self._find(path)).get(name)
        if value is None:
            raise FuseOSError(errno.ENODATA)
        return value

    @_guard
    def listxattr(self, path: str) -> list[str]:
        return sorted(self._xattrs(*self._find(path)))

    # --- content -----------------------------------------------------------------------

    def _verified(self, served: Served, entry: Entry, offset: int, size: int) -> bytes:
        """Verified bytes of `entry`; a failed check is recorded before it is raised."""
        try:
            return served.mounted.source.read(entry, offset, size)
        except TamperError as exc:
            self._tampered(served, exc)
            raise

    def _checked(self, served: Served, entry: Entry) -> None:
        """Verify `entry` without reading it; a failed check is recorded before it is raised."""
        try:
            served.mounted.source.blob(entry)
        except TamperError as exc:
            self._tampered(served, exc)
            raise

    @_guard
    def open(self, path: str, fi: Any) -> int:
        # ENOSYS puts the kernel in its no-open mode for this mount: it stops sending open and
        # release, and keeps each file's pages across opens (FOPEN_KEEP_CACHE), which is right
        # for verified, immutable content.  Every read still comes here and goes through the
        # store.  Writers never get this far: the mount is read-only, so the kernel refuses
        # them with EROFS first.
        raise FuseOSError(errno.ENOSYS)

    @_guard
    def read(self, path: str, size: int, offset: int, fi: Any) -> bytes:
        served, entry = self._find(path)
        if entry.is_dir or served is None:
            raise FuseOSError(errno.EISDIR)
        return self._verified(served, entry, offset, size)  # a TamperError is EIO (_guard)

    # --- everything that would write -----------------------------------------------------

    def _readonly(self, *args: object) -> int:
        raise FuseOSError(errno.EROFS)

    # Not defined, so libfuse answers ENOSYS without calling Python: flush (the kernel then
    # stops sending it), opendir/releasedir, release (never sent in no-open mode) and ioctl
    # (Python's open() asks isatty of every file it opens).

    chmod = chown = create = mkdir = mknod = rename = rmdir = symlink = _readonly
    truncate = unlink = utimens = write = link = setxattr = removexattr = _readonly
