"""What every format's source shares: verified bytes through the process's verified cache.

A format supplies one thing, `_stored_chunks(entry)`: the entry's stored bytes as its file
holds them (the only place a format hands stored bytes on), plus `_release` for what its
source holds open.  `StoredSource` owns the rest of the `Source` seam: `blob` and `read` ask
the cache, which verifies through `acxfs.content.rule` on first read, and `close` forgets the
source's cached blobs before the format releases its file.

Invariant: a `StoredSource` returns no byte that did not come out of the verified cache.
"""

from __future__ import annotations

import abc
from collections.abc import Iterator

from acxfs.container import Entry, Tree, VerifiedBlob
from acxfs.content.cache import VerifiedCache
from acxfs.limits import Limits


class StoredSource(abc.ABC):
    """A checked container served as verified bytes only (see the module docstring)."""

    skills_root: str  # the tree path that holds the skills (each format's own)

    def __init__(self, tree: Tree, label: str, cache: VerifiedCache, limits: Limits) -> None:
        self.tree = tree
        self.label = label
        self._cache = cache
        self._step = limits.chunk_bytes  # how much stored data one chunk holds at most

    def blob(self, entry: Entry) -> VerifiedBlob:
        """The verified bytes of `entry` (TamperError/UnverifiableError otherwise)."""
        return self._cache.get(self, entry, self._stored_chunks)

    def read(self, entry: Entry, offset: int, length: int) -> bytes:
        """`length` verified bytes of `entry` from `offset` (as `blob` raises)."""
        return self.blob(entry).read(offset, length)

    def close(self) -> None:
        self._cache.forget(self)
        self._release()

    @abc.abstractmethod
    def _stored_chunks(self, entry: Entry) -> Iterator[bytes]:
        """The stored bytes of `entry`, for the verified cache only; TamperError when the
        file no longer holds them as checked."""

    @abc.abstractmethod
    def _release(self) -> None:
        """Close what the source holds open on its file (called once, by `close`)."""
