"""The neutral seam between containers and everything that serves them.

Invariant: a `Source` is built only from a container that passed its check; its `tree` holds
verified metadata (paths, kinds, sizes, signed digests) and its only byte API, `blob` and
`read`, returns bytes whose sha256 matched the entry's digest (through `acxfs.content.cache`).
No public method hands out stored bytes.  `Report` is a format's non-raising check result
and `Identity` the signed facts that name a bundle.  This module imports nothing from
`acxfs.formats` or `acxfs.content.cache`, so every format and every consumer can import it
(and the formats' names, `FORMAT_NAMES`, without loading a format).
"""

from __future__ import annotations

import re
import stat
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Literal, NamedTuple, Protocol

from acxfs.verdict import Verdict

SEGMENT_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}")
"""The spec's path-segment rule: a name that is safe as one path segment anywhere."""

FORMAT_NAMES = ("acx", "azp")
"""The name of each row of `acxfs.formats.FORMATS`, in its order (a store file's suffix, a
lock's `format`), for the code that reads such a name without loading the formats."""

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


class VerifiedBlob(Protocol):
    """Bytes whose sha256 matched the signed digest."""

    size: int

    def read(self, offset: int, length: int) -> bytes: ...

    def close(self) -> None: ...


class Source(Protocol):
    """A verified container: metadata in `tree`, verified bytes through `blob` and `read`."""

    tree: Tree
    label: str  # what the user named, for messages and the mount's fsname

    @property
    def skills_root(self) -> str:
        """The tree path that holds the skills (where `--skill NAME` looks)."""
        ...

    def blob(self, entry: Entry) -> VerifiedBlob:
        """The verified bytes of a file entry (TamperError or UnverifiableError otherwise)."""
        ...

    def read(self, entry: Entry, offset: int, length: int) -> bytes:
        """`length` verified bytes of a file entry from `offset` (as `blob` raises)."""
        ...

    def close(self) -> None: ...


@dataclass
class SourceStats:
    """Counters the content path updates; shown by a mount as user.acx.stats."""

    blobs_inflated: int = 0
    bytes_verified: int = 0
    tamper_events: int = 0
    cache_hits: int = 0
    cache_misses: int = 0


@dataclass
class Report:
    """A format's non-raising check result: what `verify` and `inspect` print.

    `format` is the format's name (compared only inside `acxfs.formats`); `checked` is the
    format's verified container, None when the check failed (opaque outside its format)."""

    verdict: Verdict
    format: str
    warnings: list[str] = field(default_factory=list)
    checked: object | None = None


@dataclass(frozen=True)
class SignedFacts:
    """What a bundle's signature covers besides its identity, for labels outside it (an OCI
    manifest's annotations) and the envelope the check verified; None: not signed."""

    created: str | None = None
    description: str | None = None
    license: str | None = None
    spec_version: str | None = None  # the ACX spec version a cartridge declares
    rom_manifest: str | None = None  # a cartridge's signed ROM manifest hash
    envelope: bytes | None = None  # the signature's DSSE envelope, exactly as checked


@dataclass(frozen=True)
class Identity:
    """The signed facts that name a bundle: publisher (None for an .azp package), artifact id
    and version, each a safe path segment; `release` is the digest of the signed manifest
    ('sha256:<hex>'), which tells two releases of one version apart."""

    publisher: str | None
    artifact: str
    version: str
    release: str = ""  # the digest the signature covers (ROM manifest, package manifest)

    @property
    def name(self) -> str:
        """`publisher/artifact` for a cartridge, the package id for a package."""
        return self.artifact if self.publisher is None else f"{self.publisher}/{self.artifact}"
