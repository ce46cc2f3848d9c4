"""Every write acxfs makes to the filesystem, done relative to open directory descriptors.

Invariant: acxfs never replaces, follows or writes into anything it did not make.

- Paths are walked one component at a time from an open directory descriptor with
  `O_NOFOLLOW`; a symbolic link anywhere on the way is refused (`UnsafePathError`).  The one
  exception, only where the caller asks for it: the last component may be a link owned by the
  user (or root) to a directory the user owns, reached without any further link (a dotfiles
  setup of an agent directory).
- A new file is written under a fresh random name (never derived from the destination, so a
  255-byte destination name works) opened `O_CREAT|O_EXCL|O_NOFOLLOW` with mode 0600, its mode
  set with `fchmod` on the descriptor (exactly: the umask does not apply, callers pass
  `mode & ~current_umask()` where it should), written, `fsync`ed, and only then renamed to its
  name with `renameat2(RENAME_NOREPLACE)`; after the rename the entry at the name must be the
  inode acxfs wrote, or the rename is undone and refused.  Only files acxfs owns (its state
  files) are replaced, with a plain rename over them.
- Links acxfs made are re-pointed or removed only while the entry is a symbolic link with the
  target acxfs gave it; the check is repeated on what the atomic step actually moved, and an
  entry found to be anything else is put back where it was.
- Directories are created with `mkdirat` and then opened with `O_NOFOLLOW`; the ones created
  are returned so the caller can take back exactly those, and only while still empty.
- A walk can be given a `check` that sees each directory it opens, on its descriptor, and
  stops the walk by raising (`acxfs.safe.ownership` checks whose each directory is).

Where `renameat2` is not available (`ENOSYS`, `EINVAL` or `EPERM`: old kernels, seccomp
filters, filesystems without the flags such as NFS), the fallbacks keep "never replaces" but
lose atomicity as follows:
- A file is hard-linked to its name through `/proc/self/fd` (the link names exactly the inode
  written, and fails if anything exists there), then its temporary name is removed; a process
  killed between the two leaves a temporary `.acxfs-*.tmp` file beside the destination; a
  filesystem without hard links refuses the write.
- A directory is renamed after checking that nothing exists at its name: an empty directory
  created there by another process in between would be replaced (nothing else can be: the
  kernel refuses to rename a directory over a file, a link or a non-empty directory).
- A link is re-pointed or removed by moving it aside to a fresh random name, checking what was
  moved and putting anything unexpected back: the name is briefly absent.
"""

from __future__ import annotations

import errno
import os
import stat
from collections.abc import Callable
from types import TracebackType

from acxfs.errors import ForeignDirectory, UnsafePathError
from acxfs.safe import _ops
from acxfs.safe._ops import (
    _DIR_PATH,
    RENAME_EXCHANGE,
    RENAME_NOREPLACE,
    _check_name,
    _entry_identity,
    _identity,
    _where,
    current_umask,
)

__all__ = ["RENAME_EXCHANGE", "RENAME_NOREPLACE", "current_umask"]

# --- directories --------------------------------------------------------------------------


def _components(path: str | os.PathLike[str]) -> tuple[bool, list[str]]:
    text = os.fspath(path)
    if not text:
        raise FileNotFoundError(errno.ENOENT, os.strerror(errno.ENOENT), text)
    return text.startswith("/"), [part for part in text.split("/") if part not in ("", ".")]


Check = Callable[[int], None]
"""Called with each directory a walk opens (its O_PATH descriptor), the first included;
raises to stop the walk there (`acxfs.safe.ownership` passes its guard)."""


def _open_step(fd: int, name: str, shown: str, *, user_link: bool,
               check: Check | None = None) -> int:
    """`name` in `fd` opened as a directory without following a link (or, with `user_link`,
    following only a dotfiles link; see the module docstring)."""
    try:
        return os.open(name, _DIR_PATH, dir_fd=fd)
    except OSError as exc:
        if exc.errno not in (errno.ENOTDIR, errno.ELOOP):
            raise OSError(exc.errno, exc.strerror, shown) from None
        st = os.stat(name, dir_fd=fd, follow_symlinks=False)
        if not stat.S_ISLNK(st.st_mode):
            raise NotADirectoryError(errno.ENOTDIR, os.strerror(errno.ENOTDIR), shown) from None
    if not user_link:
        raise UnsafePathError(f"{shown}: is a symbolic link; acxfs does not write through links")
    return _follow_user_link(fd, name, st, shown, check)


def _follow_user_link(fd: int, name: str, st: os.stat_result, shown: str,
                      check: Check | None) -> int:
    uid = os.geteuid()
    if st.st_uid not in (uid, 0):
        raise UnsafePathError(f"{shown}: is a symbolic link owned by another user; "
                              "acxfs does not write through it")
    target = os.readlink(name, dir_fd=fd)
    absolute, parts = _components(target)
    start = os.open("/", _DIR_PATH) if absolute else os.dup(fd)
    try:
        result, _ = _walk(start, parts, f"{shown} -> {target}", create=False, mode=0,
                          user_link=False, base_shown="" if absolute else _where(fd),
                          check=check)
    except ForeignDirectory as exc:
        raise ForeignDirectory(f"{shown}: links to {target}; {exc}") from None
    finally:
        os.close(start)
    if os.fstat(result).st_uid != uid:
        os.close(result)
        raise UnsafePathError(f"{shown}: links to {target}, a directory another user owns; "
                              "acxfs does not write through it")
    return result


class MadeDirs:
    """An open directory reached by `make_dirs`/`make_dirs_at`, and the directories that call
    created on the way (outermost first).  Close it when done (a context manager)."""

    def __init__(self, fd: int, made: list[tuple[int, str, tuple[int, int], str]]) -> None:
        self.fd = fd  # the innermost directory, opened O_PATH
        self._made = made  # (parent fd, name, identity, shown path)

    @property
    def made(self) -> list[str]:
        """The created directories' paths, outermost first."""
        return [shown for _, _, _, shown in self._made]

    def remove_made(self) -> None:
        """Remove the created directories, innermost first, stopping at the first one that is
        not the directory created any more, or not empty."""
        for parent_fd, name, identity, _ in reversed(self._made):
            if _entry_identity(parent_fd, name) != identity:
                return
            try:
                os.rmdir(name, dir_fd=parent_fd)
            except OSError:
                return

    def close(self) -> None:
        for parent_fd, _, _, _ in self._made:
            os.close(parent_fd)
        self._made = []
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1

    def __enter__(self) -> MadeDirs:
        return self

    def __exit__(self, kind: type[BaseException] | None, value: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()


def _walk(start: int, parts: list[str], shown_path: str, *, create: bool, mode: int,
          user_link: bool, base_shown: str, check: Check | None = None,
          ) -> tuple[int, list[tuple[int, str, tuple[int, int], str]]]:
    """Walk `parts` from `start` (not closed); the innermost directory's new fd and what was
    created on the way (each with a duplicate of its parent's fd).  `check` sees `start` and
    every directory opened after it."""
    fd = os.dup(start)
    made: list[tuple[int, str, tuple[int, int], str]] = []
    shown = base_shown
    try:
        if check is not None:
            check(fd)
        for index, part in enumerate(parts):
            shown = f"{shown.rstrip('/')}/{part}" if shown else part
            last = index == len(parts) - 1
            created = False
            if create and part != "..":
                try:
                    os.stat(part, dir_fd=fd, follow_symlinks=False)
                except FileNotFoundError:
                    _ops._checkpoint("make_dirs_at:mkdir")
                    try:
                        os.mkdir(part, mode, dir_fd=fd)
                        created = True
                    except FileExistsError:
                        pass  # made by another process just now: theirs, not reported
                    _ops._checkpoint("make_dirs_at:open")
            child = _open_step(fd, part, shown or shown_path,
                               user_link=user_link and last and not created, check=check)
            if created:
                made.append((os.dup(fd), part, _identity(os.fstat(child)), shown))
            os.close(fd)
            fd = child
            if check is not None:
                check(fd)
    except BaseException:
        os.close(fd)
        result = MadeDirs(-1, made)
        result.remove_made()
        result.close()
        raise
    return fd, made


def _start(path: str | os.PathLike[str]) -> tuple[int, list[str], str]:
    absolute, parts = _components(path)
    return os.open("/" if absolute else ".", _DIR_PATH), parts, "/" if absolute else ""


def open_dir(path: str | os.PathLike[str], *, allow_user_symlink: bool = False,
             check: Check | None = None) -> int:
    """An `O_PATH` descriptor of the existing directory `path`, reached without following any
    link (`UnsafePathError`), except, with `allow_user_symlink`, a last component that is a
    dotfiles link (see the module docstring); `check` sees every directory on the way.  The
    caller closes it."""
    start, parts, base = _start(path)
    try:
        fd, _ = _walk(start, parts, os.fspath(path), create=False, mode=0,
                      user_link=allow_user_symlink, base_shown=base, check=check)
    finally:
        os.close(start)
    return fd


def make_dirs_at(dirfd: int, relpath: str, mode: int = 0o777, *,
                 allow_user_symlink: bool = False, check: Check | None = None) -> MadeDirs:
    """Open (creating what is missing, with `mkdirat(mode)`: the umask applies) the directory
    `relpath` below `dirfd`, one component at a time without following links; returns it with
    the directories created.  A directory another process creates meanwhile is used and not
    reported as made; one swapped for a link meanwhile is refused."""
    if relpath.startswith("/"):
        raise ValueError(f"not a relative path: {relpath!r}")
    _, parts = _components(relpath) if relpath else (False, [])
    fd, made = _walk(dirfd, parts, relpath, create=True, mode=mode,
                     user_link=allow_user_symlink, base_shown=_where(dirfd), check=check)
    return MadeDirs(fd, made)


def make_dirs(path: str | os.PathLike[str], mode: int = 0o777, *,
              allow_user_symlink: bool = False, check: Check | None = None) -> MadeDirs:
    """`make_dirs_at` from the root (absolute `path`) or the working directory."""
    start, parts, base = _start(path)
    try:
        fd, made = _walk(start, parts, os.fspath(path), create=True, mode=mode,
                         user_link=allow_user_symlink, base_shown=base, check=check)
    finally:
        os.close(start)
    return MadeDirs(fd, made)


def fsync_dir(dirfd: int) -> None:
    """Make the directory's entries durable (a filesystem that cannot sync a directory,
    EINVAL or ENOSYS, is not an error)."""
    fd = os.open(".", os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC, dir_fd=dirfd)
    try:
        os.fsync(fd)
    except OSError as exc:
        if exc.errno not in (errno.EINVAL, errno.ENOSYS):
            raise
    finally:
        os.close(fd)


# --- renaming -----------------------------------------------------------------------------


def rename_noreplace_at(src_dirfd: int, src: str, dst_dirfd: int, dst: str) -> None:
    """Rename `src` to `dst`, which must not exist (`FileExistsError`), never following a
    link in either.  Without renameat2, a file or link is hard-linked then unlinked (its old
    name is removed only while it is still the same inode), a directory renamed after a check
    (see the module docstring for what each fallback guarantees)."""
    _check_name(src)
    _check_name(dst)
    try:
        _ops._renameat2(src_dirfd, src, dst_dirfd, dst, RENAME_NOREPLACE)
        return
    except OSError as exc:
        if exc.errno not in _ops._UNSUPPORTED:
            raise
    st = os.stat(src, dir_fd=src_dirfd, follow_symlinks=False)
    if stat.S_ISDIR(st.st_mode):
        if _entry_identity(dst_dirfd, dst) is not None:
            raise FileExistsError(errno.EEXIST, os.strerror(errno.EEXIST), _where(dst_dirfd, dst))
        os.rename(src, dst, src_dir_fd=src_dirfd, dst_dir_fd=dst_dirfd)
        return
    os.link(src, dst, src_dir_fd=src_dirfd, dst_dir_fd=dst_dirfd, follow_symlinks=False)
    if _entry_identity(src_dirfd, src) == _identity(st):
        os.unlink(src, dir_fd=src_dirfd)
