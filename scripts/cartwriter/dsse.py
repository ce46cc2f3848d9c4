"""Signing a cartridge (section 5): DSSE envelopes over the in-toto statement of its current
ROM manifest, opening one with a public key, and writing the signature row.
"""

from __future__ import annotations

import base64
import json
import sqlite3
from typing import Any

import nacl.exceptions
import nacl.signing

from scripts.cartwriter.encoding import Signer, b64decode_any, jcs, pae, raw_public_from_pem
from scripts.cartwriter.manifest import checksum_hash, manifest_hash, rom_rows
from scripts.cartwriter.spec import PAYLOAD_TYPE, PREDICATE_TYPE, SPEC_VERSION, STATEMENT_TYPE


def sign_envelope(payload: bytes, signer: Signer, keyid: str | None = None) -> str:
    """DSSE envelope JSON over ``payload`` (Ed25519 over the PAE); ``keyid`` overrides the
    envelope's keyid hint (default: the signer's own keyid)."""
    sig = signer.sign(pae(PAYLOAD_TYPE, payload))
    envelope = {
        "payloadType": PAYLOAD_TYPE,
        "payload": base64.b64encode(payload).decode("ascii"),
        "signatures": [
            {"keyid": keyid or signer.keyid, "sig": base64.b64encode(sig).decode("ascii")}
        ],
    }
    return json.dumps(envelope, separators=(",", ":"))


def open_envelope(envelope_json: str, pem: str) -> bytes:
    """Verify the first signature of a DSSE envelope with an SPKI PEM; return the payload bytes.

    Raises ``ValueError`` on a wrong payloadType or a bad signature.
    """
    envelope = json.loads(envelope_json)
    if envelope.get("payloadType") != PAYLOAD_TYPE:
        raise ValueError("unexpected payloadType")
    payload = b64decode_any(envelope["payload"])
    sig = b64decode_any(envelope["signatures"][0]["sig"])
    key = nacl.signing.VerifyKey(raw_public_from_pem(pem))
    try:
        key.verify(pae(PAYLOAD_TYPE, payload), sig)
    except nacl.exceptions.BadSignatureError as e:
        raise ValueError("DSSE signature does not verify") from e
    return payload


def statement_for(
    conn: sqlite3.Connection, *, signed_at: str, provenance: str = "acxfs-tests"
) -> dict[str, Any]:
    """The in-toto statement over the cartridge's current ROM objects rows."""
    rows = rom_rows(conn)
    mhash = manifest_hash(rows)
    meta = dict(conn.execute("SELECT key, value FROM cartridge").fetchall())
    engine = meta.get("acx.embedding_engine")
    return {
        "_type": STATEMENT_TYPE,
        "subject": [{"name": meta.get("acx.cartridge_id", ""), "digest": {"sha256": mhash[7:]}}],
        "predicateType": PREDICATE_TYPE,
        "predicate": {
            "acxSchemaVersion": SPEC_VERSION,
            "publisherId": meta.get("acx.publisher_id"),
            "romDigest": mhash,
            "manifestHash": mhash,
            "checksumHash": checksum_hash(rows),
            "fileCount": len(rows),
            "embeddingEngine": None if engine is None else json.loads(engine),
            "signedAt": signed_at,
            "provenanceInstanceId": provenance,
        },
    }


def write_signature(
    conn: sqlite3.Connection,
    signer: Signer | None,
    *,
    signed_at: str,
    embed_public_key: bool,
    envelope_keyid: str | None,
) -> str:
    """Record the manifest hash and replace the signature row; return the manifest hash."""
    mhash = manifest_hash(rom_rows(conn))
    conn.execute(
        "INSERT OR REPLACE INTO cartridge (key, value) VALUES ('acx.rom_manifest_hash', ?)",
        (mhash,),
    )
    conn.execute("DELETE FROM signatures")
    if signer is None:
        return mhash
    payload = jcs(statement_for(conn, signed_at=signed_at))
    keyid = envelope_keyid or signer.keyid
    conn.execute(
        "INSERT INTO signatures (sig_id, target, manifest_hash, envelope, keyid, public_key_pem,"
        " alg, created_at) VALUES (?, 'rom-manifest', ?, ?, ?, ?, 'ed25519', ?)",
        (
            "sig-rom-" + mhash[7:19],
            mhash,
            sign_envelope(payload, signer, keyid),
            keyid,
            signer.public_pem if embed_public_key else None,
            signed_at,
        ),
    )
    return mhash
