"""Whose directories acxfs writes in or trusts: the one ownership rule, and the walks that
apply it.

The rule: a directory acxfs writes in (the library and everything above it, the state and
log directories, each agent's skill directory and everything above it) or trusts (the trust
store and everything above it) belongs to the user or root, and nobody else can write it:
neither others nor a group other than the user's personal group (the group named like the
user, which is the user's primary group and has no other member: the user private groups of
Debian and most distributions), unless the directory has the sticky bit, so that nobody else
can rename or remove what is the user's in it (as in /tmp).  Whoever can write a directory on
the way can put another tree in its place; whoever owns one can make it writable.

Invariant: a directory reached through `open_dir` or `make_dirs` here was checked on the very
descriptor the walk opened it with (`fstat`), from `/` down, with no link followed (but a
dotfiles link at the end, where the caller allows one: then every directory on its way too);
`check_path` checks by name, through links, every directory that decides what a path is (each
existing prefix resolved, and every directory above each).  The trust store phrases the
consequence its own way (`problem` gives it the facts); everyone else raises
`ForeignDirectory`, one line naming the path and the `chown` or `chmod` that fixes it.
"""

from __future__ import annotations

import errno
import functools
import grp
import os
import pwd
import shlex
import stat
from dataclasses import dataclass
from pathlib import Path

from acxfs.errors import ForeignDirectory
from acxfs.safe import _ops
from acxfs.safe import dirs as safe_dirs


@dataclass(frozen=True)
class Foreign:
    """What makes `path` another's: its owner `uid` (when `writers` is empty), or who besides
    the user can write it (`others`, `group NAME`, or both)."""

    path: str
    uid: int
    mode: int
    writers: str

    @property
    def fix(self) -> str:
        """The command that makes it the user's alone."""
        quoted = shlex.quote(self.path)
        if not self.writers:
            user = _user_name(os.geteuid())
            return f"{'' if os.geteuid() == 0 else 'sudo '}chown {user} {quoted}"
        who = ("g" if self.writers.startswith("group") else "") + (
            "o" if self.writers.endswith("others") else "")
        return f"chmod {who}-w {quoted}"

    def describe(self) -> str:
        """`PATH is owned by uid N` or `PATH is writable by WHO (mode M, no sticky bit)`."""
        if not self.writers:
            return f"{self.path} is owned by uid {self.uid}"
        sticky = ", no sticky bit" if stat.S_ISDIR(self.mode) else ""
        return (f"{self.path} is writable by {self.writers} "
                f"(mode {stat.S_IMODE(self.mode):o}{sticky})")

    def __str__(self) -> str:
        return f"{self.describe()}; acxfs will not write there: {self.fix}"


def _user_name(uid: int) -> str:
    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return str(uid)


@functools.lru_cache(maxsize=4)
def personal_group(uid: int) -> int | None:
    """The gid of `uid`'s personal group (its primary group, named like it, with no other
    member listed), or None."""
    try:
        user = pwd.getpwuid(uid)
        group = grp.getgrgid(user.pw_gid)
    except KeyError:
        return None
    if group.gr_name != user.pw_name or not set(group.gr_mem) <= {user.pw_name}:
        return None
    return user.pw_gid


def _group_name(gid: int) -> str:
    try:
        return grp.getgrgid(gid).gr_name
    except KeyError:
        return str(gid)


def problem(info: os.stat_result, path: str, *, sticky_ok: bool = True) -> Foreign | None:
    """What, if anything, makes the file or directory `info` (at `path`) another user's:
    the rule of the module docstring.  `sticky_ok=False` for a directory whose every entry
    acxfs reads (the trust store's own): there the sticky bit does not help."""
    uid = os.geteuid()
    if info.st_uid not in (uid, 0):
        return Foreign(path, info.st_uid, info.st_mode, "")
    mode = info.st_mode
    if sticky_ok and stat.S_ISDIR(mode) and mode & stat.S_ISVTX:
        return None
    writers = []
    if mode & stat.S_IWGRP and info.st_gid != personal_group(uid):
        writers.append(f"group {_group_name(info.st_gid)}")
    if mode & stat.S_IWOTH:
        writers.append("others")
    if not writers:
        return None
    return Foreign(path, info.st_uid, mode, " and ".join(writers))


def check_fd(fd: int) -> None:
    """Refuse the directory open as `fd` if it is another user's (`ForeignDirectory`)."""
    info = os.fstat(fd)
    if problem(info, "") is not None:  # named only then: the name costs a readlink
        raise ForeignDirectory(str(problem(info, _ops._where(fd))))


# --- walks that apply the rule ------------------------------------------------------------


def _absolute(path: str | os.PathLike[str]) -> str:
    text = os.fspath(path)
    if not os.path.isabs(text):
        raise ValueError(f"not an absolute path: {text!r}")
    return text


def open_dir(path: str | os.PathLike[str], *, allow_user_symlink: bool = False) -> int:
    """`acxfs.safe.dirs.open_dir` of the absolute `path`, every directory on the way (`/`
    included) checked; `FileNotFoundError` once the guarded part ends at a missing one."""
    return safe_dirs.open_dir(_absolute(path), allow_user_symlink=allow_user_symlink,
                              check=check_fd)


def make_dirs(path: str | os.PathLike[str], mode: int, *,
              allow_user_symlink: bool = False) -> safe_dirs.MadeDirs:
    """`acxfs.safe.dirs.make_dirs` of the absolute `path`, every directory on the way checked
    (those it makes too: `mode` less the umask must leave them the user's alone)."""
    return safe_dirs.make_dirs(_absolute(path), mode, allow_user_symlink=allow_user_symlink,
                               check=check_fd)


def check_walk(path: str | os.PathLike[str], *, allow_user_symlink: bool = False) -> None:
    """Check, as `open_dir` walks them, the directories of `path` that exist (a missing part
    is no refusal: it would be made by the user)."""
    try:
        os.close(open_dir(path, allow_user_symlink=allow_user_symlink))
    except OSError as exc:
        if exc.errno not in (errno.ENOENT, errno.ENOTDIR):
            raise


def decisive_dirs(path: str | os.PathLike[str]) -> list[Path]:
    """Every directory whose entries decide what `path` names, outermost first: for each
    prefix of the absolute `path` that exists, the directory it resolves to and every
    directory above that (a link on the way is replaced by writing the directory holding it,
    its target by writing the directories above the target)."""
    absolute = Path(os.path.abspath(path))
    found: dict[Path, None] = {}
    for prefix in [*reversed(absolute.parents), absolute]:
        if not os.path.lexists(prefix):
            break
        real = Path(os.path.realpath(prefix))
        for directory in [*reversed(real.parents), real]:
            found.setdefault(directory)
    return list(found)


def first_foreign(path: str | os.PathLike[str]) -> Foreign | None:
    """The first of `decisive_dirs(path)` that is another user's (by the rule), or None."""
    for directory in decisive_dirs(path):
        try:
            info = os.stat(directory)
        except OSError:
            continue  # gone meanwhile: nothing there to be another's
        found = problem(info, str(directory))
        if found is not None:
            return found
    return None


def check_path(path: str | os.PathLike[str]) -> None:
    """Refuse `path` when any of its decisive directories is another user's
    (`ForeignDirectory`)."""
    found = first_foreign(path)
    if found is not None:
        raise ForeignDirectory(str(found))
