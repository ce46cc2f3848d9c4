"""Opening a file acxfs was asked to read: a regular file, or an OSError naming why not.

Invariant: `open_input` and `open_file_at` never block and never return a handle on anything
but a regular file.  They open without following the caller into a wait (O_NONBLOCK: a FIFO
with no writer would otherwise hang the command forever), then check the opened file itself
(fstat, so no race between the check and the open); directories, FIFOs, sockets and devices
are refused with an OSError whose strerror says what the path is.  `open_file_at` also never
follows a symbolic link (O_NOFOLLOW): a link is `IsALink`, anything else but a regular file
`NotAFile`.
"""

from __future__ import annotations

import errno
import hashlib
import os
import stat
from typing import BinaryIO

from acxfs.errors import EnvironmentProblem, IsALink, NotAFile


def open_input(path: str | os.PathLike[str]) -> BinaryIO:
    """`path` opened for binary reading, if it is a regular file."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    try:
        mode = os.fstat(fd).st_mode
        if stat.S_ISDIR(mode):
            raise IsADirectoryError(errno.EISDIR, "is a directory", os.fspath(path))
        if not stat.S_ISREG(mode):
            raise OSError(errno.EINVAL, "not a regular file", os.fspath(path))
        os.set_blocking(fd, True)
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def open_file_at(dirfd: int, name: str) -> tuple[int, os.stat_result] | None:
    """`name` in `dirfd` opened for reading, with its fstat, if it is a regular file; None if
    nothing is there.  A link raises `IsALink`, anything else but a regular file `NotAFile`,
    another failure its OSError; the caller closes the descriptor."""
    try:
        fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC,
                     dir_fd=dirfd)
    except FileNotFoundError:
        return None
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise IsALink(errno.ELOOP, "is a symbolic link", name) from None
        raise
    info = os.fstat(fd)
    if not stat.S_ISREG(info.st_mode):
        os.close(fd)
        raise NotAFile(errno.EINVAL, "not a regular file", name)
    return fd, info


def copy_input(path: str, dest: str, limit: int, what: str) -> tuple[int, str]:
    """Copy the input `path` (never written) to the new private file `dest` (0600), at most
    `limit` bytes; its size and sha256 hex.  Every failure is one EnvironmentProblem naming
    `path` (`what`: what it is too large to be)."""
    digest = hashlib.sha256()
    size = 0
    try:
        with open_input(path) as src, open(dest, "xb") as dst:
            os.fchmod(dst.fileno(), 0o600)
            while chunk := src.read(1024 * 1024):
                size += len(chunk)
                if size > limit:
                    raise EnvironmentProblem(f"{path}: over {limit >> 30} GiB, the largest "
                                             f"{what}")
                digest.update(chunk)
                dst.write(chunk)
    except FileNotFoundError:
        raise EnvironmentProblem(f"{path}: no such file") from None
    except IsADirectoryError:
        raise EnvironmentProblem(f"{path}: a directory, not a bundle file") from None
    except OSError as exc:
        raise EnvironmentProblem(f"{path}: {exc.strerror or exc}") from None
    return size, digest.hexdigest()
