"""Opening a file acxfs was asked to read: a regular file, or an OSError naming why not.

Invariant: `open_input` never blocks and never returns a handle on anything but a regular
file.  It opens without following the caller into a wait (O_NONBLOCK: a FIFO with no writer
would otherwise hang the command forever), then checks the opened file itself (fstat, so no
race between the check and the open); directories, FIFOs, sockets and devices are refused
with an OSError whose strerror says what the path is.
"""

from __future__ import annotations

import errno
import os
import stat
from typing import BinaryIO


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
