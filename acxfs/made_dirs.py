"""Directories acxfs creates on the user's behalf, and taking them back.

Invariant: `make_dirs` returns exactly the directories it created (outermost first), and
`remove_made` removes only those, innermost first, and only while each is still empty; a
directory that existed before, or that someone filled meanwhile, is never touched.
`rename_new` moves a finished directory to a name that must not exist, and never replaces
what appeared there meanwhile.  Modes acxfs sets with chmod honour `current_umask`.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import os
from collections.abc import Sequence


def make_dirs(path: str | os.PathLike[str]) -> list[str]:
    """Create `path` and its missing parents; the ones created, outermost first.  A directory
    another process creates meanwhile is used, not reported as made (and not an error)."""
    for attempt in range(3):  # a parent another process made, then removed again: start over
        try:
            return _make_missing(path)
        except FileNotFoundError:
            if attempt == 2:
                raise
    raise AssertionError("unreachable")


def _make_missing(path: str | os.PathLike[str]) -> list[str]:
    missing: list[str] = []
    current = os.path.abspath(path)
    while not os.path.lexists(current):
        missing.append(current)
        parent = os.path.dirname(current)
        if parent == current:
            break
        current = parent
    made: list[str] = []
    try:
        for directory in reversed(missing):
            try:
                os.mkdir(directory)
            except FileExistsError:
                if not os.path.isdir(directory):
                    raise
                continue  # made by someone else just now: theirs to remove
            made.append(directory)
    except BaseException:
        remove_made(made)
        raise
    return made


def remove_made(made: Sequence[str | os.PathLike[str]]) -> None:
    """Remove what `make_dirs` created, innermost first, stopping at the first that is not
    an empty directory any more."""
    for directory in reversed(made):
        with contextlib.suppress(OSError):
            os.rmdir(directory)
            continue
        return


_AT_FDCWD = -100
_RENAME_NOREPLACE = 1


def rename_new(source: str | os.PathLike[str], target: str | os.PathLike[str]) -> None:
    """Rename `source` to `target`, which must not exist (FileExistsError otherwise).

    A plain rename silently replaces an empty directory created at `target` after the caller
    checked it; `renameat2(RENAME_NOREPLACE)` refuses instead.  Where the system lacks it,
    the check is repeated just before the rename."""
    old, new = os.fsencode(source), os.fsencode(target)
    renameat2 = getattr(ctypes.CDLL(None, use_errno=True), "renameat2", None)
    if renameat2 is not None:
        if renameat2(_AT_FDCWD, old, _AT_FDCWD, new, _RENAME_NOREPLACE) == 0:
            return
        code = ctypes.get_errno()
        if code not in (errno.ENOSYS, errno.EINVAL):  # EINVAL: the filesystem lacks the flag
            raise OSError(code, os.strerror(code), os.fsdecode(new))
    if os.path.lexists(new):
        raise FileExistsError(errno.EEXIST, os.strerror(errno.EEXIST), os.fsdecode(new))
    os.rename(old, new)


def current_umask() -> int:
    """The process's umask (read by setting it, then restored: call it with no other thread
    creating files), for modes acxfs sets itself with chmod."""
    mask = os.umask(0)
    os.umask(mask)
    return mask
