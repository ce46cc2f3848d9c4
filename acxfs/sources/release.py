"""A release a source offers, its lifecycle, and the choice of one version among several.

Invariant: a `Release` holds what a source *said* (unsigned); nothing in it is trusted until
the bundle it names passed the full check and its signed facts matched it.  `choose` takes
`@VERSION` exactly, else the highest SemVer release that is not pulled (withdrawn, yanked or
revoked), pre-releases only when named.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from acxfs import semver
from acxfs.errors import SourceError

PULLED = ("withdrawn", "yanked", "revoked")


@dataclass(frozen=True)
class Lifecycle:
    """What a source says happened to a release after it was published."""

    status: str  # deprecated, withdrawn, superseded, yanked, revoked
    date: str | None
    reason: str | None
    successor: str | None = None

    @property
    def pulled(self) -> bool:
        return self.status in PULLED

    def describe(self) -> str:
        text = self.status
        if self.successor:
            text += f" by {self.successor}"
        return text + (f" ({self.date[:10]})" if self.date else "")


@dataclass(frozen=True)
class Release:
    """One release at a source: where its bytes are and what must be true of them."""

    source: str  # the normalised source
    name: str  # publisher/id, or an azphalt package id
    version: str
    coordinate: str  # ACX: the path below BASE; azphalt: ID@VERSION
    size: int
    digest: str  # ACX: the signed manifest's sha256:<hex>; azphalt: the file's sha256-<hex>
    url: str | None  # None: `local` is a file of a directory source
    local: str | None = None
    lifecycle: Lifecycle | None = None

    @property
    def label(self) -> str:
        return f"{self.name} {self.version}"


def choose(source: str, name: str, version: str | None, offered: Sequence[str],
           pulled: Callable[[str], bool]) -> str:
    """The version to install from `offered`: `version` if offered, else the newest one not
    pulled (pre-releases only when named)."""
    ordered = sorted(offered, key=semver.parse)
    if version is not None:
        wanted = semver.parse(version)
        match = [v for v in ordered if semver.parse(v) == wanted]
        if match:
            return match[-1]
        have = ", ".join(ordered) if ordered else "no release of it"
        raise SourceError(f"{source} has no {name} {version} (it has {have})")
    if not ordered:
        raise SourceError(f"{source} has no {name}")
    stable = [v for v in ordered if not semver.parse(v).is_prerelease]
    if not stable:
        raise SourceError(f"{source} has only pre-releases of {name} ({', '.join(ordered)}); "
                          f"name one: {name}@VERSION")
    live = [v for v in stable if not pulled(v)]
    return live[-1] if live else stable[-1]


def refuse_pulled(release: Release, allow: bool) -> None:
    """The refusal of a withdrawn, yanked or revoked release, unless `allow`."""
    life = release.lifecycle
    if life is None or not life.pulled or allow:
        return
    date = f", {life.date[:10]}" if life.date else ""
    raise SourceError(f"{release.label} is {life.status} ({release.source}{date}): "
                      f"{life.reason or 'no reason given'}; --allow-withdrawn installs it "
                      "anyway")
