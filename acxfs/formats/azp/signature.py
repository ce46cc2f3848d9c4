"""The signature of an .azp package and the trust its signer chain earns.

Invariant: `check_signature` returns a `Signer` only for an Ed25519 signature over the exact
stored manifest bytes (a signature that is present must verify, or the package is
tampered); the countersignature chain is walked only as far as each link verifies.
`trust_verdict` grants trust only to a key that is itself an anchor (local key, pin,
eligible registry entry) for the package's publisher, the signer or one of its verified
countersigners; a revoked key breaks the chain there.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass

from acxfs import verdict as v
from acxfs.errors import KeyFormatError, Refused
from acxfs.formats.azp.manifest import SIGNATURE, parse_json_object
from acxfs.formats.azp.zip import tampered
from acxfs.limits import Limits
from acxfs.signing.keys import PublicKey, b64decode_any, public_key_from_spki_der
from acxfs.trust.policy import TrustContext

UNSIGNED = "Unsigned package (no signature.json)."
SIGNATURE_FAILED = "Signature verification failed (signature.json does not sign manifest.json)."
NOT_TRUSTED = "Signature valid but no key of its signer chain is trusted here."


@dataclass(frozen=True)
class Signer:
    """A signature that verified over the manifest bytes, and the chain that vouches for it."""

    key: PublicKey
    chain: tuple[PublicKey, ...]  # countersigners whose signatures verified, lowest first
    chain_problem: str | None  # why the walk stopped before the chain's end
    label: str | None  # signature.json keyId: a signer-chosen name, never used for trust


def _decode_signed_key(doc: dict[str, object]) -> tuple[PublicKey, bytes]:
    public, signature = doc.get("publicKey"), doc.get("signature")
    if not isinstance(public, str) or not isinstance(signature, str):
        raise KeyFormatError("publicKey and signature must be base64 strings")
    return public_key_from_spki_der(b64decode_any(public)), b64decode_any(signature)


def _walk_chain(
    first: object, signer: PublicKey, limits: Limits
) -> tuple[tuple[PublicKey, ...], str | None]:
    """Each countersignature signs the SPKI DER of the key below it; stop at the first break."""
    chain: list[PublicKey] = []
    below, link, hop = signer, first, 0
    while link is not None:
        hop += 1
        if hop > limits.max_countersign_hops:
            limit = limits.max_countersign_hops
            return tuple(chain), f"countersignature chain exceeds {limit} hops"
        if not isinstance(link, dict):
            return tuple(chain), f"countersignature at hop {hop} is malformed"
        try:
            key, signature = _decode_signed_key(link)
        except KeyFormatError as exc:
            return tuple(chain), f"countersignature at hop {hop} is malformed ({exc})"
        if not key.verifies(signature, below.spki_der):
            return tuple(chain), f"countersignature at hop {hop} does not verify"
        chain.append(key)
        below, link = key, link.get("countersignature")
    return tuple(chain), None


def check_signature(data: bytes, manifest: bytes, limits: Limits) -> Signer:
    """The signer of `manifest`, or tampered: a signature that is present must verify."""
    try:
        doc = parse_json_object(data, SIGNATURE)
        if doc.get("alg") != "ed25519":
            raise ValueError("alg is not ed25519")
        key, signature = _decode_signed_key(doc)
    except (ValueError, KeyFormatError) as exc:
        raise tampered(f"signature.json is malformed ({exc})") from exc
    if not key.verifies(signature, manifest):
        raise Refused(v.Verdict("tampered", SIGNATURE_FAILED))
    chain, problem = _walk_chain(doc.get("countersignature"), key, limits)
    label = doc.get("keyId")
    return Signer(key, chain, problem, label if isinstance(label, str) else None)


def _covers(scope: str | None, publisher: str | None) -> bool:
    """A pin for `scope` (None: any) covers `publisher` and its reverse-DNS sub-namespaces."""
    if scope is None:
        return True
    return publisher is not None and (publisher == scope or publisher.startswith(scope + "."))


def _anchor(
    trust: TrustContext, key: PublicKey, publisher: str | None, now: dt.datetime
) -> v.Trust | None:
    """'local' or 'trusted' when this key, by itself, is a trust anchor for `publisher`."""
    records = [r for r in trust.registry if r.keyid == key.keyid]  # none revoked (see caller)
    if key.keyid in trust.local:
        return "local"
    if any(p.keyid == key.keyid and _covers(p.publisher, publisher) for p in trust.pins):
        return "trusted"
    if any(
        r.status == "active" and publisher is not None and _covers(r.publisher, publisher)
        and r.not_before <= now <= r.not_after and r.proof_fits()
        for r in records
    ):
        return "trusted"
    return None


def trust_verdict(
    signer: Signer | None, publisher: str | None, trust: TrustContext, now: dt.datetime
) -> v.Verdict:
    """The signer key, or a key of its verified countersignature chain, must be an anchor."""
    if signer is None:
        return v.Verdict("legacy", UNSIGNED)
    keyid = signer.key.keyid
    records = [r for r in trust.registry if r.keyid == keyid]
    if any(r.revocation_reason == "key-compromise" for r in records if r.status == "revoked"):
        return v.Verdict("tampered", v.KEY_COMPROMISED)
    for hop, key in enumerate((signer.key, *signer.chain)):
        if any(r.status == "revoked" for r in trust.registry if r.keyid == key.keyid):
            # A revoked key breaks the chain there: what vouches for it vouches for nothing.
            summary = v.REVOKED if hop == 0 else (
                f"Countersigning key {key.keyid} at hop {hop} is revoked.")
            return v.Verdict("portable", summary, keyid=keyid, publisher=publisher)
        level = _anchor(trust, key, publisher, now)
        if level == "local":
            summary = v.LOCAL if hop == 0 else (
                f"Signer counter-signed by this instance's key ({hop}-hop chain).")
            return v.Verdict("local", summary, keyid=keyid, publisher=publisher)
        if level == "trusted":
            summary = f"Signed by trusted key {keyid}." if hop == 0 else (
                f"Signer counter-signed by trusted key {key.keyid} ({hop}-hop chain).")
            return v.Verdict("trusted", summary, keyid=keyid, publisher=publisher)
    return v.Verdict("portable", NOT_TRUSTED, keyid=keyid, publisher=publisher)
