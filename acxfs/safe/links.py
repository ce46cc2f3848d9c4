"""The symbolic links acxfs makes in directories it does not own (agents' skill directories).

Invariant: a link is made only where nothing exists, and re-pointed or removed only while the
entry is a symbolic link with exactly the target acxfs gave it; the check is repeated on what
the atomic step actually moved, and an entry found to be anything else is put back where it
was.  Every step is relative to an open directory descriptor (`acxfs.safe.dirs`), whose module
docstring says what the fallbacks without `renameat2` guarantee.
"""

from __future__ import annotations

import errno
import os
from collections.abc import Callable

from acxfs.errors import UnsafePathError
from acxfs.safe import _ops
from acxfs.safe._ops import (
    _UNSUPPORTED,
    RENAME_EXCHANGE,
    RENAME_NOREPLACE,
    _check_name,
    _entry_identity,
    _is_link_to,
    _where,
)
from acxfs.safe.dirs import fsync_dir, rename_noreplace_at


def _move_aside(dirfd: int, name: str, aside_name: str | None = None) -> str:
    """Move whatever is at `name` to a fresh random name in the same directory (`aside_name`
    when given: a name the caller chose, and wrote down, beforehand); that name."""
    for _ in range(1 if aside_name else 16):
        aside = aside_name or _ops._temp_name()
        try:
            _ops._renameat2(dirfd, name, dirfd, aside, RENAME_NOREPLACE)
            return aside
        except FileExistsError:
            continue
        except OSError as exc:
            if exc.errno not in _UNSUPPORTED:
                raise
        # Plain rename to a random name nobody could know: moves exactly what is there.
        if _entry_identity(dirfd, aside) is None:
            os.rename(name, aside, src_dir_fd=dirfd, dst_dir_fd=dirfd)
            return aside
    raise FileExistsError(errno.EEXIST, "no free temporary name", _where(dirfd))


def _put_back(dirfd: int, aside: str, name: str) -> None:
    try:
        rename_noreplace_at(dirfd, aside, dirfd, name)
    except FileExistsError:
        where, now = _where(dirfd, name), _where(dirfd, aside)
        raise UnsafePathError(f"{where}: changed while acxfs worked on it; what was there is "
                              f"now {now}") from None


def symlink_new_at(dirfd: int, name: str, target: str) -> None:
    """Make the link `name -> target` (`FileExistsError` if anything is at `name`), durably."""
    _check_name(name)
    os.symlink(target, name, dir_fd=dirfd)
    fsync_dir(dirfd)


def _new_link(dirfd: int, target: str, name: str | None = None) -> str:
    for _ in range(1 if name else 16):
        temp_name = name or _ops._temp_name()
        try:
            os.symlink(target, temp_name, dir_fd=dirfd)
            return temp_name
        except FileExistsError:
            continue
    raise FileExistsError(errno.EEXIST, "no free temporary name", _where(dirfd))


def _not_ours(dirfd: int, name: str, expect: str) -> UnsafePathError:
    return UnsafePathError(f"{_where(dirfd, name)}: not the link acxfs made (-> {expect}); "
                           "left as it is")


def replace_symlink_at(dirfd: int, name: str, target: str, expect_old: str,
                       temp_name: str | None = None) -> None:
    """Re-point the link `name` from `expect_old` to `target`, atomically, only if it is a
    symbolic link to exactly `expect_old` (`UnsafePathError` otherwise, nothing changed).

    A new link is made under a temporary name (`temp_name` when given, so a caller that wrote
    it down can remove what a kill left there) and exchanged with `name` (`RENAME_EXCHANGE`);
    if what came out is not the expected link (swapped in meanwhile), it is exchanged back.
    Without RENAME_EXCHANGE, see the module docstring."""
    _check_name(name)
    if not _is_link_to(dirfd, name, expect_old):
        raise _not_ours(dirfd, name, expect_old)
    temp = _new_link(dirfd, target, temp_name)
    try:
        _ops._checkpoint("replace_symlink_at:exchange")
        try:
            _ops._renameat2(dirfd, temp, dirfd, name, RENAME_EXCHANGE)
        except OSError as exc:
            if exc.errno == errno.ENOENT:
                raise _not_ours(dirfd, name, expect_old) from None
            if exc.errno not in _UNSUPPORTED:
                raise
            os.unlink(temp, dir_fd=dirfd)
            temp = ""
            _replace_symlink_by_moving(dirfd, name, target, expect_old, temp_name)
            return
        # `temp` now holds what was at `name`.
        _ops._checkpoint("replace_symlink_at:exchanged")
        if _is_link_to(dirfd, temp, expect_old):
            os.unlink(temp, dir_fd=dirfd)
            temp = ""
            fsync_dir(dirfd)
            return
        try:
            _ops._renameat2(dirfd, temp, dirfd, name, RENAME_EXCHANGE)
        except OSError:
            aside, temp = temp, ""  # it holds what was at `name`: not acxfs's to remove
            where, now = _where(dirfd, name), _where(dirfd, aside)
            raise UnsafePathError(f"{where}: changed while acxfs re-pointed it; what was "
                                  f"there is now {now}") from None
        raise _not_ours(dirfd, name, expect_old)
    finally:
        if temp and _is_link_to(dirfd, temp, target):
            os.unlink(temp, dir_fd=dirfd)


def _take_aside(dirfd: int, name: str, expect: str, aside_name: str | None = None) -> str:
    """Move the link `name` aside and return where it went, once it proved to be the link
    to `expect` there; anything else is put back (`UnsafePathError`)."""
    try:
        aside = _move_aside(dirfd, name, aside_name)
    except FileNotFoundError:
        raise _not_ours(dirfd, name, expect) from None
    if not _is_link_to(dirfd, aside, expect):
        _put_back(dirfd, aside, name)
        raise _not_ours(dirfd, name, expect)
    return aside


def _replace_symlink_by_moving(dirfd: int, name: str, target: str, expect_old: str,
                               aside_name: str | None = None) -> None:
    aside = _take_aside(dirfd, name, expect_old, aside_name)
    try:
        os.symlink(target, name, dir_fd=dirfd)
    except FileExistsError:
        os.unlink(aside, dir_fd=dirfd)  # the old link, checked above: acxfs's own
        raise UnsafePathError(f"{_where(dirfd, name)}: made by another process while acxfs "
                              "re-pointed it; left as it is") from None
    os.unlink(aside, dir_fd=dirfd)
    fsync_dir(dirfd)


def remove_symlink_at(dirfd: int, name: str, expect_target: str,
                      aside_name: str | None = None) -> None:
    """Remove `name` only if it is a symbolic link to exactly `expect_target`
    (`UnsafePathError` otherwise, nothing changed): it is moved aside to a temporary name
    (`aside_name` when given), checked there, and removed, or put back if it was swapped
    meanwhile."""
    _check_name(name)
    if not _is_link_to(dirfd, name, expect_target):
        raise _not_ours(dirfd, name, expect_target)
    _ops._checkpoint("remove_symlink_at:move")
    aside = _take_aside(dirfd, name, expect_target, aside_name)
    _ops._checkpoint("remove_symlink_at:unlink")
    os.unlink(aside, dir_fd=dirfd)
    fsync_dir(dirfd)


def fresh_temp_name() -> str:
    """A fresh temporary name of acxfs's own form (`.acxfs-<16 hex>.tmp`), for a caller that
    writes it down before the step that uses it (so whatever a kill leaves is known)."""
    return _ops._temp_name()


def on_checkpoint(hook: Callable[[str], None]) -> None:
    """Call `hook` with the step's name at each point between two steps of the safe writers
    (the test-only fault points use it to kill a command there)."""
    _ops._checkpoint = hook
