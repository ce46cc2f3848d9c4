"""The symlinks acxfs puts in agents' skill directories, and nothing else there.

Invariant: acxfs creates a link only where nothing exists, re-points or removes only a link
whose target is the one it recorded, and never follows, replaces or writes into anything it
did not make.  A refusal is returned as one line naming the path; the caller decides whether
that stops the command (before a change) or is reported (while finishing one).  A directory
that refuses the step itself (read-only, full, no permission) raises `AgentDirectoryError`
naming it, and the journal undoes the change.  A step that needs a temporary entry (a
re-point, a removal) makes it under the name the journal chose and wrote down beforehand, so
`clean_temp` can remove what a killed step left.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from acxfs.errors import AgentDirectoryError, EnvironmentProblem, UnsafePathError
from acxfs.safe import dirs as safe_dirs
from acxfs.safe import links as safe_links
from acxfs.safe import ownership


@dataclass(frozen=True)
class Link:
    """A symlink acxfs made: `directory/name -> target`."""

    directory: str
    name: str
    target: str

    @property
    def path(self) -> Path:
        return Path(self.directory) / self.name


def private_dir(path: Path) -> None:
    """Make `path` (and missing parents) a directory only its owner can enter, every
    directory on the way another user cannot change (`acxfs.safe.ownership`)."""
    with ownership.make_dirs(path, 0o700) as made:
        info = os.fstat(made.fd)
        if info.st_uid != os.geteuid():
            raise EnvironmentProblem(f"{path} belongs to another user; acxfs keeps its library "
                                     "only in a directory of its own")
        if stat.S_IMODE(info.st_mode) & 0o077:
            os.chmod(f"/proc/self/fd/{made.fd}", 0o700)


@contextlib.contextmanager
def _directory(path: Path, create: bool) -> Iterator[int]:
    """The agent directory `path`, opened without following links (but a dotfiles link),
    it and every directory above it another user cannot change (`acxfs.safe.ownership`)."""
    if create:
        with ownership.make_dirs(path, 0o755, allow_user_symlink=True) as made:
            yield made.fd
        return
    fd = ownership.open_dir(path, allow_user_symlink=True)
    try:
        yield fd
    finally:
        os.close(fd)


def _current(fd: int, name: str) -> str | None:
    """The target of the link `name`, '' when something else is there, None when nothing is."""
    try:
        info = os.stat(name, dir_fd=fd, follow_symlinks=False)
    except FileNotFoundError:
        return None
    if not stat.S_ISLNK(info.st_mode):
        return ""
    return os.readlink(name, dir_fd=fd)


def conflict(link: Link) -> str | None:
    """Why `link` cannot be made (something not acxfs's is there), or None."""
    try:
        with _directory(Path(link.directory), create=False) as fd:
            found = _current(fd, link.name)
    except FileNotFoundError:
        return None
    if found is None or found == link.target:
        return None
    return f"{link.path} already exists and acxfs did not make it"


@contextlib.contextmanager
def _refusals(directory: str) -> Iterator[None]:
    """A failure of the system in `directory` (read-only, full, no permission) as one
    AgentDirectoryError naming it; a missing entry or directory is left to the caller."""
    try:
        yield
    except (FileNotFoundError, AgentDirectoryError):
        raise
    except OSError as exc:
        raise AgentDirectoryError(directory, exc.strerror or str(exc)) from exc


def make(link: Link, create: bool = True) -> str | None:
    """Make the link where nothing is (its directory too, with `create`)."""
    try:
        with _refusals(link.directory), _directory(Path(link.directory), create) as fd:
            try:
                safe_links.symlink_new_at(fd, link.name, link.target)
            except FileExistsError:
                if _current(fd, link.name) != link.target:
                    return f"{link.path} already exists and acxfs did not make it; left alone"
    except FileNotFoundError:  # only without `create`: its directory is gone
        return None
    except UnsafePathError as exc:  # the way to it changed since the change was checked
        return f"{exc}; left alone"
    return None


def repoint(old: Link, new: Link, temp: str | None = None) -> str | None:
    """Re-point `old` to `new.target` in one rename: a reader sees one tree or the other.
    `temp`: the temporary name to make the new link under (written down beforehand)."""
    try:
        with _refusals(old.directory), _directory(Path(old.directory), create=False) as fd:
            if _current(fd, old.name) == new.target:
                return None
            safe_links.replace_symlink_at(fd, old.name, new.target, expect_old=old.target,
                                          temp_name=temp)
    except (FileNotFoundError, NotADirectoryError):
        return f"{old.path} is gone (its directory was removed); left alone"
    except UnsafePathError:
        return f"{old.path} was changed by hand; left alone"
    return None


def remove(link: Link, temp: str | None = None) -> str | None:
    """Remove the link acxfs made (moved aside to `temp` first, when given)."""
    try:
        with _refusals(link.directory), _directory(Path(link.directory), create=False) as fd:
            if _current(fd, link.name) is None:
                return None
            safe_links.remove_symlink_at(fd, link.name, expect_target=link.target,
                                         aside_name=temp)
    except (FileNotFoundError, NotADirectoryError):
        return None
    except UnsafePathError:
        return f"{link.path} was changed by hand; left alone"
    return None


# --- a directory served whole: the directory itself becomes one link, and back ---------------


@contextlib.contextmanager
def _real_dir(fd: int, name: str) -> Iterator[int | None]:
    """`name` in `fd` opened as a directory, never through a link (None: nothing is there,
    or it is not a real directory)."""
    try:
        inner = os.open(name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC,
                        dir_fd=fd)
    except OSError as exc:
        if exc.errno not in (errno.ENOENT, errno.ENOTDIR, errno.ELOOP):
            raise
        yield None
        return
    try:
        yield inner
    finally:
        os.close(inner)


def _entries(fd: int, name: str) -> list[str] | None:
    """The names in the real directory `name` of `fd` (None: it is not one, or not there)."""
    with _real_dir(fd, name) as inner:
        return None if inner is None else os.listdir(inner)


def make_whole(link: Link) -> str | None:
    """Turn the agent directory at `link.path` into the link `link`: where nothing is, or
    where it is an empty directory (the links acxfs had in it removed by the steps before)."""
    try:
        with _refusals(link.directory), _directory(Path(link.directory), create=True) as fd:
            if _current(fd, link.name) == link.target:
                return None
            if _entries(fd, link.name) == []:
                os.rmdir(link.name, dir_fd=fd)
            try:
                safe_links.symlink_new_at(fd, link.name, link.target)
            except FileExistsError:
                return f"{link.path} holds what acxfs did not make; left alone"
    except UnsafePathError as exc:
        return f"{exc}; left alone"
    return None


def unmake_whole(link: Link, temp: str | None = None) -> str | None:
    """Turn the link `link` acxfs made for an agent directory back into an empty directory
    (for the links the next steps make in it)."""
    try:
        with _refusals(link.directory), _directory(Path(link.directory), create=False) as fd:
            found = _current(fd, link.name)
            if found == link.target:
                safe_links.remove_symlink_at(fd, link.name, expect_target=link.target,
                                             aside_name=temp)
            elif found is not None and _entries(fd, link.name) is None:
                return f"{link.path} was changed by hand; left alone"
            if _current(fd, link.name) is None:
                os.mkdir(link.name, 0o755, dir_fd=fd)
                safe_dirs.fsync_dir(fd)
    except (FileNotFoundError, NotADirectoryError):
        return None
    except UnsafePathError:
        return f"{link.path} was changed by hand; left alone"
    return None


# --- undoing a change: each step back only where the step's own link is ----------------------


def _holds(link: Link, target: str) -> bool:
    """Whether the link acxfs made at `link.path` points to `target` now."""
    try:
        with _refusals(link.directory), _directory(Path(link.directory), create=False) as fd:
            return _current(fd, link.name) == target
    except (FileNotFoundError, NotADirectoryError, UnsafePathError):
        return False


def unmake(link: Link, temp: str) -> str | None:
    """Undo `make(link)`: remove the link if it is there (nothing else is touched)."""
    return remove(link, temp) if _holds(link, link.target) else None


def unrepoint(old: Link, new: Link, temp: str) -> str | None:
    """Undo `repoint(old, new)`: back to `old.target` if the link points to `new.target`."""
    return repoint(new, old, temp) if _holds(new, new.target) else None


def unremove(link: Link) -> str | None:
    """Undo `remove(link)`: make the link again where nothing is (in its directory only if
    that is still there)."""
    return make(link, create=False)


def clean_temp(directory: str, temp: str, targets: set[str]) -> None:
    """Remove what a killed step left at the temporary name `temp` in `directory`: only a link
    to one of `targets` (the step's own link, or the one it replaced)."""
    try:
        with _refusals(directory), _directory(Path(directory), create=False) as fd:
            found = _current(fd, temp)
            if found and found in targets:
                os.unlink(temp, dir_fd=fd)
                safe_dirs.fsync_dir(fd)
    except (FileNotFoundError, NotADirectoryError, UnsafePathError):
        return


def states_of(links: list[Link]) -> list[str]:
    """`state_of` of every link, each agent directory opened once (not once per link: `up`
    looks at every link of the library)."""
    by_directory: dict[str, list[int]] = {}
    for index, link in enumerate(links):
        by_directory.setdefault(link.directory, []).append(index)
    found = ["missing"] * len(links)
    for directory, indexes in by_directory.items():
        try:
            with _directory(Path(directory), create=False) as fd:
                for index in indexes:
                    target = _current(fd, links[index].name)
                    found[index] = ("missing" if target is None else
                                    "ok" if target == links[index].target else "changed")
        except OSError as exc:
            if exc.errno not in (errno.ENOENT, errno.ENOTDIR):
                raise
        except UnsafePathError:  # its directory was replaced by a link acxfs does not follow
            for index in indexes:
                found[index] = "changed"
    return found


def whole_link(directory: str, target: str) -> Link:
    """The link that is the agent directory `directory` served whole, in its parent."""
    parent, name = os.path.split(directory)
    return Link(parent, name, target)


def states_in(links: list[Link], whole: dict[str, str]) -> list[str]:
    """`states_of`, where a link in a directory served whole (`whole`: directory -> its
    view) is as the link that is its directory is."""
    return states_of([whole_link(link.directory, whole[link.directory])
                      if link.directory in whole else link for link in links])


def foreign_entries(directory: str, recorded: set[tuple[str, str]]) -> str | None:
    """Why the agent directory `directory` cannot be served whole (None: it is absent, or a
    directory holding nothing but links acxfs `recorded`, as (name, target))."""
    link = whole_link(directory, "")
    try:
        with _directory(Path(link.directory), create=False) as fd, \
                _real_dir(fd, link.name) as inner:
            if inner is None and _current(fd, link.name) is None:
                return None
            if inner is not None:
                strangers = sorted(name for name in os.listdir(inner)
                                   if (name, _current(inner, name) or "") not in recorded)
                if not strangers:
                    return None
                return (f"{directory} holds {', '.join(strangers[:3])}"
                        f"{' and more' if len(strangers) > 3 else ''}, which acxfs did not make")
    except FileNotFoundError:
        return None
    return f"{directory} is not a directory acxfs can replace (it is a link or a file)"


def state_of(link: Link) -> str:
    """'ok', 'missing' or 'changed': what is at the link's path now."""
    try:
        with _directory(Path(link.directory), create=False) as fd:
            found = _current(fd, link.name)
    except OSError as exc:
        if exc.errno in (errno.ENOENT, errno.ENOTDIR):
            return "missing"
        raise
    except UnsafePathError:  # its directory was replaced by a link acxfs does not follow
        return "changed"
    if found is None:
        return "missing"
    return "ok" if found == link.target else "changed"
