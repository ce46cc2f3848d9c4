"""Trust policy: registries, pins and the standard's taxonomy for a verified signer, as data.

A `TrustContext` holds the keys this machine trusts (registry entries, pins, the local key)
and does no I/O; `TrustContext.evaluate` maps a signer that already verified to a verdict
(section 6).  Every stored pin names exactly one publisher; only a `--trust-key` key, given
for one command, covers any publisher.  `parse_registry` checks an `acx.trust-registry/1`
document given as text.  Reading the files behind all this is `acxfs.trust.store`'s job.

Invariant: nothing in this module touches the filesystem, the environment or a stream.
"""

from __future__ import annotations

import datetime as dt
import re
from dataclasses import dataclass, field

from acxfs import verdict as v
from acxfs.errors import KeyFormatError, TrustConfigError
from acxfs.limits import DEFAULT_LIMITS, Limits
from acxfs.safe import strict_json
from acxfs.signing.keys import PublicKey, public_key_from_pem

REGISTRY_SCHEMA = "acx.trust-registry/1"
_TOP_FIELDS = {"schemaVersion", "registryId", "updatedAt", "keys"}
_REQUIRED = {
    "keyid", "publisherId", "algorithm", "publicKeyPem", "status", "notBefore", "notAfter",
    "namespaceProof",
}
_OPTIONAL = {"rotatedFrom", "rotatedTo", "revokedAt", "revocationReason"}
_STATUSES = {"active", "revoked", "expired"}
_REASONS = {"key-compromise", "superseded", "retired"}
OIDC_ISSUER = "https://token.actions.githubusercontent.com"
_PUBLISHER_RE = re.compile(r"[a-z0-9]([a-z0-9-]*[a-z0-9])?(\.[a-z0-9]([a-z0-9-]*[a-z0-9])?)+")


def parse_time(text: object) -> dt.datetime | None:
    """An RFC 3339 / ISO 8601 timestamp as an aware datetime, or None."""
    if not isinstance(text, str):
        return None
    try:
        value = dt.datetime.fromisoformat(text.strip())
    except ValueError:
        return None
    return value if value.tzinfo else value.replace(tzinfo=dt.UTC)


@dataclass(frozen=True)
class RegistryKey:
    keyid: str
    publisher: str
    key: PublicKey
    status: str
    not_before: dt.datetime
    not_after: dt.datetime
    proof: object
    revoked_at: dt.datetime | None
    revocation_reason: str | None
    source: str

    def proof_fits(self) -> bool:
        return namespace_proof_fits(self.publisher, self.proof)


@dataclass(frozen=True)
class Pin:
    """A key the user chose to trust: a stored pin for one publisher, or (publisher None)
    a `--trust-key` key for any publisher, for one command only."""

    keyid: str
    key: PublicKey
    publisher: str | None
    source: str


def namespace_proof_fits(publisher: str, proof: object) -> bool:
    """The exact proof shape section 6 requires for `publisher`."""
    if not isinstance(proof, dict) or not all(isinstance(x, str) for x in proof.values()):
        return False
    parts = publisher.split(".")
    if len(parts) >= 3 and parts[0] == "io" and parts[1] == "github":
        return (
            set(proof) == {"method", "oidcSubject", "oidcIssuer", "verifiedAt"}
            and proof["method"] == "github-oidc"
            and proof["oidcSubject"].startswith(f"repo:{parts[2]}/")
            and proof["oidcIssuer"] == OIDC_ISSUER
        )
    return (
        set(proof) == {"method", "txtRecord", "verifiedAt"}
        and proof["method"] == "dns-txt"
        and proof["txtRecord"] == "_acx-challenge." + ".".join(reversed(parts))
    )


def parse_registry(text: str, source: str, limits: Limits = DEFAULT_LIMITS) -> list[RegistryKey]:
    """Validate an acx.trust-registry/1 document; TrustConfigError names what is wrong."""

    def bad(why: str) -> TrustConfigError:
        return TrustConfigError(f"trust registry {source} is unusable: {why}")

    if len(text) > limits.max_registry_bytes:
        raise bad("too large")
    if "PRIVATE KEY" in text:
        raise bad("it contains private key material")
    try:
        doc = strict_json.loads(text)
    except (ValueError, RecursionError) as exc:
        raise bad(f"not JSON ({exc})" if "duplicate" in str(exc) else "not JSON") from exc
    if not isinstance(doc, dict):
        raise bad("not a JSON object")
    unknown = set(doc) - _TOP_FIELDS
    if unknown:
        raise bad(f"unknown field {sorted(unknown)[0]!r}")
    if doc.get("schemaVersion") != REGISTRY_SCHEMA:
        raise bad(f"schemaVersion is not {REGISTRY_SCHEMA!r}")
    entries = doc.get("keys")
    if not isinstance(entries, list):
        raise bad("keys is not a list")
    keys: list[RegistryKey] = []
    seen: set[str] = set()
    for item in entries:
        if not isinstance(item, dict):
            raise bad("a key entry is not an object")
        missing = _REQUIRED - set(item)
        if missing:
            raise bad(f"a key entry lacks {sorted(missing)[0]!r}")
        unknown = set(item) - _REQUIRED - _OPTIONAL
        if unknown:
            raise bad(f"unknown field {sorted(unknown)[0]!r}")
        keyid = item["keyid"]
        if not isinstance(keyid, str) or keyid in seen:
            raise bad(f"duplicate or invalid keyid {keyid!r}")
        seen.add(keyid)
        for name in ("status", "algorithm", "revocationReason", "revokedAt"):
            if name in item and item[name] is not None and not isinstance(item[name], str):
                raise bad(f"{keyid}: {name} must be a string")
        if item["algorithm"] != "ed25519":
            raise bad(f"{keyid}: algorithm is not ed25519")
        if item["status"] not in _STATUSES:
            raise bad(f"{keyid}: unknown status {item['status']!r}")
        reason = item.get("revocationReason")
        if reason is not None and reason not in _REASONS:
            raise bad(f"{keyid}: unknown revocationReason {reason!r}")
        if not isinstance(item["publisherId"], str) or not isinstance(item["publicKeyPem"], str):
            raise bad(f"{keyid}: publisherId and publicKeyPem must be strings")
        try:
            key = public_key_from_pem(item["publicKeyPem"])
        except KeyFormatError as exc:
            raise bad(f"{keyid}: publicKeyPem: {exc}") from exc
        if key.keyid != keyid:
            raise bad(f"{keyid}: publicKeyPem has keyid {key.keyid}")
        not_before, not_after = parse_time(item["notBefore"]), parse_time(item["notAfter"])
        revoked_at = parse_time(item.get("revokedAt"))
        if not_before is None or not_after is None:
            raise bad(f"{keyid}: notBefore/notAfter are not timestamps")
        if item.get("revokedAt") is not None and revoked_at is None:
            raise bad(f"{keyid}: revokedAt is not a timestamp")
        keys.append(
            RegistryKey(
                keyid, item["publisherId"], key, item["status"], not_before, not_after,
                item["namespaceProof"], revoked_at, reason, source,
            )
        )
    return keys


@dataclass(frozen=True)
class TrustDecision:
    trust: v.Trust
    summary: str


@dataclass
class TrustContext:
    """Every key acxfs trusts for this command. Built from files; evaluates without I/O."""

    registry: list[RegistryKey] = field(default_factory=list)
    pins: list[Pin] = field(default_factory=list)
    local: dict[str, PublicKey] = field(default_factory=dict)

    def key_for(self, keyid: str) -> PublicKey | None:
        """A key from outside the container with this keyid."""
        for record in self.registry:
            if record.keyid == keyid:
                return record.key
        for pin in self.pins:
            if pin.keyid == keyid:
                return pin.key
        return self.local.get(keyid)

    def evaluate(
        self, keyid: str, publisher: str | None, signed_at: str | None, now: dt.datetime
    ) -> TrustDecision:
        """The section 6 taxonomy for a signer whose signature verified."""
        records = [r for r in self.registry if r.keyid == keyid]
        signed = parse_time(signed_at)
        revoked = [r for r in records if r.status == "revoked"]
        if any(r.revocation_reason == "key-compromise" for r in revoked):
            return TrustDecision("tampered", v.KEY_COMPROMISED)
        if revoked:
            before = all(
                signed is not None and r.revoked_at is not None and signed < r.revoked_at
                for r in revoked
            )
            return TrustDecision("portable", v.REVOKED_AFTER if before else v.REVOKED)
        if keyid in self.local:
            return TrustDecision("local", v.LOCAL)
        pinned = [p for p in self.pins if p.keyid == keyid]
        if publisher and any(p.publisher in (None, publisher) for p in pinned):
            return TrustDecision("trusted", v.trusted_summary(publisher))
        for r in records:
            if (
                r.status == "active"
                and publisher is not None
                and r.publisher == publisher
                and signed is not None
                and r.not_before <= signed <= r.not_after
                and now <= r.not_after
                and r.proof_fits()
            ):
                return TrustDecision("trusted", v.trusted_summary(publisher))
        if records or pinned:
            return TrustDecision("portable", v.NOT_ELIGIBLE)
        return TrustDecision("portable", v.NOT_IN_REGISTRY)



def valid_publisher(publisher: str) -> bool:
    return bool(_PUBLISHER_RE.fullmatch(publisher))

