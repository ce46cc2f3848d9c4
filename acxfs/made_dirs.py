"""Directories acxfs creates on the user's behalf, and taking them back.

Invariant: `make_dirs` returns exactly the directories it created (outermost first), and
`remove_made` removes only those, innermost first, and only while each is still empty; a
directory that existed before, or that someone filled meanwhile, is never touched.
`rename_new` moves a finished directory to a name that must not exist, and never replaces
what appeared there meanwhile; `staged_text` writes a file beside the one it will replace,
so a rename puts it in place whole.  Modes acxfs sets with chmod honour `current_umask`.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import os
import tempfile
from collections.abc import Sequence
from pathlib import Path


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


def staged_text(target: Path, text: str, mode: int) -> str:
    """`text` in a new file of mode `mode` beside `target`, for the caller to rename over it
    (a link planted at `target` is then replaced, never written through); the file is
    removed again if writing it fails."""
    fd, tmp_name = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            os.fchmod(handle.fileno(), mode)
            handle.write(text)
    except BaseException:
        Path(tmp_name).unlink(missing_ok=True)
        raise
    return tmp_name
