"""DSSE envelopes: parse untrusted JSON, verify Ed25519 over the PAE, hand out verified bytes.

`parse_envelope` only checks shape.  `verify_envelope` returns the payload bytes together with
the key that verified them, and only then may anyone parse the payload.  Signatures are never
checked over the raw payload, always over PAE(payloadType, payload).
"""

from __future__ import annotations

import base64
import json
from collections.abc import Callable
from dataclasses import dataclass

from acxfs.errors import EnvelopeFormatError, KeyFormatError
from acxfs.limits import DEFAULT_LIMITS, Limits
from acxfs.signing.keys import PrivateKey, PublicKey, b64decode_any

IN_TOTO_PAYLOAD_TYPE = "application/vnd.in-toto+json"


@dataclass(frozen=True, slots=True)
class EnvelopeSignature:
    keyid: str
    sig: bytes


@dataclass(frozen=True, slots=True)
class Envelope:
    """A parsed, NOT yet verified, DSSE envelope."""

    payload_type: str
    payload: bytes
    signatures: tuple[EnvelopeSignature, ...]


@dataclass(frozen=True, slots=True)
class SignatureCheck:
    """The outcome for one envelope signature: which key was used and whether it verified."""

    keyid: str
    key: PublicKey | None
    valid: bool


def pae(payload_type: str, payload: bytes) -> bytes:
    """DSSE v1 pre-authentication encoding."""
    type_bytes = payload_type.encode("utf-8")
    return b"DSSEv1 %d %s %d %s" % (len(type_bytes), type_bytes, len(payload), payload)


def parse_envelope(text: str, limits: Limits = DEFAULT_LIMITS) -> Envelope:
    if len(text) > limits.max_envelope_bytes:
        raise EnvelopeFormatError("envelope exceeds the size limit")
    try:
        doc = json.loads(text)
    except (ValueError, RecursionError) as exc:
        raise EnvelopeFormatError("envelope is not JSON") from exc
    if not isinstance(doc, dict):
        raise EnvelopeFormatError("envelope is not a JSON object")
    payload_type, payload, sigs = doc.get("payloadType"), doc.get("payload"), doc.get("signatures")
    if not isinstance(payload_type, str) or not isinstance(payload, str):
        raise EnvelopeFormatError("envelope lacks payloadType or payload")
    if not isinstance(sigs, list) or not sigs or len(sigs) > limits.max_signatures:
        raise EnvelopeFormatError("envelope has no usable signatures list")
    parsed: list[EnvelopeSignature] = []
    try:
        body = b64decode_any(payload)
        for item in sigs:
            if not isinstance(item, dict):
                raise EnvelopeFormatError("envelope signature is not an object")
            keyid, sig = item.get("keyid", ""), item.get("sig")
            if not isinstance(keyid, str) or not isinstance(sig, str):
                raise EnvelopeFormatError("envelope signature lacks keyid or sig")
            parsed.append(EnvelopeSignature(keyid, b64decode_any(sig)))
    except KeyFormatError as exc:
        raise EnvelopeFormatError("envelope holds invalid base64") from exc
    return Envelope(payload_type, body, tuple(parsed))


def check_signatures(
    envelope: Envelope, key_for: Callable[[str], PublicKey | None]
) -> list[SignatureCheck]:
    """Check each signature with the key `key_for(keyid)` names (None: no key, not checked)."""
    message = pae(envelope.payload_type, envelope.payload)
    results = []
    for signature in envelope.signatures:
        key = key_for(signature.keyid)
        valid = key is not None and key.verifies(signature.sig, message)
        results.append(SignatureCheck(signature.keyid, key, valid))
    return results


def sign_envelope(payload_type: str, payload: bytes, key: PrivateKey) -> str:
    """A DSSE envelope (JSON text) with one Ed25519 signature by `key`."""
    sig = key.sign(pae(payload_type, payload))
    doc = {
        "payloadType": payload_type,
        "payload": base64.b64encode(payload).decode("ascii"),
        "signatures": [{"keyid": key.public.keyid, "sig": base64.b64encode(sig).decode("ascii")}],
    }
    return json.dumps(doc, separators=(",", ":"))
