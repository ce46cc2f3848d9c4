"""The seam between containers and the filesystem.

A `Source` is built only from a container that passed its shallow check: its `tree` holds
verified metadata (paths, kinds, sizes, signed digests) and `raw_chunks` hands the container's
stored bytes to `acxfs.content`, the one place where bytes are inflated, hashed and released.
The FUSE layer, `ls`, `cat` and `extract` see only this interface.
"""

from __future__ import annotations

import stat
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Literal, NamedTuple, Protocol

Codec = Literal["sqlar", "stored", "deflate"]
"""How stored bytes become file bytes: sqlar auto-detection, as is, or raw DEFLATE."""


class Entry(NamedTuple):
    """One file or directory of a verified tree. Paths are container paths without a leading /."""

    path: str
    is_dir: bool
    size: int = 0
    executable: bool = False
    mtime: int = 0
    digest: bytes | None = None  # signed sha256 of the uncompressed bytes (files)
    ref: int = -1  # the container's handle for the stored bytes (sqlar rowid, zip index)
    stored_size: int = 0  # bytes stored in the container (compressed length)
    codec: Codec = "sqlar"

    @property
    def name(self) -> str:
        return self.path.rsplit("/", 1)[-1]

    @property
    def mode(self) -> int:
        """The served mode: never writable; unsigned stored modes only add an execute bit."""
        if self.is_dir:
            return stat.S_IFDIR | 0o555
        return stat.S_IFREG | (0o555 if self.executable else 0o444)


@dataclass(frozen=True)
class Tree:
    """An immutable index of entries with implied parent directories; '' is the root."""

    entries: dict[str, Entry]
    children: dict[str, tuple[str, ...]]
    dir_mtime: int = 0

    def lookup(self, path: str) -> Entry | None:
        return self.entries.get(path)

    def list(self, path: str) -> tuple[str, ...]:
        return self.children.get(path, ())

    def child(self, path: str, name: str) -> Entry | None:
        """The entry `name` inside directory `path` ('' is the root)."""
        return self.entries.get(f"{path}/{name}" if path else name)

    def skills(self, skills_root: str) -> tuple[str, ...]:
        """The skills under `skills_root`: directories holding a SKILL.md file (chosen by
        their paths in this verified tree, never by an index)."""
        return tuple(
            name for name in self.list(skills_root)
            if (e := self.child(skills_root, name)) and e.is_dir
            and (md := self.child(f"{skills_root}/{name}", "SKILL.md")) and not md.is_dir
        )

    def files(self, prefix: str = "") -> Iterator[Entry]:
        """Every file at or below `prefix`, in path order."""
        for path in sorted(self.entries):
            entry = self.entries[path]
            if not entry.is_dir and (not prefix or path == prefix or path.startswith(prefix + "/")):
                yield entry


def build_tree(
    files: Iterable[Entry], dirs: Iterable[str] = (), dir_mtime: int = 0
) -> Tree:
    """Index `files` and directories (given or implied by file paths). Callers checked conflicts.

    Children are gathered in input order and sorted per directory at the end: containers list
    their files in path order, so each sort is a linear pass rather than a full sort."""
    entries: dict[str, Entry] = {"": Entry("", True, mtime=dir_mtime)}
    kids: dict[str, list[str]] = {"": []}

    def add_dir(path: str) -> None:
        while path and path not in entries:  # each directory is listed once, when it is made
            entries[path] = Entry(path, True, mtime=dir_mtime)
            kids.setdefault(path, [])
            parent, _, name = path.rpartition("/")
            kids.setdefault(parent, []).append(name)
            path = parent

    for d in dirs:
        add_dir(d)
    for f in files:
        path = f[0]
        parent, _, name = path.rpartition("/")
        if parent not in entries:
            add_dir(parent)
        siblings = kids.setdefault(parent, [])
        if path in entries and name in siblings:  # named twice: the last stands, listed once
            siblings.remove(name)
        entries[path] = f
        siblings.append(name)
    children = {path: tuple(sorted(names)) for path, names in kids.items()}
    return Tree(entries, children, dir_mtime)


class Source(Protocol):
    """A verified container: metadata in `tree`, stored bytes through `raw_chunks`."""

    tree: Tree
    label: str  # what the user named, for messages and the mount's fsname

    @property
    def skills_root(self) -> str:
        """The tree path that holds the skills (where `--skill NAME` looks)."""
        ...

    def raw_chunks(self, entry: Entry) -> Iterator[bytes]:
        """The stored bytes of a file entry, in order (compressed as `entry.codec` says)."""
        ...

    def close(self) -> None: ...



@dataclass
class SourceStats:
    """Counters a source and the content path update; shown by the mount as user.acx.stats."""

    blobs_inflated: int = 0
    bytes_verified: int = 0
    tamper_events: int = 0
    cache_hits: int = 0
    cache_misses: int = 0
    extra: dict[str, int] = field(default_factory=dict)
