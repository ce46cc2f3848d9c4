"""Before a mount: the mountpoint exists and is empty, and no mount hides what acxfs needs.

Invariant: no mount is made on, inside or over a path acxfs depends on (its state, the trust
store, the library's data, the log, the inputs); the one exception is a mountpoint the caller
reserved for itself (the skills library's own `mnt`, which it passes as `reserved`).
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

from acxfs.errors import EnvironmentProblem
from acxfs.mount import backend as fuse_backend
from acxfs.mount.table import canonical, is_mounted
from acxfs.paths import library_paths, mount_records_dir, state_dir, trust_dir
from acxfs.safe import dirs as safe_dirs
from acxfs.safe import ownership


def prepare_mountpoint(
    mountpoint: str, backend: str = fuse_backend.DEFAULT_BACKEND
) -> list[str] | None:
    """Check (or create) an empty directory to mount on.  None when it existed; otherwise the
    parents acxfs had to create for it, outermost first (removed again at unmount)."""
    try:
        os.path.abspath(mountpoint).encode("utf-8")
    except UnicodeEncodeError as exc:  # the FUSE bindings pass the path to libfuse as UTF-8
        raise EnvironmentProblem(f"{mountpoint!r} is not a UTF-8 path; acxfs can only mount on "
                                 "UTF-8 paths") from exc
    if is_mounted(mountpoint):
        raise EnvironmentProblem(f"{mountpoint} is already a mount point")
    if not os.path.exists("/dev/fuse"):
        raise EnvironmentProblem("/dev/fuse is missing: FUSE is not available on this machine")
    if not os.access("/dev/fuse", os.R_OK | os.W_OK):
        # libfuse opens it in-process before it would try fusermount: say so instead of failing
        # in C with "failed to open /dev/fuse".
        raise EnvironmentProblem("/dev/fuse is not readable and writable by this user; FUSE "
                                 "needs it crw-rw-rw- (udev's default rule for fuse)")
    fuse_backend.load(backend)  # fails here, before the fork, if the library is missing
    if os.path.lexists(mountpoint):
        if not os.path.isdir(mountpoint) or os.path.islink(mountpoint):
            raise EnvironmentProblem(f"{mountpoint} is not a directory")
        try:
            if os.listdir(mountpoint):
                raise EnvironmentProblem(f"{mountpoint} is not empty")
        except PermissionError as exc:
            raise EnvironmentProblem(f"{mountpoint}: permission denied") from exc
        return None
    absolute = os.path.abspath(mountpoint)  # what is made is removed again from "/" too
    try:  # no link on the way, so the directories made are where the mountpoint says
        with safe_dirs.make_dirs(absolute) as made:
            return [path for path in made.made if path != absolute]
    except OSError as exc:
        raise EnvironmentProblem(f"cannot create {mountpoint}: {exc.strerror}") from exc


def check_mountpoint(mountpoint: str, inputs: list[str], log_file: Path | None,
                     log_label: str = "--log-file", *, reserved: Path | None = None) -> None:
    """Refuse a mountpoint on, inside or holding what acxfs depends on (a mount there would
    hide it, or make acxfs wait on its own mount).  `reserved`: a directory inside the
    library's data that this mount may use (the skills library passes its own `mnt`)."""
    target = canonical(mountpoint)
    own = canonical(str(reserved)) if reserved is not None else None
    for what, path in [("acxfs's state directory", state_dir()), ("the trust store", trust_dir()),
                       ("the skills library's data directory", library_paths().root),
                       *([(log_label, log_file)] if log_file is not None else []),
                       *((f"the input {item}", Path(item)) for item in inputs)]:
        if target == own and what.startswith("the skills library"):
            continue
        if _within(target, path) or _within(path, target):
            where = ("is" if _same_file(target, path) else "is inside"
                     if _within(target, path) else "holds")
            raise EnvironmentProblem(f"the mountpoint {mountpoint} {where} {what} {path}; "
                                     "acxfs will not mount over what it depends on")


def check_side_files(mountpoint: str, inputs: list[str], log_file: Path | None,
                     log_label: str = "--log-file") -> None:
    """Refuse a mountpoint on or over what acxfs depends on (`check_mountpoint`), a log file
    or state directory inside the mount (its daemon's first write would wait on itself
    forever), and a log file that is one of the files the command reads."""
    for what, path in (("the state directory", state_dir()), (log_label, log_file)):
        if path is not None and _within(path, canonical(mountpoint)):
            raise EnvironmentProblem(f"{what} {path} is inside the mountpoint {mountpoint}: "
                                     "the daemon cannot write into its own mount")
    if log_file is not None:
        for item in inputs:
            if _same_file(item, log_file):
                raise EnvironmentProblem(f"{log_label} {log_file} is an input of this command "
                                         f"({item}); acxfs never writes to what it reads")
        if _within(log_file, trust_dir()):
            raise EnvironmentProblem(f"{log_label} {log_file} is inside the trust store "
                                     f"{trust_dir()}; acxfs never writes to what it reads")
        if _within(log_file, mount_records_dir()):
            raise EnvironmentProblem(f"{log_label} {log_file} is inside acxfs's mount records "
                                     f"{mount_records_dir()}")
        if os.path.lexists(log_file) and not os.path.isfile(log_file):
            raise EnvironmentProblem(f"{log_label} {log_file} is not a regular file")
    check_mountpoint(mountpoint, inputs, log_file, log_label)
    if log_file is not None:
        ownership.check_path(log_file.parent)
    prepare_records_dir()


def prepare_records_dir() -> None:
    """Make the mount records directory (`ForeignDirectory` when another user could change
    it or a directory above it; one line for any other failure): the daemon records its
    mount there as it starts, and a failure then would hang it."""
    try:
        with ownership.make_dirs(mount_records_dir(), 0o755):
            pass
    except OSError as exc:
        raise EnvironmentProblem(f"cannot use the state directory {state_dir()} "
                                 f"({exc.strerror})") from exc


def remove_made(made: list[str]) -> None:
    """Remove the directories acxfs made for a mountpoint, innermost first, stopping at the
    first one that is not an empty directory any more (rmdir removes nothing else)."""
    for directory in reversed(made):
        with contextlib.suppress(OSError):
            os.rmdir(directory)
            continue
        return


def _within(path: str | Path, directory: str | Path) -> bool:
    """`path` is `directory` or lies under it, both resolved (symlinks included)."""
    return Path(os.path.realpath(path)).is_relative_to(os.path.realpath(directory))


def _same_file(a: str | Path, b: str | Path) -> bool:
    """The same path, or two names of one file (a hard link, a symlink)."""
    if os.path.realpath(a) == os.path.realpath(b):
        return True
    try:
        return os.path.samefile(a, b)
    except OSError:  # one of them does not exist (yet)
        return False


