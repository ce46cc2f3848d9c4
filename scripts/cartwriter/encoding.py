"""The encodings a cartridge signs with: RFC 8785 JCS, sha256 digests and oids, the DSSE
pre-authentication encoding, lenient base64, and Ed25519 keys as SPKI/PKCS#8 PEM and keyids.
"""

from __future__ import annotations

import base64
import hashlib
import json
from dataclasses import dataclass
from typing import Any

import nacl.signing

from scripts.cartwriter.spec import PKCS8_PREFIX, SPKI_PREFIX

# --------------------------------------------------------------------------- encodings


def jcs(value: Any) -> bytes:
    """RFC 8785 JCS for the values cartridges hold (strings, integers, lists, objects).

    Keys sorted, no whitespace, non-ASCII kept as is: what JavaScript's JSON.stringify gives for
    them. Keys are sorted by UTF-16 code units (JCS's rule); floats are not supported.
    """
    return _jcs_text(value).encode("utf-8")


def _jcs_text(value: Any) -> str:
    if isinstance(value, dict):
        items = sorted(value.items(), key=lambda kv: kv[0].encode("utf-16-be"))
        return "{" + ",".join(_jcs_text(k) + ":" + _jcs_text(v) for k, v in items) + "}"
    if isinstance(value, list | tuple):
        return "[" + ",".join(_jcs_text(v) for v in value) + "]"
    if isinstance(value, float):
        raise TypeError("floats are not needed by ACX manifests and are not supported here")
    return json.dumps(value, ensure_ascii=False)


def sha256_hex(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def oid_of(data: bytes) -> str:
    """``'sha256:' + hex`` of ``data``."""
    return "sha256:" + sha256_hex(data)


def pae(payload_type: str, body: bytes) -> bytes:
    """DSSE pre-authentication encoding: ``DSSEv1 SP LEN(type) SP type SP LEN(body) SP body``."""
    t = payload_type.encode("utf-8")
    return b"DSSEv1 %d %s %d %s" % (len(t), t, len(body), body)


def b64decode_any(text: str) -> bytes:
    """Decode standard or URL-safe base64, padded or not."""
    text = text.strip().replace("-", "+").replace("_", "/")
    return base64.b64decode(text + "=" * (-len(text) % 4), validate=True)


# --------------------------------------------------------------------------- keys


def _pem(label: str, der: bytes) -> str:
    b64 = base64.b64encode(der).decode("ascii")
    lines = [b64[i : i + 64] for i in range(0, len(b64), 64)]
    return f"-----BEGIN {label}-----\n" + "\n".join(lines) + f"\n-----END {label}-----\n"


def public_pem(raw32: bytes) -> str:
    """SPKI PEM (``-----BEGIN PUBLIC KEY-----``) of a raw Ed25519 public key."""
    return _pem("PUBLIC KEY", SPKI_PREFIX + raw32)


def private_pem(seed32: bytes) -> str:
    """PKCS#8 PEM (``-----BEGIN PRIVATE KEY-----``) of an Ed25519 seed."""
    return _pem("PRIVATE KEY", PKCS8_PREFIX + seed32)


def raw_public_from_pem(pem: str) -> bytes:
    """The 32-byte raw key inside an Ed25519 SPKI PEM; ``ValueError`` if it is not one."""
    lines = [ln.strip() for ln in pem.strip().splitlines()]
    if (
        not lines
        or lines[0] != "-----BEGIN PUBLIC KEY-----"
        or lines[-1] != "-----END PUBLIC KEY-----"
    ):
        raise ValueError("not an SPKI PEM public key")
    der = base64.b64decode("".join(lines[1:-1]), validate=True)
    if len(der) != 44 or not der.startswith(SPKI_PREFIX):
        raise ValueError("not an Ed25519 SubjectPublicKeyInfo")
    return der[12:]


def keyid_of(raw32: bytes) -> str:
    """``'ed25519:' + hex(sha256(DER SPKI))``."""
    return "ed25519:" + sha256_hex(SPKI_PREFIX + raw32)


def keyid_from_pem(pem: str) -> str:
    return keyid_of(raw_public_from_pem(pem))


@dataclass(frozen=True)
class Signer:
    """An Ed25519 key pair with the ACX encodings of its public half."""

    signing_key: nacl.signing.SigningKey

    @property
    def seed(self) -> bytes:
        return bytes(self.signing_key)

    @property
    def raw_public(self) -> bytes:
        return bytes(self.signing_key.verify_key)

    @property
    def keyid(self) -> str:
        return keyid_of(self.raw_public)

    @property
    def public_pem(self) -> str:
        return public_pem(self.raw_public)

    @property
    def private_pem(self) -> str:
        return private_pem(self.seed)

    def sign(self, message: bytes) -> bytes:
        return self.signing_key.sign(message).signature


def new_signer(seed: bytes | None = None) -> Signer:
    """A signer from a 32-byte seed (deterministic), or a fresh random one."""
    key = nacl.signing.SigningKey(seed) if seed is not None else nacl.signing.SigningKey.generate()
    return Signer(key)
