"""Directories acxfs creates on the user's behalf, and taking them back.

Invariant: `make_dirs` returns exactly the directories it created (outermost first), and
`remove_made` removes only those, innermost first, and only while each is still empty; a
directory that existed before, or that someone filled meanwhile, is never touched.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Sequence


def make_dirs(path: str | os.PathLike[str]) -> list[str]:
    """Create `path` and its missing parents; the ones created, outermost first."""
    missing: list[str] = []
    current = os.path.abspath(path)
    while not os.path.lexists(current):
        missing.append(current)
        parent = os.path.dirname(current)
        if parent == current:
            break
        current = parent
    made: list[str] = []
    try:
        for directory in reversed(missing):
            os.mkdir(directory)
            made.append(directory)
    except BaseException:
        remove_made(made)
        raise
    return made


def remove_made(made: Sequence[str | os.PathLike[str]]) -> None:
    """Remove what `make_dirs` created, innermost first, stopping at the first that is not
    an empty directory any more."""
    for directory in reversed(made):
        with contextlib.suppress(OSError):
            os.rmdir(directory)
            continue
        return
