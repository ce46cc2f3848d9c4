"""Verified files out of a source: one file to a stream, or a subtree as a new directory.

Invariant: only bytes the source returns as verified are written, and a directory is created
whole or not at all: it is staged beside its destination and renamed into place, never over
anything, only once every file in it is complete; on any failure the staging directory and
the parents made for it are removed again.  Every step is relative to an open directory
descriptor (`acxfs.safe.dirs`, `acxfs.safe.files`): the destination's parent is reached
without following another user's link, the staging directory is made under a fresh name and
filled through its descriptor, so moving it, or swapping it or anything in it for a link,
never makes acxfs write or chmod anywhere else.  Modes are 0644 or 0755 (executable files)
less the process's umask, set with `fchmod`; nothing else of the container's unsigned
metadata is applied.  A signal stops an extract only at a `checkpoint()` (`acxfs.safe.interrupts`):
between files, between chunks of one, and once before the tree is renamed into place.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

from acxfs.container import Entry, Source
from acxfs.errors import EnvironmentProblem
from acxfs.safe import dirs as safe_dirs
from acxfs.safe import files as safe_files
from acxfs.safe.interrupts import checkpoint

STEP = 1024 * 1024  # bytes written per call


def copy_verified(source: Source, entry: Entry, write: Callable[[bytes], object]) -> None:
    """Pass the verified bytes of the file `entry` of `source` to `write`, in order."""
    blob = source.blob(entry)
    for offset in range(0, blob.size, STEP):
        checkpoint()
        write(blob.read(offset, STEP))


def refuse_existing(dest: Path) -> None:
    """EnvironmentProblem if anything (a dangling link too) is at `dest` already."""
    if dest.exists() or dest.is_symlink():
        raise EnvironmentProblem(f"{dest} exists; extract writes a new directory")


def extract(source: Source, dest: Path, root: str = "") -> int:
    """Write the files of `source` at or below the tree path `root` as the new directory
    `dest` (its parents created as needed); the number of files written."""
    refuse_existing(dest)
    mask = safe_dirs.current_umask()
    absolute = Path(os.path.abspath(dest))
    with safe_dirs.make_dirs(absolute.parent, allow_user_symlink=True) as made:
        try:
            with safe_files.open_new_dir_at(made.fd, absolute.name) as staging:
                count = _fill(source, staging.fd, root, mask)
                os.fchmod(staging.fd, 0o755 & ~mask)
                checkpoint()  # the last point to stop at: after it, the tree is put in place
                try:
                    staging.commit()
                except FileExistsError as exc:
                    raise EnvironmentProblem(f"{dest} exists; extract writes a new "
                                             "directory") from exc
        except BaseException:
            made.remove_made()
            raise
    return count


def _fill(source: Source, top: int, root: str, mask: int) -> int:
    """Write every file below `root` into the open directory `top`; how many."""
    count = 0
    for entry in source.tree.files(root):
        checkpoint()  # a stop asked for (`acxfs.safe.interrupts`) is honoured between files
        relative = entry.path[len(root) + 1:] if root else entry.path
        parent, _, name = relative.rpartition("/")
        with safe_dirs.make_dirs_at(top, parent) as where:
            mode = (0o755 if entry.executable else 0o644) & ~mask
            with safe_files.open_new_at(where.fd, name, mode) as temp:
                copy_verified(source, entry, temp.write)
                temp.commit(durable=False)
        count += 1
    return count
