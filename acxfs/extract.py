"""Verified files out of a source: one file to a stream, or a subtree as a new directory.

Invariant: only bytes the source returns as verified are written, and a directory is created
whole or not at all: it is staged beside its destination and renamed into place, never over
anything, only once every file in it is complete; on any failure the staging directory and
the parents made for it are removed again.  Modes are 0644 or 0755 (executable files) less
the process's umask; nothing else of the container's unsigned metadata is applied.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path
from typing import BinaryIO

from acxfs.container import Entry, Source
from acxfs.errors import EnvironmentProblem
from acxfs.made_dirs import current_umask, make_dirs, remove_made, rename_new

STEP = 1024 * 1024  # bytes written per call


def copy_verified(source: Source, entry: Entry, out: BinaryIO) -> None:
    """Write the verified bytes of the file `entry` of `source` to `out`."""
    blob = source.blob(entry)
    for offset in range(0, blob.size, STEP):
        out.write(blob.read(offset, STEP))


def refuse_existing(dest: Path) -> None:
    """EnvironmentProblem if anything (a dangling link too) is at `dest` already."""
    if dest.exists() or dest.is_symlink():
        raise EnvironmentProblem(f"{dest} exists; extract writes a new directory")


def extract(source: Source, dest: Path, root: str = "") -> int:
    """Write the files of `source` at or below the tree path `root` as the new directory
    `dest` (its parents created as needed); the number of files written."""
    refuse_existing(dest)
    mask = current_umask()
    made = make_dirs(dest.parent)
    try:
        # Not named after dest: a name near the 255-byte limit would leave no room.
        staging = Path(tempfile.mkdtemp(prefix=".acxfs-extract-", dir=dest.parent))
    except BaseException:
        remove_made(made)
        raise
    try:
        count = 0
        for entry in source.tree.files(root):
            target = staging / (entry.path[len(root) + 1:] if root else entry.path)
            target.parent.mkdir(parents=True, exist_ok=True)
            with open(target, "wb") as handle:
                copy_verified(source, entry, handle)
            os.chmod(target, (0o755 if entry.executable else 0o644) & ~mask)
            count += 1
        os.chmod(staging, 0o755 & ~mask)  # mkdtemp made it 0700
        rename_new(staging, dest)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        remove_made(made)
        raise
    return count
