"""A do-nothing fusepy filesystem: the libfuse2 + Python floor for open, read and release.

It mirrors the names, kinds and sizes of a real directory (read once at start with lstat,
never opened again) and answers every read with constant bytes from one preallocated
buffer.  It uses the FUSE options acxfs uses (raw file info, keep_cache, day-long attribute
and entry timeouts, 128 KiB reads, multi-threaded), so whatever a workload costs on nullfs
is the cost of the transport itself: a kernel round trip into Python per open, read and
release, with no archive, inflating or hashing behind it.

It is the floor as a careful fusepy filesystem can reach it, with acxfs's own choices:
`open` answers ENOSYS (the kernel's no-open mode: no open or release round trips, pages
kept across opens), `flush`, `opendir`, `releasedir` and `ioctl` are left to libfuse,
readdir returns only each entry's type, getxattr answers ENOTSUP (so `ls -l` stops asking
for SELinux labels and ACLs after the first file), and each libfuse worker thread keeps its
Python thread state (acxfs.mount.threads).  `--with-open` restores a classic open/release
pair, to show what no-open mode saves.

    python scripts/nullfs.py MIRROR_DIR MOUNTPOINT      # serves in the foreground
    fusermount -u MOUNTPOINT                            # stops it
"""

from __future__ import annotations

import argparse
import errno
import os
import stat
import sys
import threading
from typing import Any

from fuse import FUSE, FuseOSError, Operations

from acxfs.mount.threads import pin_current_thread

BLOCK = 128 * 1024
FILL = b"n" * BLOCK
DIR_TYPE = {"st_mode": stat.S_IFDIR}  # readdir: the type alone (libfuse2 uses no more)
FILE_TYPE = {"st_mode": stat.S_IFREG}


class NullOperations(Operations):  # type: ignore[misc]
    """Serves the mirrored tree; every file reads as the byte 'n'."""

    use_ns = True

    def __init__(self, mirror: str) -> None:
        self._attrs: dict[str, dict[str, int]] = {}
        self._children: dict[str, list[tuple[str, dict[str, int], int]]] = {}
        self._next_fh = 1
        self._lock = threading.Lock()
        uid, gid = os.getuid(), os.getgid()
        for root, dirs, files in os.walk(mirror):
            rel = os.path.relpath(root, mirror)
            key = "/" if rel == "." else "/" + rel
            listing = [(name, DIR_TYPE, 0) for name in dirs]
            listing += [(name, FILE_TYPE, 0) for name in files]
            self._children[key] = [(".", DIR_TYPE, 0), ("..", DIR_TYPE, 0), *sorted(listing)]
            info = os.lstat(root)
            self._attrs[key] = self._make(stat.S_IFDIR | 0o555, 0, 2 + len(dirs), info, uid, gid)
            for name in files:
                child = os.lstat(os.path.join(root, name))
                path = f"{key.rstrip('/')}/{name}"
                self._attrs[path] = self._make(stat.S_IFREG | 0o444, child.st_size, 1, child,
                                               uid, gid)

    @staticmethod
    def _make(mode: int, size: int, nlink: int, info: os.stat_result, uid: int,
              gid: int) -> dict[str, int]:
        ns = info.st_mtime_ns
        return {"st_mode": mode, "st_nlink": nlink, "st_size": size, "st_uid": uid,
                "st_gid": gid, "st_atime": ns, "st_mtime": ns, "st_ctime": ns,
                "st_blocks": (size + 511) // 512, "st_blksize": BLOCK}

    def getattr(self, path: str, fh: object = None) -> dict[str, int]:
        attrs = self._attrs.get(path)
        if attrs is None:
            raise FuseOSError(errno.ENOENT)
        return attrs

    def readdir(self, path: str, fh: object) -> list[tuple[str, dict[str, int], int]]:
        listing = self._children.get(path)
        if listing is None:
            raise FuseOSError(errno.ENOTDIR)
        return listing

    def getxattr(self, path: str, name: str, position: int = 0) -> bytes:
        raise FuseOSError(errno.ENOTSUP)

    # Not implemented on purpose: libfuse answers ENOSYS (and the kernel stops sending flush).
    flush = None
    opendir = None
    releasedir = None
    ioctl = None

    def __call__(self, op: str, *args: Any) -> Any:
        pin_current_thread()
        return getattr(self, op)(*args)

    def open(self, path: str, fi: Any) -> int:
        raise FuseOSError(errno.ENOSYS)

    def open_classic(self, path: str, fi: Any) -> int:
        if path not in self._attrs:
            raise FuseOSError(errno.ENOENT)
        with self._lock:
            fi.fh = self._next_fh
            self._next_fh += 1
        fi.keep_cache = 1
        return 0

    def read(self, path: str, size: int, offset: int, fi: Any) -> bytes:
        total = self._attrs[path]["st_size"]
        if offset >= total:
            return b""
        length = min(size, total - offset)
        if length <= BLOCK:
            return FILL[:length]
        return b"n" * length

    def release(self, path: str, fi: Any) -> int:
        return 0

    def statfs(self, path: str) -> dict[str, int]:
        return {"f_bsize": BLOCK, "f_frsize": BLOCK, "f_blocks": 0, "f_bfree": 0,
                "f_bavail": 0, "f_files": len(self._attrs), "f_ffree": 0, "f_favail": 0,
                "f_namemax": 255, "f_flag": os.ST_RDONLY}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("mirror", help="directory whose names and sizes are served")
    parser.add_argument("mountpoint")
    parser.add_argument("--single-thread", action="store_true",
                        help="serve with libfuse's single-threaded loop (-s) instead of workers")
    parser.add_argument("--with-open", action="store_true",
                        help="answer open with a handle (and keep_cache) instead of ENOSYS")
    args = parser.parse_args(argv)
    ops = NullOperations(args.mirror)
    if args.with_open:
        ops.open = ops.open_classic  # type: ignore[method-assign]
    FUSE(ops, args.mountpoint, raw_fi=True, foreground=True, ro=True, fsname="nullfs",
         subtype="nullfs", attr_timeout=86400, entry_timeout=86400, negative_timeout=3600,
         max_read=BLOCK, nothreads=args.single_thread)
    return 0


if __name__ == "__main__":
    sys.exit(main())
