"""What acxfs remembers of each source it installed from, so that a source cannot take back
what it said: the newest index and ledger accepted, coordinates' digests, pulled releases.

Invariant: memory only grows (newer times, more coordinates, more pulled releases) and is
saved only with a library change acxfs makes; an older index or ledger is refused unless
the user accepts it, a coordinate's digest never changes, a withdrawal, yank or revocation
that a source later drops stays in force, and an OCI repository keeps the identity it first
carried and, per version tag, the release it was published as.  A first contact, a lost state and a
frozen source (an old index replayed forever) are not detected: nothing here is signed.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from acxfs.errors import RollbackError, SourceError
from acxfs.sources.acx_index import instant
from acxfs.sources.release import Lifecycle


@dataclass(frozen=True)
class Published:
    """One version tag of an OCI repository as acxfs accepted it."""

    manifest: str  # the OCI manifest's sha256:<hex>
    layer: str  # the bundle file's sha256:<hex>
    signed: str  # the signed manifest's sha256:<hex> (what the signature covers)


@dataclass
class SourceMemory:
    generated_at: str | None = None  # the newest index generatedAt accepted
    generated_seen: str | None = None  # when acxfs accepted it
    updated_at: str | None = None  # the newest status.json updatedAt accepted
    updated_seen: str | None = None
    revoked_at: str | None = None  # the newest revokedAt of a repository's feed
    coordinates: dict[str, str] = field(default_factory=dict)  # "NAME VERSION" -> digest
    pulled: dict[str, Lifecycle] = field(default_factory=dict)  # "NAME VERSION" -> lifecycle
    identity: str | None = None  # what an OCI repository carries
    published: dict[str, Published] = field(default_factory=dict)  # OCI: version tag ->

    def to_doc(self) -> dict[str, object]:
        return {
            "generatedAt": self.generated_at, "generatedSeen": self.generated_seen,
            "updatedAt": self.updated_at, "updatedSeen": self.updated_seen,
            "revokedAt": self.revoked_at, "coordinates": dict(sorted(self.coordinates.items())),
            "pulled": {k: {"status": v.status, "date": v.date, "reason": v.reason,
                           "successor": v.successor} for k, v in sorted(self.pulled.items())},
            "identity": self.identity,
            "published": {k: {"manifest": v.manifest, "layer": v.layer, "signed": v.signed}
                          for k, v in sorted(self.published.items())},
        }

    @classmethod
    def from_doc(cls, doc: object) -> SourceMemory:
        if not isinstance(doc, dict):
            raise ValueError("a source's memory is not an object")
        texts = {k: _text_or_none(doc.get(k), k) for k in
                 ("generatedAt", "generatedSeen", "updatedAt", "updatedSeen", "revokedAt")}
        coordinates = doc.get("coordinates", {})
        pulled = doc.get("pulled", {})
        if not isinstance(coordinates, dict) or not isinstance(pulled, dict):
            raise ValueError("a source's coordinates or pulled releases are not objects")
        published = doc.get("published", {})
        if not isinstance(published, dict):
            raise ValueError("a source's published releases are not an object")
        return cls(
            texts["generatedAt"], texts["generatedSeen"], texts["updatedAt"],
            texts["updatedSeen"], texts["revokedAt"],
            {str(k): _text(v, "coordinate digest") for k, v in coordinates.items()},
            {str(k): _lifecycle(v) for k, v in pulled.items()},
            _text_or_none(doc.get("identity"), "identity"),
            {str(k): _published(v) for k, v in published.items()},
        )

    # --- the checks ----------------------------------------------------------------------

    def check_time(self, where: str, kind: str, seen: str, allow_stale: bool) -> None:
        """Refuse an index (`kind` generated) or ledger (updated) older than the one accepted."""
        accepted = self.generated_at if kind == "generated" else self.updated_at
        on = self.generated_seen if kind == "generated" else self.updated_seen
        if accepted is None or allow_stale or instant(seen) >= instant(accepted):
            return
        raise RollbackError(f"{where} ({kind} {seen}) is older than the one accepted on "
                          f"{(on or '?')[:10]} ({accepted}): a rollback or a stale mirror; "
                          "--allow-stale accepts it")

    def check_coordinate(self, source: str, coordinate: str, digest: str) -> None:
        known = self.coordinates.get(coordinate)
        if known is not None and known != digest:
            raise SourceError(f"{source} changed {coordinate} ({known}, now {digest}); "
                              "published coordinates are immutable")

    # --- growing -------------------------------------------------------------------------

    def accept_time(self, kind: str, seen: str, now: str) -> None:
        if kind == "generated":
            if self.generated_at is None or instant(seen) > instant(self.generated_at):
                self.generated_at, self.generated_seen = seen, now
        elif self.updated_at is None or instant(seen) > instant(self.updated_at):
            self.updated_at, self.updated_seen = seen, now

    def accept_revoked(self, revoked_at: str) -> None:
        if self.revoked_at is None or instant(revoked_at) > instant(self.revoked_at):
            self.revoked_at = revoked_at

    def remember_pulled(self, coordinate: str, life: Lifecycle) -> None:
        if life.pulled and coordinate not in self.pulled:
            self.pulled[coordinate] = life

    def merged(self, learned: SourceMemory) -> SourceMemory:
        """This memory (what the library holds now) grown by what a command `learned` from
        a copy of an earlier one: the newer of each time, every coordinate, pulled release
        and published tag of both (this memory's where both hold one, as it was recorded
        first), so that nothing a concurrent command recorded is lost."""
        out = SourceMemory.from_doc(self.to_doc())
        if _later(learned.generated_at, out.generated_at):
            out.generated_at, out.generated_seen = learned.generated_at, learned.generated_seen
        if _later(learned.updated_at, out.updated_at):
            out.updated_at, out.updated_seen = learned.updated_at, learned.updated_seen
        if learned.revoked_at is not None:
            out.accept_revoked(learned.revoked_at)
        out.coordinates = {**learned.coordinates, **out.coordinates}
        out.pulled = {**learned.pulled, **out.pulled}
        out.published = {**learned.published, **out.published}
        out.identity = out.identity or learned.identity
        return out


def _later(seen: str | None, accepted: str | None) -> bool:
    return seen is not None and (accepted is None or instant(seen) > instant(accepted))


def _text(value: object, what: str) -> str:
    if not isinstance(value, str):
        raise ValueError(f"{what} is not text")
    return value


def _text_or_none(value: object, what: str) -> str | None:
    return None if value is None else _text(value, what)


def _lifecycle(doc: object) -> Lifecycle:
    if not isinstance(doc, dict):
        raise ValueError("a pulled release is not an object")
    status = _text(doc.get("status"), "status")
    return Lifecycle(status, _text_or_none(doc.get("date"), "date"),
                     _text_or_none(doc.get("reason"), "reason"),
                     _text_or_none(doc.get("successor"), "successor"))


def _published(doc: object) -> Published:
    if not isinstance(doc, dict):
        raise ValueError("a published release is not an object")
    return Published(_text(doc.get("manifest"), "manifest"), _text(doc.get("layer"), "layer"),
                     _text(doc.get("signed"), "signed"))
