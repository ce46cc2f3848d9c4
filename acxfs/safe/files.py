"""New files and staging directories, written under temporary names and renamed into place.

Invariant: a new file or directory is made under a fresh random name (never derived from the
destination), opened without following links, given its mode with `fchmod`, filled, synced
and only then renamed to its name without replacing anything; after the rename the name must
hold what acxfs made, or the rename is undone and refused.  Only files acxfs owns are replaced.
Walking to the directory and the fallbacks without `renameat2` are `acxfs.safe.dirs`'s.
"""

from __future__ import annotations

import contextlib
import errno
import os
from collections.abc import Callable
from types import TracebackType

from acxfs.errors import UnsafePathError
from acxfs.safe import _ops
from acxfs.safe._ops import (
    _CHUNK,
    _UNSUPPORTED,
    RENAME_NOREPLACE,
    _check_name,
    _entry_identity,
    _identity,
    _where,
)
from acxfs.safe.dirs import fsync_dir, rename_noreplace_at


class _Staged:
    """Something new under the temporary name `temp_name` in `dirfd`, open as `fd`, to be
    renamed to `name` on commit."""

    def __init__(self, dirfd: int, name: str, fd: int, temp_name: str) -> None:
        self.dirfd = dirfd
        self.name = name
        self.fd = fd
        self.temp_name = temp_name
        self._open = True


class TempFile(_Staged):
    """A new file being written under a temporary name in `dirfd`, to become `name` on
    `commit`.  `fd` is open read-write: a caller can check the bytes (`os.pread`) before
    committing, so what is checked is what is put in place.  Leaving the context manager
    without a commit removes the temporary file."""

    @property
    def proc_path(self) -> str:
        """A path that opens exactly this file, for openers that need a path (SQLite)."""
        return f"/proc/self/fd/{self.fd}"

    def write(self, data: bytes | memoryview) -> None:
        """Append all of `data`."""
        view = memoryview(data)
        while view:
            view = view[os.write(self.fd, view):]

    def commit(self, *, replace: bool = False, durable: bool = True) -> None:
        """`fsync` the file, rename it to its name (`FileExistsError` if something is there,
        unless `replace`, only for files acxfs owns), check the name now holds this file,
        `fsync` the directory, close it.  A failed commit discards the file.
        `durable=False` skips both fsyncs (files inside a new directory that is itself
        committed later, such as an extract's)."""
        if not self._open:
            raise ValueError("temporary file already committed or discarded")
        try:
            if durable:
                os.fsync(self.fd)
            mine = _identity(os.fstat(self.fd))
            _ops._checkpoint("commit:rename")
            if replace:
                os.rename(self.temp_name, self.name, src_dir_fd=self.dirfd,
                          dst_dir_fd=self.dirfd)
            else:
                self._rename_new()
        except BaseException:
            self.discard()
            raise
        if _entry_identity(self.dirfd, self.name) != mine:
            if not replace:  # what was renamed is another's entry: give it its name back
                with contextlib.suppress(OSError):
                    rename_noreplace_at(self.dirfd, self.name, self.dirfd, self.temp_name)
            self._close()
            raise UnsafePathError(f"{_where(self.dirfd, self.name)}: the file being written was "
                                  "replaced by another process; refused")
        self._close()
        if durable:
            fsync_dir(self.dirfd)

    def _rename_new(self) -> None:
        try:
            _ops._renameat2(self.dirfd, self.temp_name, self.dirfd, self.name,
                                 RENAME_NOREPLACE)
            return
        except OSError as exc:
            if exc.errno not in _UNSUPPORTED:
                raise
        os.link(self.proc_path, self.name, dst_dir_fd=self.dirfd, follow_symlinks=True)
        self._unlink_temp()

    def _unlink_temp(self) -> None:
        if _entry_identity(self.dirfd, self.temp_name) == _identity(os.fstat(self.fd)):
            with contextlib.suppress(FileNotFoundError):
                os.unlink(self.temp_name, dir_fd=self.dirfd)

    def _close(self) -> None:
        self._open = False
        os.close(self.fd)

    def discard(self) -> None:
        """Remove the temporary file (only while its name is still this file) and close it."""
        if self._open:
            try:
                self._unlink_temp()
            finally:
                self._close()

    def __enter__(self) -> TempFile:
        return self

    def __exit__(self, kind: type[BaseException] | None, value: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.discard()


def open_new_at(dirfd: int, name: str, mode: int) -> TempFile:
    """A new empty temporary file in `dirfd` (mode set exactly to `mode` with fchmod) that
    `commit` makes `name`."""
    _check_name(name)
    for _ in range(16):
        temp_name = _ops._temp_name()
        try:
            fd = os.open(temp_name, os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW
                         | os.O_CLOEXEC, 0o600, dir_fd=dirfd)
        except FileExistsError:
            continue
        temp = TempFile(dirfd, name, fd, temp_name)
        try:
            os.fchmod(fd, mode)
        except BaseException:
            temp.discard()
            raise
        return temp
    raise FileExistsError(errno.EEXIST, "no free temporary name", _where(dirfd))


def write_new_at(dirfd: int, name: str, data: bytes, mode: int) -> None:
    """Write `data` as the new file `name` (`FileExistsError` if anything is there, a link
    included), whole or not at all, durably."""
    with open_new_at(dirfd, name, mode) as temp:
        temp.write(data)
        temp.commit()


def replace_file_at(dirfd: int, name: str, data: bytes, mode: int) -> None:
    """Write `data` as `name`, replacing the file there whole and durably; only for files
    acxfs owns (its state).  A link at `name` is replaced, never written through."""
    with open_new_at(dirfd, name, mode) as temp:
        temp.write(data)
        temp.commit(replace=True)


def copy_fd_at(dirfd: int, name: str, src_fd: int, mode: int,
               on_chunk: Callable[[bytes], None] | None = None) -> TempFile:
    """Copy `src_fd` (from its current offset to its end) into a new temporary file for
    `name`, calling `on_chunk` with each chunk read; the caller checks the copy through the
    returned file's `fd`, then calls `commit` (or `discard`)."""
    temp = open_new_at(dirfd, name, mode)
    try:
        while chunk := os.read(src_fd, _CHUNK):
            if on_chunk is not None:
                on_chunk(chunk)
            temp.write(chunk)
    except BaseException:
        temp.discard()
        raise
    return temp


class TempDir(_Staged):
    """A new directory being filled under a temporary name in `dirfd`, to become `name` on
    `commit`.  `fd` is the directory, opened `O_RDONLY` (usable with `fchmod`, and as the
    `dirfd` of the other helpers).  Leaving the context manager without a commit removes it
    and everything in it, through `fd` (whatever its name is by then)."""

    def commit(self) -> None:
        """Rename the directory to its name, which must not exist (`FileExistsError`); check
        the name now holds this directory; `fsync` it and its parent; close it.  A failed
        commit discards the directory."""
        if not self._open:
            raise ValueError("temporary directory already committed or discarded")
        try:
            fsync_dir(self.fd)
            mine = _identity(os.fstat(self.fd))
            _ops._checkpoint("commit:rename")
            rename_noreplace_at(self.dirfd, self.temp_name, self.dirfd, self.name)
        except BaseException:
            self.discard()
            raise
        if _entry_identity(self.dirfd, self.name) != mine:
            with contextlib.suppress(OSError):
                rename_noreplace_at(self.dirfd, self.name, self.dirfd, self.temp_name)
            self.discard()
            raise UnsafePathError(f"{_where(self.dirfd, self.name)}: the directory being "
                                  "written was replaced by another process; refused")
        self._open = False
        os.close(self.fd)
        fsync_dir(self.dirfd)

    def discard(self) -> None:
        """Empty the directory through its descriptor, remove it if its temporary name is
        still this directory, close it."""
        if not self._open:
            return
        self._open = False
        try:
            _clear(self.fd)
            if _entry_identity(self.dirfd, self.temp_name) == _identity(os.fstat(self.fd)):
                with contextlib.suppress(OSError):
                    os.rmdir(self.temp_name, dir_fd=self.dirfd)
        finally:
            os.close(self.fd)

    def __enter__(self) -> TempDir:
        return self

    def __exit__(self, kind: type[BaseException] | None, value: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.discard()


def _clear(fd: int) -> None:
    """Remove everything inside the directory `fd`, following no link."""
    with os.scandir(fd) as entries:
        names = [(entry.name, entry.is_dir(follow_symlinks=False)) for entry in entries]
    for name, is_dir in names:
        if is_dir:
            try:
                sub = os.open(name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW
                              | os.O_CLOEXEC, dir_fd=fd)
            except OSError:
                continue
            try:
                _clear(sub)
            finally:
                os.close(sub)
            with contextlib.suppress(OSError):
                os.rmdir(name, dir_fd=fd)
        else:
            with contextlib.suppress(OSError):
                os.unlink(name, dir_fd=fd)


def open_new_dir_at(dirfd: int, name: str, mode: int = 0o700) -> TempDir:
    """A new empty directory under a temporary name in `dirfd` (its mode set exactly to
    `mode`), that `commit` makes `name`."""
    _check_name(name)
    for _ in range(16):
        temp_name = _ops._temp_name()
        try:
            os.mkdir(temp_name, 0o700, dir_fd=dirfd)
        except FileExistsError:
            continue
        try:
            fd = os.open(temp_name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC,
                         dir_fd=dirfd)
        except OSError as exc:
            raise UnsafePathError(f"{_where(dirfd, temp_name)}: replaced by another process "
                                  "as soon as acxfs made it; refused") from exc
        temp = TempDir(dirfd, name, fd, temp_name)
        if os.fstat(fd).st_uid != os.geteuid():  # another's directory swapped in for ours
            temp._open = False
            os.close(fd)
            raise UnsafePathError(f"{_where(dirfd, temp_name)}: replaced by another process "
                                  "as soon as acxfs made it; refused")
        os.fchmod(fd, mode)
        return temp
    raise FileExistsError(errno.EEXIST, "no free temporary name", _where(dirfd))
