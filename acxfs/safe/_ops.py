"""The operations the safe writers share: renameat2, fresh temporary names, entry identity.

Private to `acxfs.safe`: `dirs`, `files` and `links` build their guarantees on these; nothing
outside the package calls them.  Invariant: a temporary name made here is fresh and random
(`.acxfs-<16 hex>.tmp`), never derived from a destination, so a planted name cannot be
predicted; `_checkpoint` is the one place a test may act between two steps.
"""

from __future__ import annotations

import ctypes
import errno
import os
import secrets
from collections.abc import Callable

RENAME_NOREPLACE = 1
RENAME_EXCHANGE = 2
# What renameat2 answers where it, or the flag, is not available to this process here.
_UNSUPPORTED = frozenset({errno.ENOSYS, errno.EINVAL, errno.EPERM})
_DIR_PATH = os.O_PATH | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_CHUNK = 1024 * 1024

_libc = ctypes.CDLL(None, use_errno=True)
_libc_renameat2 = getattr(_libc, "renameat2", None)
if _libc_renameat2 is not None:
    _libc_renameat2.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p,
                                ctypes.c_uint]
    _libc_renameat2.restype = ctypes.c_int


def _no_checkpoint(step: str) -> None:
    del step


# Called at each point between two steps another process could act in (tests replace it).
_checkpoint: Callable[[str], None] = _no_checkpoint


def _renameat2(old_dirfd: int, old: str, new_dirfd: int, new: str, flags: int) -> None:
    if _libc_renameat2 is None:
        raise OSError(errno.ENOSYS, os.strerror(errno.ENOSYS), new)
    if _libc_renameat2(old_dirfd, os.fsencode(old), new_dirfd, os.fsencode(new), flags) != 0:
        code = ctypes.get_errno()
        raise OSError(code, os.strerror(code), new)


def current_umask() -> int:
    """The process's umask (read by setting it, then restored: call it with no other thread
    creating files), for modes acxfs sets itself with fchmod."""
    mask = os.umask(0)
    os.umask(mask)
    return mask


def _temp_name() -> str:
    return f".acxfs-{secrets.token_hex(8)}.tmp"


def _check_name(name: str) -> None:
    if not name or name in (".", "..") or "/" in name or "\0" in name:
        raise ValueError(f"not a single path component: {name!r}")


def _where(dirfd: int, name: str | None = None) -> str:
    """A path for messages (the directory's current name, as the kernel knows it)."""
    try:
        base = os.readlink(f"/proc/self/fd/{dirfd}")
    except OSError:
        base = f"<fd {dirfd}>"
    if name is None:
        return base
    return f"{base.rstrip('/')}/{name}"


def _identity(st: os.stat_result) -> tuple[int, int]:
    return st.st_dev, st.st_ino


def _entry_identity(dirfd: int, name: str) -> tuple[int, int] | None:
    try:
        return _identity(os.stat(name, dir_fd=dirfd, follow_symlinks=False))
    except FileNotFoundError:
        return None


def _is_link_to(dirfd: int, name: str, target: str) -> bool:
    """Whether `name` is a symbolic link whose target is exactly `target` (readlink fails on
    anything that is not a link)."""
    try:
        return os.readlink(name, dir_fd=dirfd) == target
    except OSError:
        return False
