"""An ACX registry directory as `acxfs publish` and `acxfs withdraw` read and write it.

Invariant: the registry is reached once, by the real path of the directory the user named,
and everything below it through open directory descriptors without following any link: a
symbolic link anywhere in the tree acxfs reads or writes (`index.json`, `status.json`,
`trust-registry.json`, `cartridges/` and everything under it) refuses the whole command
before anything is written.  Files are read into private copies (a cartridge is checked and
described from its copy, never from the tree), and written under a fresh name, synced and
renamed into place (`acxfs.safe.files`); a cartridge never replaces anything, and the
directories a failed publish made are taken back.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import os
import stat
from collections.abc import Iterator
from dataclasses import dataclass, field

from acxfs.errors import EnvironmentProblem, IsALink, NotAFile, SourceError, UnsafePathError
from acxfs.safe import dirs as safe_dirs
from acxfs.safe import files as safe_files
from acxfs.safe._ops import _DIR_PATH
from acxfs.safe.dirs import current_umask
from acxfs.safe.inputs import open_file_at

INDEX, STATUS, TRUST, CARTRIDGES = "index.json", "status.json", "trust-registry.json", "cartridges"
FILE_LIMIT = 16 * 1024 * 1024  # index.json, status.json, trust-registry.json
BUNDLE_LIMIT = 1024 * 1024 * 1024
CHUNK = 1024 * 1024
OTHER_KINDS = ("cals", "graphs", "templates")  # artifacts acxfs cannot check


@dataclass
class RegistryDir:
    """An open registry directory: `fd` (O_PATH) and the path refusals show."""

    shown: str
    fd: int
    made: safe_dirs.MadeDirs | None = None  # when publish created the directory itself
    placed: list[tuple[int, str, tuple[int, int]]] = field(default_factory=list)
    made_dirs: list[safe_dirs.MadeDirs] = field(default_factory=list)

    def where(self, rel: str) -> str:
        return os.path.join(self.shown, rel)

    def close(self) -> None:
        if self.made is not None:
            self.made.close()  # closes fd too
            self.made = None
        elif self.fd >= 0:
            os.close(self.fd)
        self.fd = -1


def locate(path: str) -> str:
    """The directory holding the registry's files: `path`, or its `registry/` (a clone of
    the standard's repository), by the real path of what the user named."""
    real = os.path.realpath(path)
    if not os.path.exists(os.path.join(real, INDEX)) and \
            os.path.isfile(os.path.join(real, "registry", INDEX)):
        return os.path.join(real, "registry")
    return real


@contextlib.contextmanager
def opened(path: str, *, create: bool) -> Iterator[RegistryDir]:
    """The registry at `path` (`create`: made if missing; an existing directory must be empty
    or hold an index or `cartridges/`)."""
    real = locate(path)
    try:
        if create and not os.path.lexists(real):
            made = safe_dirs.make_dirs(real, 0o777)
            reg = RegistryDir(path, made.fd, made)
        else:
            reg = RegistryDir(path, safe_dirs.open_dir(real))
    except FileNotFoundError:
        raise EnvironmentProblem(f"{path}: no such registry directory") from None
    except NotADirectoryError:
        raise EnvironmentProblem(f"{path}: not a directory") from None
    except OSError as exc:
        raise EnvironmentProblem(f"{path}: {exc.strerror or exc}") from None
    try:
        names = set(_listdir(reg.fd, reg.shown))
        if names and not names & {INDEX, STATUS, CARTRIDGES}:
            raise EnvironmentProblem(f"{path}: not an ACX registry (no index.json, status.json or "
                                     "cartridges/) and not empty; acxfs writes only there")
        others = sorted(names & set(OTHER_KINDS))
        if others:
            raise SourceError(f"{path}: holds {', '.join(o + '/' for o in others)}, artifacts "
                              "acxfs cannot check; build its index with the standard's builder")
        yield reg
    except BaseException:
        if reg.made is not None:
            reg.made.remove_made()
        raise
    finally:
        reg.close()


def _listdir(fd: int, shown: str) -> list[str]:
    dfd = os.open(".", os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC, dir_fd=fd)
    try:
        return sorted(os.listdir(dfd))
    except OSError as exc:
        raise EnvironmentProblem(f"{shown}: {exc.strerror or exc}") from None
    finally:
        os.close(dfd)


def _open_file(dirfd: int, name: str, shown: str) -> int | None:
    """`name` in `dirfd` opened for reading without following a link; None if absent."""
    try:
        opened = open_file_at(dirfd, name)
    except IsALink:
        raise UnsafePathError(f"{shown}: is a symbolic link; acxfs does not read or "
                              "write through links in a registry") from None
    except NotAFile:
        raise EnvironmentProblem(f"{shown}: not a regular file") from None
    except OSError as exc:
        raise EnvironmentProblem(f"{shown}: {exc.strerror or exc}") from None
    return None if opened is None else opened[0]


def read_file(reg: RegistryDir, name: str) -> bytes | None:
    """The bytes of the registry file `name` (at most 16 MiB), None if absent."""
    fd = _open_file(reg.fd, name, reg.where(name))
    if fd is None:
        return None
    with os.fdopen(fd, "rb") as f:
        data = f.read(FILE_LIMIT + 1)
    if len(data) > FILE_LIMIT:
        raise SourceError(f"{reg.where(name)}: over 16 MiB")
    return data


@dataclass(frozen=True)
class Found:
    """A cartridge file of the tree: its path below the registry, and its private copy."""

    rel: str
    copy: str
    size: int
    sha256: str


def copy_into(src_fd: int, dest: str, shown: str) -> tuple[int, str]:
    """Copy the open file `src_fd` to the new private file `dest`; (size, sha256 hex)."""
    digest = hashlib.sha256()
    size = 0
    with open(dest, "xb") as out:
        os.fchmod(out.fileno(), 0o600)
        while chunk := os.read(src_fd, CHUNK):
            size += len(chunk)
            if size > BUNDLE_LIMIT:
                raise EnvironmentProblem(f"{shown}: over 1 GiB, the largest bundle acxfs "
                                         "publishes")
            digest.update(chunk)
            out.write(chunk)
    return size, digest.hexdigest()


def cartridges(reg: RegistryDir, work: str) -> list[Found]:
    """Every `.acx` file below `cartridges/`, in name order, copied into `work`; a link or
    a cartridge off its coordinate's path refuses the registry."""
    found: list[Found] = []
    try:
        top = os.open(CARTRIDGES, _DIR_PATH, dir_fd=reg.fd)
    except FileNotFoundError:
        return found
    except OSError as exc:
        if exc.errno in (errno.ELOOP, errno.ENOTDIR):
            raise UnsafePathError(f"{reg.where(CARTRIDGES)}: is a symbolic link or not a "
                                  "directory; refused") from None
        raise EnvironmentProblem(f"{reg.where(CARTRIDGES)}: {exc.strerror or exc}") from None
    try:
        _walk(reg, top, CARTRIDGES, work, found)
    finally:
        os.close(top)
    return found


def _walk(reg: RegistryDir, fd: int, rel: str, work: str, found: list[Found]) -> None:
    for name in _listdir(fd, reg.where(rel)):
        child = f"{rel}/{name}"
        st = os.stat(name, dir_fd=fd, follow_symlinks=False)
        if stat.S_ISLNK(st.st_mode):
            raise UnsafePathError(f"{reg.where(child)}: a symbolic link in the registry tree; "
                                  "refused (the standard forbids them)")
        if stat.S_ISDIR(st.st_mode):
            sub = os.open(name, _DIR_PATH, dir_fd=fd)
            try:
                _walk(reg, sub, child, work, found)
            finally:
                os.close(sub)
        elif stat.S_ISREG(st.st_mode) and name.endswith(".acx"):
            if len(child.split("/")) != 5 or name != "cartridge.acx":
                raise SourceError(f"{reg.where(child)}: not at cartridges/<publisher>/<id>/"
                                  "<version>/cartridge.acx; the standard's builder rejects it")
            src = _open_file(fd, name, reg.where(child))
            assert src is not None
            try:
                copy = os.path.join(work, f"{len(found)}.acx")
                size, sha = copy_into(src, copy, reg.where(child))
            finally:
                os.close(src)
            found.append(Found(child, copy, size, sha))


def place_cartridge(reg: RegistryDir, rel: str, copy: str) -> None:
    """Write the private copy `copy` as the new file `rel` (its directories made as needed,
    never through a link); `undo` takes it and the directories back."""
    parent, name = rel.rsplit("/", 1)
    made = safe_dirs.make_dirs_at(reg.fd, parent, 0o777)
    try:
        with open(copy, "rb") as src:
            temp = safe_files.copy_fd_at(made.fd, name, src.fileno(), 0o666 & ~current_umask())
            temp.commit()
    except FileExistsError:
        made.remove_made()
        made.close()
        raise UnsafePathError(f"{reg.where(rel)}: appeared while publishing; refused") from None
    except BaseException:
        made.remove_made()
        made.close()
        raise
    reg.placed.append((os.dup(made.fd), name, _identity(made.fd, name)))
    reg.made_dirs.append(made)


def _identity(dirfd: int, name: str) -> tuple[int, int]:
    st = os.stat(name, dir_fd=dirfd, follow_symlinks=False)
    return st.st_dev, st.st_ino


def undo(reg: RegistryDir) -> None:
    """Take back the cartridges `place_cartridge` wrote (only while they are the files it
    wrote) and the directories it made for them."""
    for dirfd, name, ident in reg.placed:
        with contextlib.suppress(OSError):
            if _identity(dirfd, name) == ident:
                os.unlink(name, dir_fd=dirfd)
        os.close(dirfd)
    reg.placed = []
    for made in reversed(reg.made_dirs):
        made.remove_made()
        made.close()
    reg.made_dirs = []


def forget(reg: RegistryDir) -> None:
    """After success: keep what was placed, release the descriptors."""
    for dirfd, _, _ in reg.placed:
        os.close(dirfd)
    reg.placed = []
    for made in reg.made_dirs:
        made.close()
    reg.made_dirs = []


def write_file(reg: RegistryDir, name: str, data: bytes) -> None:
    """Replace the registry file `name` (index.json, status.json) whole and durably; a link
    there refuses it (checked before, and the rename replaces a name, never a target)."""
    held = _open_file(reg.fd, name, reg.where(name))  # a link or a non-file refuses
    if held is not None:
        os.close(held)
    with safe_files.open_new_at(reg.fd, name, 0o666 & ~current_umask()) as temp:
        temp.write(data)
        temp.commit(replace=True)
