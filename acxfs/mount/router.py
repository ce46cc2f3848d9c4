"""Which source serves a mount path: sources at path prefixes, and the directories between.

One mount serves one or many sources, each under a path prefix (the prefix '' is a mount of
one source at the mount's root; other prefixes are paths such as `pub/artifact/1.0.0-ab12`,
whose parent directories are made up, read-only and empty but for what leads to a source).

Invariant: no two prefixes of one router nest or repeat (a path has at most one source), and
a prefix is a relative path of plain names.  The layout is replaced whole under a lock and
read without one: a request works on the layout it found when it started.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field, replace

from acxfs.container import Source
from acxfs.verdict import Verdict

Listing = list[tuple[str, dict[str, int] | None, int]]


@dataclass(frozen=True)
class Mounted:
    """One source in a mount: the subtree at tree path `root` of `source`, shown at `prefix`
    ('' for the mount's root), which passed `verdict`; `label` names it in logs and events."""

    prefix: str
    source: Source
    root: str
    verdict: Verdict
    label: str
    min_mtime_ns: int = 0  # files and directories are shown no older than this


@dataclass
class Served:
    """A mounted source with what was worked out about it (dropped with it at detach)."""

    mounted: Mounted
    attrs: dict[str, dict[str, int]] = field(default_factory=dict)
    listings: dict[str, Listing] = field(default_factory=dict)
    usage: tuple[int, int] | None = None  # (bytes, entries), on first statfs


@dataclass(frozen=True)
class Layout:
    """The sources of a mount at one moment, and the directories made up to reach them."""

    served: dict[str, Served]
    dirs: dict[str, tuple[str, ...]]  # made-up directory -> its children's names
    single: Served | None  # the source mounted at prefix '', which then is the only one


def make_layout(served: dict[str, Served], reserved: frozenset[str] = frozenset()) -> Layout:
    """The layout of `served`, with a made-up directory for each name `reserved` (one
    component each) even when nothing is served under it."""
    children: dict[str, set[str]] = {} if "" in served else {"": set()}
    for name in () if "" in served else reserved:
        children[""].add(name)
        children.setdefault(name, set())
    for prefix in served:
        parts = prefix.split("/") if prefix else []
        for depth in range(len(parts)):
            children.setdefault("/".join(parts[:depth]), set()).add(parts[depth])
    dirs = {path: tuple(sorted(names)) for path, names in children.items()}
    return Layout(served, dirs, served.get(""))


def route(layout: Layout, rel: str) -> tuple[Served, str] | None:
    """The source whose prefix leads `rel` and the path below it (None: none does)."""
    if layout.single is not None:
        return layout.single, rel
    parts = rel.split("/") if rel else []
    for depth in range(1, len(parts) + 1):
        served = layout.served.get("/".join(parts[:depth]))
        if served is not None:
            return served, "/".join(parts[depth:])
    return None


def _valid_prefix(prefix: str) -> bool:
    return prefix == "" or all(part not in ("", ".", "..") for part in prefix.split("/"))


class PrefixRouter:
    """The sources of one mount by prefix (see the module docstring)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._reserved: frozenset[str] = frozenset()
        self.layout = make_layout({})

    def reserve(self, names: frozenset[str]) -> None:
        """From now on the made-up directories right below the root are these `names` (plain
        names), as well as those leading to a prefix."""
        if not all(_valid_prefix(name) and name and "/" not in name for name in names):
            raise ValueError(f"not plain names: {sorted(names)!r}")
        with self._lock:
            self._reserved = names
            self.layout = make_layout(self.layout.served, names)

    def attach(self, prefix: str, mounted: Mounted) -> None:
        """Serve `mounted` at `prefix` from now on.  ValueError for a prefix that is taken,
        lies inside or around another one, or is not a relative path of plain names."""
        self.attach_all({prefix: mounted})

    def attach_all(self, adding: dict[str, Mounted]) -> None:
        """`attach` of each (prefix, mounted) of `adding` at once, with one new layout; none
        of them is attached if any one would be refused (ValueError)."""
        with self._lock:
            served = dict(self.layout.served)
            for prefix, mounted in adding.items():
                prefix = prefix.strip("/")
                if not _valid_prefix(prefix):
                    raise ValueError(f"not a path prefix: {prefix!r}")
                for other in served:
                    if other == "" or prefix == "" or other == prefix or \
                            other.startswith(prefix + "/") or prefix.startswith(other + "/"):
                        raise ValueError(f"prefix {prefix!r} overlaps the mounted {other!r}")
                if mounted.prefix != prefix:
                    mounted = replace(mounted, prefix=prefix)
                served[prefix] = Served(mounted)
            self.layout = make_layout(served, self._reserved)

    def detach(self, prefix: str) -> Mounted | None:
        """Stop serving what is at `prefix`; it is returned (None if nothing was there) for
        the caller to close once the requests already routed to it are done."""
        gone = self.detach_all([prefix])
        return gone[0] if gone else None

    def detach_all(self, prefixes: list[str]) -> list[Mounted]:
        """`detach` of each of `prefixes` at once, with one new layout; what was served at
        them is returned."""
        with self._lock:
            served = dict(self.layout.served)
            gone = [found for prefix in prefixes
                    if (found := served.pop(prefix.strip("/"), None)) is not None]
            self.layout = make_layout(served, self._reserved)
        return [each.mounted for each in gone]

    def mounted(self) -> list[Mounted]:
        """What is served now, by prefix."""
        served = self.layout.served
        return [served[prefix].mounted for prefix in sorted(served)]
