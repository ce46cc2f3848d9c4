"""Keeping a project's skill links out of git: one anchored line per link in the exclude file.

Invariant: the links point into one home and must never be committed.  acxfs asks git itself
where the work tree's exclude file is (`git rev-parse --git-path info/exclude`: linked work
trees and submodules included) and which paths it tracks; it adds its lines under one header
and later removes only lines it added.  The exclude file is replaced whole through a temporary
file, never written through a link; a change to it is idempotent, so a change killed midway
is finished by running it again.
"""

from __future__ import annotations

import contextlib
import os
import stat
import subprocess
from dataclasses import dataclass
from pathlib import Path

from acxfs.errors import IsALink, NotAFile, UnsafePathError
from acxfs.safe import dirs as safe_dirs
from acxfs.safe import files as safe_files
from acxfs.safe.dirs import current_umask
from acxfs.safe.inputs import open_file_at

HEADER = "# acxfs: project links (acxfs.lock)"
GIT_TIMEOUT = 30.0
MAX_BYTES = 4 * 1024 * 1024


@dataclass(frozen=True)
class WorkTree:
    """The git work tree a project lies in: its root and its exclude file."""

    root: Path
    exclude: Path


def _git(project: Path, *args: str) -> subprocess.CompletedProcess[bytes] | None:
    env = {k: v for k, v in os.environ.items()
           if k not in ("GIT_DIR", "GIT_WORK_TREE", "GIT_INDEX_FILE")}
    try:
        return subprocess.run(["git", "-C", str(project), *args], capture_output=True,
                              timeout=GIT_TIMEOUT, stdin=subprocess.DEVNULL, env=env,
                              check=False)
    except (OSError, subprocess.TimeoutExpired):
        return None


def work_tree(project: Path) -> WorkTree | None:
    """The work tree `project` lies in, or None (not one, or no git here)."""
    done = _git(project, "rev-parse", "--show-toplevel", "--git-path", "info/exclude")
    if done is None or done.returncode != 0:
        return None
    lines = os.fsdecode(done.stdout).splitlines()
    if len(lines) != 2 or not lines[0]:
        return None
    exclude = Path(os.path.join(project, lines[1]))
    return WorkTree(Path(os.path.realpath(lines[0])),
                    Path(os.path.realpath(exclude.parent)) / exclude.name)


def tracked(project: Path, paths: list[Path]) -> dict[Path, str]:
    """The paths of `paths` git tracks (a file, or a directory with tracked files in it),
    each with one tracked path to show."""
    if not paths:
        return {}
    done = _git(project, "ls-files", "-z", "--full-name", "--",
                *(os.path.relpath(p, project) for p in paths))
    if done is None or done.returncode != 0:
        return {}
    top = work_tree(project)
    if top is None:
        return {}
    files = [top.root / os.fsdecode(name) for name in done.stdout.split(b"\0") if name]
    found: dict[Path, str] = {}
    for path in paths:
        for file in files:
            if file == path or path in file.parents:
                found[path] = str(file)
                break
    return found


def line_for(tree: WorkTree, path: Path) -> str:
    """The anchored exclude line for `path`, glob characters escaped."""
    relative = os.path.relpath(path, tree.root)
    escaped = "".join("\\" + ch if ch in "\\*?[" else ch for ch in relative)
    if escaped.endswith(" "):
        escaped = escaped[:-1] + "\\ "
    return "/" + escaped


def present(exclude: Path) -> set[str]:
    """The lines the exclude file holds now."""
    try:
        text = _read(exclude)
    except (OSError, UnsafePathError):
        return set()
    return set((text or "").splitlines())


def _read(exclude: Path) -> str | None:
    try:
        dirfd = safe_dirs.open_dir(exclude.parent)
    except FileNotFoundError:
        return None
    try:
        try:
            opened = open_file_at(dirfd, exclude.name)
        except IsALink:
            raise UnsafePathError(f"{exclude} is a symbolic link; acxfs does not write "
                                  "through it") from None
        except NotAFile:
            raise UnsafePathError(f"{exclude} is not a regular file") from None
        if opened is None:
            return None
        fd = opened[0]
        try:
            data = os.read(fd, MAX_BYTES + 1)
        finally:
            os.close(fd)
    finally:
        os.close(dirfd)
    if len(data) > MAX_BYTES:
        raise UnsafePathError(f"{exclude} is larger than {MAX_BYTES} bytes")
    return data.decode("utf-8", errors="surrogateescape")


def edited(text: str, add: list[str], remove: list[str]) -> str:
    """`text` with the lines of `remove` taken out and those of `add` put under the header
    (the header itself removed once nothing is under it)."""
    lines = [line for line in text.splitlines() if line not in remove]
    missing = [line for line in add if line not in lines]
    if missing:
        if HEADER not in lines:
            if lines and lines[-1] != "":
                lines.append("")
            lines.append(HEADER)
        at = lines.index(HEADER) + 1
        while at < len(lines) and lines[at].startswith("/"):
            at += 1
        lines[at:at] = missing
    if HEADER in lines:
        at = lines.index(HEADER)
        if at + 1 >= len(lines) or not lines[at + 1].startswith("/"):
            del lines[at]
            if at > 0 and lines[at - 1] == "" and (at >= len(lines) or lines[at] == ""):
                del lines[at - 1]
    return "".join(line + "\n" for line in lines)


def apply(exclude: Path, add: list[str], remove: list[str]) -> str | None:
    """Make the exclude file hold `add` and not `remove` (lines acxfs added); a line saying
    why it was left alone, or None."""
    try:
        text = _read(exclude)
    except (OSError, UnsafePathError) as exc:
        return f"{exc}; left alone"
    if text is None and not add:
        return None
    new = edited(text or "", add, remove)
    if new == (text or ""):
        return None
    try:
        with safe_dirs.make_dirs(exclude.parent, 0o755) as made:
            mode = 0o666 & ~current_umask()
            with contextlib.suppress(FileNotFoundError):
                mode = stat.S_IMODE(os.stat(exclude.name, dir_fd=made.fd,
                                            follow_symlinks=False).st_mode)
            with safe_files.open_new_at(made.fd, exclude.name, mode) as temp:
                temp.write(new.encode("utf-8", errors="surrogateescape"))
                temp.commit(replace=True)
    except (OSError, UnsafePathError) as exc:
        return f"{exclude}: cannot write it ({exc}); left alone"
    return None
