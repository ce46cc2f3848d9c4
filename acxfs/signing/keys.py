"""Ed25519 keys in the encodings the standards use, parsed without a general ASN.1 library.

An Ed25519 SubjectPublicKeyInfo is always the same 12-byte DER prefix and the 32-byte key, and
a PKCS#8 private key the same 16-byte prefix and the 32-byte seed: anything else is refused.
`keyid` is 'ed25519:' + hex(sha256(SPKI DER)); it names a key, it never makes one trusted.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
from dataclasses import dataclass

import nacl.exceptions
import nacl.signing

from acxfs.errors import KeyFormatError, TrustConfigError
from acxfs.safe.inputs import open_input

SPKI_PREFIX = bytes.fromhex("302a300506032b6570032100")
PKCS8_PREFIX = bytes.fromhex("302e020100300506032b657004220420")
_PUBLIC_LABEL = "PUBLIC KEY"
_PRIVATE_LABEL = "PRIVATE KEY"


@dataclass(frozen=True, slots=True)
class PublicKey:
    """A raw 32-byte Ed25519 public key with its standard encodings."""

    raw: bytes

    @property
    def spki_der(self) -> bytes:
        return SPKI_PREFIX + self.raw

    @property
    def keyid(self) -> str:
        return "ed25519:" + hashlib.sha256(self.spki_der).hexdigest()

    @property
    def pem(self) -> str:
        return _pem_wrap(_PUBLIC_LABEL, self.spki_der)

    def verifies(self, signature: bytes, message: bytes) -> bool:
        """True when `signature` is a valid Ed25519 signature of `message` by this key."""
        if len(signature) != 64:
            return False
        try:
            nacl.signing.VerifyKey(self.raw).verify(message, signature)
        except (nacl.exceptions.BadSignatureError, nacl.exceptions.ValueError, ValueError):
            return False
        return True


def public_key_from_spki_der(der: bytes) -> PublicKey:
    if len(der) != len(SPKI_PREFIX) + 32 or not der.startswith(SPKI_PREFIX):
        raise KeyFormatError("not an Ed25519 SubjectPublicKeyInfo")
    return PublicKey(der[len(SPKI_PREFIX) :])


def public_key_from_pem(text: str) -> PublicKey:
    return public_key_from_spki_der(_pem_unwrap(_PUBLIC_LABEL, text))


def public_key_from_text(text: str) -> PublicKey:
    """An SPKI PEM, or the SPKI DER in base64 (the azphalt form)."""
    if "-----BEGIN" in text:
        return public_key_from_pem(text)
    return public_key_from_spki_der(b64decode_any(text.strip()))


@dataclass(frozen=True, slots=True)
class PrivateKey:
    """An Ed25519 signing key (32-byte seed)."""

    seed: bytes

    @property
    def public(self) -> PublicKey:
        return PublicKey(bytes(nacl.signing.SigningKey(self.seed).verify_key))

    @property
    def pem(self) -> str:
        return _pem_wrap(_PRIVATE_LABEL, PKCS8_PREFIX + self.seed)

    def sign(self, message: bytes) -> bytes:
        return bytes(nacl.signing.SigningKey(self.seed).sign(message).signature)

    @classmethod
    def generate(cls) -> PrivateKey:
        return cls(bytes(nacl.signing.SigningKey.generate()))


def private_key_from_pem(text: str) -> PrivateKey:
    der = _pem_unwrap(_PRIVATE_LABEL, text)
    if len(der) != len(PKCS8_PREFIX) + 32 or not der.startswith(PKCS8_PREFIX):
        raise KeyFormatError("not an Ed25519 PKCS#8 private key")
    return PrivateKey(der[len(PKCS8_PREFIX) :])


def load_public_key_file(path: str) -> PublicKey:
    """Read a trust key file: an SPKI PEM, or SPKI DER in base64."""
    try:
        with open_input(path) as handle:
            text = handle.read(64 * 1024).decode("utf-8")
    except OSError as exc:
        raise TrustConfigError(f"cannot read key file {path}: {exc.strerror}") from exc
    except UnicodeDecodeError as exc:
        raise TrustConfigError(f"key file {path} is not text") from exc
    if _PRIVATE_LABEL in text and _PUBLIC_LABEL not in text.replace(_PRIVATE_LABEL, ""):
        raise TrustConfigError(f"key file {path} holds a private key; give its public key")
    try:
        return public_key_from_text(text)
    except KeyFormatError as exc:
        raise TrustConfigError(f"key file {path}: {exc}") from exc


def b64decode_any(text: str) -> bytes:
    """Decode standard or URL-safe base64, padded or not; raise KeyFormatError otherwise."""
    cleaned = "".join(text.split())
    if "-" in cleaned or "_" in cleaned:
        cleaned = cleaned.replace("-", "+").replace("_", "/")
    cleaned = cleaned.rstrip("=")
    cleaned += "=" * (-len(cleaned) % 4)
    try:
        return base64.b64decode(cleaned, validate=True)
    except (binascii.Error, ValueError) as exc:
        raise KeyFormatError("invalid base64") from exc


def _pem_wrap(label: str, der: bytes) -> str:
    body = base64.b64encode(der).decode("ascii")
    lines = [body[i : i + 64] for i in range(0, len(body), 64)]
    return f"-----BEGIN {label}-----\n" + "\n".join(lines) + f"\n-----END {label}-----\n"


def _pem_unwrap(label: str, text: str) -> bytes:
    begin, end = f"-----BEGIN {label}-----", f"-----END {label}-----"
    start = text.find(begin)
    stop = text.find(end, start + len(begin))
    if start < 0 or stop < 0:
        raise KeyFormatError(f"no '{begin}' block")
    body = text[start + len(begin) : stop]
    try:
        return base64.b64decode("".join(body.split()), validate=True)
    except (binascii.Error, ValueError) as exc:
        raise KeyFormatError("invalid PEM body") from exc
