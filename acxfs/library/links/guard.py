"""The directories of the library, and those it links into, as acxfs may use them.

Invariant: the library's root is reached from `/` with no link on the way and with every
directory on the way passing the ownership rule (`acxfs.safe.ownership`), it is the user's
own and mode 0700, and its own directories (`store`, `mnt`, `control`) are directories acxfs
made, never links: a command checks all of this before it takes the lock and again once it
holds it (the lock may have been waited for).  An agent directory is used only when it, and
every directory above it, passes the same rule.  Every refusal is one line naming the path
and what fixes it.
"""

from __future__ import annotations

import errno
import os
import shlex
import stat
from pathlib import Path

from acxfs.errors import EnvironmentProblem, UnsafePathError
from acxfs.paths import LibraryPaths
from acxfs.safe import dirs as safe_dirs
from acxfs.safe import ownership

LIBRARY_DIRS = ("store", "mnt", "control")


def open_root(paths: LibraryPaths, *, create: bool = True) -> int:
    """An `O_PATH` descriptor of the library's root (made, mode 0700, when missing and
    `create`), reached and checked as the module docstring says.  The caller closes it."""
    if create:
        with ownership.make_dirs(paths.root, 0o700) as made:
            fd = os.dup(made.fd)
    else:
        fd = ownership.open_dir(paths.root)
    try:
        info = os.fstat(fd)
        if info.st_uid != os.geteuid():
            raise EnvironmentProblem(f"{paths.root} belongs to another user; acxfs keeps its "
                                     "library only in a directory of its own")
        if stat.S_IMODE(info.st_mode) & 0o077:
            os.chmod(f"/proc/self/fd/{fd}", 0o700)
        check_layout(fd, paths.root)
    except BaseException:
        os.close(fd)
        raise
    return fd


def check_again(paths: LibraryPaths, root_fd: int) -> None:
    """After the lock was taken: the root is still reached and checked as before, and is
    still the directory whose lock is held (nobody put another in its place meanwhile)."""
    try:
        again = open_root(paths, create=False)
    except FileNotFoundError:
        raise UnsafePathError(f"{paths.root} was moved away while this command waited for the "
                              "library's lock; acxfs did nothing") from None
    try:
        now, then = os.fstat(again), os.fstat(root_fd)
        if (now.st_dev, now.st_ino) != (then.st_dev, then.st_ino):
            raise UnsafePathError(f"{paths.root} was replaced while this command waited for "
                                  "the library's lock; acxfs did nothing")
    finally:
        os.close(again)


def check_layout(root_fd: int, root: Path) -> None:
    """Refuse a library whose `store`, `mnt` or `control` is a link or no directory."""
    for name in LIBRARY_DIRS:
        try:
            info = os.stat(name, dir_fd=root_fd, follow_symlinks=False)
        except FileNotFoundError:
            continue
        except OSError as exc:
            if exc.errno == errno.ENOTCONN:  # a mount whose daemon is gone: a directory
                continue
            raise
        if stat.S_ISDIR(info.st_mode):
            continue
        what = "a symbolic link" if stat.S_ISLNK(info.st_mode) else "not a directory"
        path = root / name
        raise UnsafePathError(f"{path} is {what}; acxfs makes the library's own directories "
                              f"itself and follows no link there: remove it (rm "
                              f"{shlex.quote(str(path))})")


def make_dir(path: Path, mode: int) -> None:
    """Make the library directory `path` (or find it), with no link on the way."""
    with ownership.make_dirs(path, mode):
        pass


def check_agent_dirs(directories: list[str] | list[Path]) -> None:
    """Refuse (`ForeignDirectory`) when an agent directory, or one above it, is another
    user's; a part that does not exist yet is no refusal."""
    for directory in dict.fromkeys(str(d) for d in directories):
        ownership.check_walk(directory, allow_user_symlink=True)


def open_store(paths: LibraryPaths) -> int | None:
    """The store, opened for listing (`O_RDONLY`), reached with no link on the way; None
    when there is none yet."""
    try:
        path_fd = safe_dirs.open_dir(paths.store)
    except FileNotFoundError:
        return None
    try:
        return os.open(".", os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC, dir_fd=path_fd)
    finally:
        os.close(path_fd)
