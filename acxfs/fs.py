"""The FUSE operations: map mount paths to verified entries, serve bytes only via ContentStore.

This module reads no container itself.  Metadata comes from the source's verified tree;
content comes from `ContentStore.get`, which returns only bytes whose sha256 matched the
signed digest.  A failed check is EIO for that file (logged once, by the store's owner);
every write-type operation is EROFS; an unexpected failure is a logged EIO, never a crash of
the daemon.
"""

from __future__ import annotations

import errno
import functools
import json
import os
import stat
from collections.abc import Callable
from typing import Any, TypeVar

from acxfs.content import ContentStore
from acxfs.errors import TamperError, UnverifiableError
from acxfs.fuse_threads import pin_current_thread
from acxfs.sources.base import Entry, Source
from acxfs.verdict import Verdict

F = TypeVar("F", bound=Callable[..., Any])
BLOCK = 128 * 1024
DIRECTORY = stat.S_IFDIR | 0o555


class FuseOSError(OSError):
    """An intended answer to the kernel: both fusepy and mfusepy reply -errno to an OSError."""

    def __init__(self, code: int) -> None:
        super().__init__(code, os.strerror(code))


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
    """A read-only view of `source.tree` rooted at `root` (a tree path, '' for all).

    It serves fusepy (libfuse2), which dispatches through `__call__`, and mfusepy (libfuse2 or
    libfuse3), which calls the methods; either registers with libfuse only the operations
    defined here, and libfuse answers ENOSYS for the rest.
    """

    use_ns = True

    def __init__(
        self, source: Source, store: ContentStore, verdict: Verdict, root: str = "",
        log: Callable[[str], None] = lambda message: None,
        on_ready: Callable[[], None] = lambda: None,
    ) -> None:
        self.source = source
        self.tree = source.tree
        self.store = store
        self.verdict = verdict
        self.root = root.strip("/")
        self.log = log
        self._on_ready = on_ready
        self._uid, self._gid = os.getuid(), os.getgid()
        self._attrs: dict[str, dict[str, int]] = {}
        self._listings: dict[str, list[tuple[str, dict[str, int] | None, int]]] = {}
        self._usage: tuple[int, int] | None = None  # (bytes, entries), on first statfs

    def __call__(self, op: str, *args: Any) -> Any:
        """fusepy's entry point for every request."""
        return getattr(self, op)(*args)

    # --- lifecycle ---------------------------------------------------------------------

    def init(self, path: str) -> None:
        self._on_ready()

    def destroy(self, path: str) -> None:
        self.source.close()

    # --- metadata ----------------------------------------------------------------------

    def _entry(self, path: str) -> Entry:
        rel = path.strip("/")
        full = f"{self.root}/{rel}" if self.root and rel else (rel or self.root)
        entry = self.tree.lookup(full)
        if entry is None:
            raise FuseOSError(errno.ENOENT)
        return entry

    def _stat(self, entry: Entry) -> dict[str, int]:
        cached = self._attrs.get(entry.path)
        if cached is not None:
            return cached
        ns = entry.mtime * 1_000_000_000
        if entry.is_dir:
            subdirs = sum(
                1 for n in self.tree.list(entry.path)
                if (e := self.tree.child(entry.path, n)) and e.is_dir
            )
            nlink, size = 2 + subdirs, 0
        else:
            nlink, size = 1, entry.size
            if not size and entry.digest is not None:
                # The kernel never sends a read for an empty file, so the check that reads
                # would make happens here: an empty file whose digest is not that of no bytes
                # is EIO like any file that fails (legacy and unverified views; signed ones
                # were refused at mount).
                self.store.get(entry)
        attrs = {
            "st_mode": entry.mode, "st_nlink": nlink, "st_size": size,
            "st_uid": self._uid, "st_gid": self._gid,
            "st_atime": ns, "st_mtime": ns, "st_ctime": ns,
            "st_blocks": (size + 511) // 512, "st_blksize": BLOCK,
        }
        self._attrs[entry.path] = attrs
        return attrs

    @_guard
    def getattr(self, path: str, fh: object = None) -> dict[str, int]:
        return self._stat(self._entry(path))

    @_guard
    def readdir(self, path: str, fh: object) -> list[str]:
        # Names only: libfuse2 has no READDIRPLUS, so the kernel would use nothing of a full
        # stat but the type, and filling one per entry through ctypes costs more than the
        # lookup it does not save. Attributes come from getattr, cached by the kernel.
        entry = self._entry(path)
        if not entry.is_dir:
            raise FuseOSError(errno.ENOTDIR)
        return [".", "..", *self.tree.list(entry.path)]

    @_guard
    def readdir_plus(self, path: str) -> list[tuple[str, dict[str, int] | None, int]]:
        """The listing with each child's attributes, for libfuse3's READDIRPLUS: the kernel
        then knows every listed name and sends no LOOKUP when one is opened.  The kernel
        asks for a large directory in many parts, so each listing is built once."""
        entry = self._entry(path)
        if not entry.is_dir:
            raise FuseOSError(errno.ENOTDIR)
        listing = self._listings.get(entry.path)
        if listing is None:
            listing = [(".", None, DIRECTORY), ("..", None, DIRECTORY)]
            for name in self.tree.list(entry.path):
                child = self.tree.child(entry.path, name)
                if child is None:
                    continue
                try:
                    attrs: dict[str, int] | None = self._stat(child)
                except TamperError:
                    attrs = None  # listed by name and type; its lookup then answers EIO
                listing.append((name, attrs, child.mode))
            self._listings[entry.path] = listing
        return listing

    @_guard
    def access(self, path: str, amode: int) -> int:
        entry = self._entry(path)
        if amode & os.W_OK:
            raise FuseOSError(errno.EROFS)
        if amode & os.X_OK and not entry.mode & 0o111:
            raise FuseOSError(errno.EACCES)
        return 0

    @_guard
    def statfs(self, path: str) -> dict[str, int]:
        if self._usage is None:  # computed once, not at mount: the view never changes
            prefix = f"{self.root}/" if self.root else ""
            inside = [e for p, e in self.tree.entries.items() if p.startswith(prefix) and p]
            self._usage = (sum(e.size for e in inside if not e.is_dir), len(inside) + 1)
        total, count = self._usage
        return {
            "f_bsize": BLOCK, "f_frsize": BLOCK, "f_blocks": (total + BLOCK - 1) // BLOCK,
            "f_bfree": 0, "f_bavail": 0, "f_files": count, "f_ffree": 0, "f_favail": 0,
            "f_namemax": 255, "f_flag": os.ST_RDONLY,
        }

    # --- extended attributes -----------------------------------------------------------

    def _xattrs(self, entry: Entry) -> dict[str, bytes]:
        found: dict[str, bytes] = {}
        if not entry.is_dir and entry.digest is not None:
            # SAVE files are unsigned: their digest is only what the file records.
            name = "user.acx.recorded_oid" if entry.path.startswith("save/") else "user.acx.oid"
            found[name] = ("sha256:" + entry.digest.hex()).encode()
        if entry.path == self.root:
            v = self.verdict
            found["user.acx.trust"] = v.trust.encode()
            found["user.acx.verdict"] = v.line.encode()
            if v.keyid:  # an UNVERIFIED signature's keyid is only what its envelope claims
                found["user.acx.claimed_keyid" if v.unverified else "user.acx.keyid"] = \
                    v.keyid.encode()
            if v.publisher:
                found["user.acx.publisher"] = v.publisher.encode()
            stats = self.store.stats
            found["user.acx.stats"] = json.dumps({
                "blobs_inflated": stats.blobs_inflated, "bytes_verified": stats.bytes_verified,
                "tamper_events": stats.tamper_events, "cache_hits": stats.cache_hits,
                "cache_misses": stats.cache_misses}, sort_keys=True).encode()
        return found

    @_guard
    def getxattr(self, path: str, name: str, position: int = 0) -> bytes:
        if not name.startswith("user."):  # ACLs, labels: not supported, so ls stops asking
            raise FuseOSError(errno.ENOTSUP)
        if not name.startswith("user.acx."):
            raise FuseOSError(errno.ENODATA)
        value = self._xattrs(self._entry(path)).get(name)
        if value is None:
            raise FuseOSError(errno.ENODATA)
        return value

    @_guard
    def listxattr(self, path: str) -> list[str]:
        return sorted(self._xattrs(self._entry(path)))

    # --- content -----------------------------------------------------------------------

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
        entry = self._entry(path)
        if entry.is_dir:
            raise FuseOSError(errno.EISDIR)
        return self.store.get(entry).read(offset, size)  # a TamperError is EIO (_guard)

    # --- everything that would write -----------------------------------------------------

    def _readonly(self, *args: object) -> int:
        raise FuseOSError(errno.EROFS)

    # Not defined, so libfuse answers ENOSYS without calling Python: flush (the kernel then
    # stops sending it), opendir/releasedir, release (never sent in no-open mode) and ioctl
    # (Python's open() asks isatty of every file it opens).

    chmod = chown = create = mkdir = mknod = rename = rmdir = symlink = _readonly
    truncate = unlink = utimens = write = link = setxattr = removexattr = _readonly
