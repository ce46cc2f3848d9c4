"""An independent, test-only writer of azphalt packages (.azp), honest and hostile.

Built with ``zipfile`` and PyNaCl only, never with acxfs code: a second implementation of the
format, used to check acxfs. It writes what it is told, so tests can sign hostile packages
(duplicate entries, unlisted payloads, odd compression, wrong sizes) whose only fault is the one
under test. Packages are signed by ``TEST_KEY`` unless told otherwise; ``key_file`` writes the
matching ``--trust-key`` file, so the untouched demo package is ``verified / trusted``.
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import json
import struct
import zipfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import nacl.signing

from tests.support.demo import SKILL_MD

SPKI_PREFIX = bytes.fromhex("302a300506032b6570032100")  # RFC 8410 Ed25519 SubjectPublicKeyInfo

TEST_KEY = nacl.signing.SigningKey(bytes(range(32)))
OTHER_KEY = nacl.signing.SigningKey(bytes(range(100, 132)))
SKILL = "skills/demo-skill/SKILL.md"
GUIDE = "skills/demo-skill/references/guide.md"
DEMO_PAYLOAD: dict[str, bytes] = {
    SKILL: SKILL_MD,
    GUIDE: b"# Guide\n\nStep one: read. Step two: run.\n",
    "LICENSE": b"MIT License\n",
}


def spki(key: nacl.signing.SigningKey) -> bytes:
    return SPKI_PREFIX + bytes(key.verify_key)


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def keyid_of_spki(der: bytes) -> str:
    return "ed25519:" + hashlib.sha256(der).hexdigest()


def keyid(key: nacl.signing.SigningKey) -> str:
    return keyid_of_spki(spki(key))


def digest(data: bytes) -> str:
    return "sha256-" + hashlib.sha256(data).hexdigest()


def skill_manifest(payload: dict[str, bytes], **fields: Any) -> dict[str, Any]:
    """A kind "skill" manifest for `payload`; `fields` override (None deletes a field)."""
    doc: dict[str, Any] = {
        "azphalt": "0.1",
        "id": "com.example.demo-skills",
        "name": "Demo Skills",
        "version": "1.0.0",
        "kind": "skill",
        "license": "MIT",
        "compat": ">=0.1",
        "skill": {"skills": [{"id": "demo-skill", "name": "Demo", "description": "A demo."}]},
        "files": {path: digest(data) for path, data in payload.items()},
    }
    for key, value in fields.items():
        if value is None:
            doc.pop(key, None)
        else:
            doc[key] = value
    return doc


def signature_doc(
    key: nacl.signing.SigningKey, signed: bytes, chain: tuple[nacl.signing.SigningKey, ...] = ()
) -> dict[str, Any]:
    """signature.json: `key` signs `signed`; each chain key signs the SPKI DER of the one below."""
    doc: dict[str, Any] = {
        "alg": "ed25519", "publicKey": b64(spki(key)), "keyId": "test-author",
        "signature": b64(key.sign(signed).signature),
    }
    parent, below = doc, key
    for counter in chain:
        link = {"publicKey": b64(spki(counter)),
                "signature": b64(counter.sign(spki(below)).signature)}
        parent["countersignature"] = link
        parent, below = link, counter
    return doc


def write_azp(
    path: Path,
    entries: list[tuple[str, bytes]] | dict[str, bytes],
    manifest: dict[str, Any] | bytes,
    *,
    key: nacl.signing.SigningKey | None = TEST_KEY,
    signed_manifest: bytes | None = None,
    signature: dict[str, Any] | bytes | None = None,
    compression: int = zipfile.ZIP_DEFLATED,
) -> Path:
    """An .azp: `entries` in order, then manifest.json and (if `key`) signature.json."""
    data = manifest if isinstance(manifest, bytes) else (
        json.dumps(manifest, indent=2).encode() + b"\n")
    items = list(entries.items()) if isinstance(entries, dict) else list(entries)
    items.append(("manifest.json", data))
    if signature is None and key is not None:
        signature = signature_doc(key, data if signed_manifest is None else signed_manifest)
    if signature is not None:
        sig_bytes = signature if isinstance(signature, bytes) else json.dumps(signature).encode()
        items.append(("signature.json", sig_bytes))
    with warnings_ignored(), zipfile.ZipFile(path, "w", compression) as archive:
        for name, body in items:
            info = zipfile.ZipInfo(name, date_time=(2000, 1, 1, 0, 0, 0))
            info.compress_type = compression
            archive.writestr(info, body)
    return path


@contextlib.contextmanager
def warnings_ignored() -> Iterator[None]:
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # zipfile warns about the duplicate names we want
        yield


def demo_azp(path: Path, payload: dict[str, bytes] | None = None, **fields: Any) -> Path:
    payload = DEMO_PAYLOAD if payload is None else payload
    return write_azp(path, payload, skill_manifest(payload, **fields))


def key_file(tmp_path: Path, key: nacl.signing.SigningKey, pem: bool = False) -> Path:
    """A --trust-key file: SPKI DER in base64 (the azphalt form) or an SPKI PEM."""
    path = tmp_path / f"{keyid(key)[8:20]}.{'pem' if pem else 'b64'}"
    text = b64(spki(key))
    if pem:
        text = f"-----BEGIN PUBLIC KEY-----\n{text}\n-----END PUBLIC KEY-----\n"
    path.write_text(text + "\n", encoding="ascii")
    return path


def patch_sizes(path: Path, name: str, size: int) -> None:
    """Rewrite the uncompressed size of `name` in its local header and central record."""
    raw = bytearray(path.read_bytes())
    encoded = name.encode()
    local = raw.find(b"PK\x03\x04")
    while local >= 0:
        name_len = struct.unpack_from("<H", raw, local + 26)[0]
        if raw[local + 30 : local + 30 + name_len] == encoded:
            struct.pack_into("<L", raw, local + 22, size)
            break
        local = raw.find(b"PK\x03\x04", local + 4)
    central = raw.find(b"PK\x01\x02")
    while central >= 0:
        name_len = struct.unpack_from("<H", raw, central + 28)[0]
        if raw[central + 46 : central + 46 + name_len] == encoded:
            struct.pack_into("<L", raw, central + 24, size)
        central = raw.find(b"PK\x01\x02", central + 4)
    path.write_bytes(bytes(raw))
