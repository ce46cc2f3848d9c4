"""What every format offers: the `Format` protocol, and the base of its verified source.

`Format` is every job the rest of acxfs asks of a container format; each format package
exposes one object that satisfies it (`FORMAT`), and `acxfs.formats.FORMATS` lists them.  Its
`open` returns the source together with the report of the one check it ran, so a caller that
needs the verdict, identity or skills checks a file once.

`StoredSource` is what every format's source shares: verified bytes through the process's
verified cache.
A format supplies one thing, `_stored_chunks(entry)`: the entry's stored bytes as its file
holds them (the only place a format hands stored bytes on), plus `_release` for what its
source holds open.  `StoredSource` owns the rest of the `Source` seam: `blob` and `read` ask
the cache, which verifies through `acxfs.content.rule` on first read, and `close` forgets the
source's cached blobs before the format releases its file.

Invariant: a `StoredSource` returns no byte that did not come out of the verified cache.
"""

from __future__ import annotations

import abc
import datetime as dt
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Protocol

from acxfs import verdict as v
from acxfs.container import Entry, Identity, Report, SignedFacts, Source, Tree, VerifiedBlob
from acxfs.content.cache import VerifiedCache
from acxfs.limits import Limits
from acxfs.signing.keys import PublicKey
from acxfs.trust.policy import TrustContext


class Format(Protocol):
    """One container format (see the module docstring)."""

    @property
    def name(self) -> str:
        """The format's name: a store file's suffix, compared only inside `acxfs.formats`."""
        ...

    def matches(self, head: bytes) -> bool:
        """Whether the file's first 16 bytes are this format's."""
        ...

    def check(self, path: str, trust: TrustContext, *, deep: bool, limits: Limits,
              now: dt.datetime | None) -> Report:
        """The verdict on `path`: never raises on content (EnvironmentProblem for I/O)."""
        ...

    def open(self, path: str, trust: TrustContext, cache: VerifiedCache, *,
             min_trust: v.MinTrust, with_save: bool, limits: Limits) -> tuple[Source, Report]:
        """A source reading through `cache` and the report of its check, if the verdict
        meets `min_trust`; UntrustedError otherwise."""
        ...

    def describe(self, report: Report) -> dict[str, object]:
        """`inspect`'s facts, each labelled by trust."""
        ...

    def render(self, report: Report, doc: dict[str, object]) -> str:
        """The text form of `describe`."""
        ...

    def signer_key(self, report: Report, keyid: str) -> PublicKey:
        """The verified signer's key (`trust add`)."""
        ...

    def identity(self, report: Report) -> Identity:
        """The signed identity (IdentityError unless verified)."""
        ...

    def facts(self, report: Report) -> SignedFacts:
        """The signed facts besides the identity; IdentityError unless verified."""
        ...

    def skills(self, report: Report) -> dict[str, str]:
        """Skill name -> its directory in the verified tree."""
        ...


class _Check(Protocol):
    def __call__(self, path: str, trust: TrustContext, *, deep: bool = ...,
                 limits: Limits = ..., now: dt.datetime | None = ...) -> Report: ...


class _Open(Protocol):
    def __call__(self, path: str, trust: TrustContext, cache: VerifiedCache, *,
                 min_trust: v.MinTrust = ..., with_save: bool = ...,
                 limits: Limits = ...) -> tuple[Source, Report]: ...


@dataclass(frozen=True)
class FormatRow:
    """A `Format` made of one function per job: how each format package states its row.
    Every field is typed with the signature `Format` asks of that job."""

    name: str
    matches: Callable[[bytes], bool]
    check: _Check
    open: _Open
    describe: Callable[[Report], dict[str, object]]
    render: Callable[[Report, dict[str, object]], str]
    signer_key: Callable[[Report, str], PublicKey]
    identity: Callable[[Report], Identity]
    skills: Callable[[Report], dict[str, str]]
    facts: Callable[[Report], SignedFacts]


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
