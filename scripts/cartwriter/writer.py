"""An independent writer of ACX 0.1 cartridges, for the tests and the fuzzer.

Written from the ACX 0.1 format contract with the standard library and PyNaCl only. It
never imports ``acxfs``: it is a second implementation of the format, used to check acxfs.

It writes what the spec describes, and nothing stops it from writing what the spec forbids: it
does not validate names, modes or frontmatter, so tests can sign hostile cartridges (an unsafe
name, a symlink row, a file/dir conflict) whose only fault is the one under test.

Conventions
-----------
* ``files`` maps FULL sqlar names to bytes (``{"rom/skills/demo/SKILL.md": b"..."}``); names are
  stored as given. Every name except ``save/...`` ones gets one ``objects`` row (kind ``sqlar``,
  canon ``raw``, zone ``rom``, ``oid = 'sha256:' + hex(sha256(uncompressed bytes))``), hostile
  names included: a hostile row is signed like any other, so its name is its only fault.
  ``save/...`` rows (the unsigned SAVE zone) get a ``sqlar`` row only.
* Two ROM objects with the same oid cannot both be signed (``objects.oid`` is the primary key):
  the writer refuses that with ``ValueError``, as acxfs's writer must.
* Timestamps are fixed (``SIGNED_AT``), so every build is reproducible for a given key.

Main entry points: :func:`new_signer`, :func:`build_cartridge`, :func:`resign`,
:func:`registry_entry`, :func:`registry_json`. The reading helpers (:func:`rom_rows`,
:func:`manifest_hash`, :func:`live_oid`, :func:`open_envelope`) exist so the writer can be checked
against the real cartridges in ``tests/fixtures/real/``.
"""

from __future__ import annotations

import base64
import hashlib
import json
import math
import sqlite3
import stat
import zlib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import nacl.exceptions
import nacl.signing
import yaml

APPLICATION_ID = 1094932529  # 0x41435831 "ACX1"
USER_VERSION = 16777472  # 0x01000100: spec 1.0, vec0 format 1, flags 0
SPEC_VERSION = "0.1"
PAYLOAD_TYPE = "application/vnd.in-toto+json"
STATEMENT_TYPE = "https://in-toto.io/Statement/v1"
PREDICATE_TYPE = "https://acx.dev/attestation/cartridge/v1"
REGISTRY_SCHEMA = "acx.trust-registry/1"
SKILL_SCHEMA = "acx.skill/1"
GITHUB_OIDC_ISSUER = "https://token.actions.githubusercontent.com"

SPKI_PREFIX = bytes.fromhex("302a300506032b6570032100")  # + 32-byte raw public key
PKCS8_PREFIX = bytes.fromhex("302e020100300506032b657004220420")  # + 32-byte seed

SIGNED_AT = "2026-01-02T03:04:05.000Z"
NOT_BEFORE = "2026-01-01T00:00:00Z"
NOT_AFTER = "2099-01-01T00:00:00Z"
VERIFIED_AT = "2026-01-01T00:00:00Z"
EMBEDDING_ENGINE = '{"id":"local-hash-128","dim":128}'

FILE_MODE = 0o644  # 420, what the reference stores (no type bits)
SQLAR_FILE_MODE = stat.S_IFREG | 0o644  # 0o100644, what stock `sqlite3 -Ac` stores
SQLAR_DIR_MODE = stat.S_IFDIR | 0o755  # 0o40755, stock dir rows: sz 0, data NULL

# Verbatim DDL of spec section 2, plus the tables every writer also creates.
DDL = """
CREATE TABLE cartridge (key TEXT PRIMARY KEY NOT NULL, value TEXT NOT NULL) WITHOUT ROWID;
CREATE TABLE sqlar (name TEXT PRIMARY KEY, mode INT, mtime INT, sz INT, data BLOB);
CREATE TABLE memory (id TEXT PRIMARY KEY NOT NULL, zone TEXT NOT NULL,
  artifact_fingerprint TEXT NOT NULL, codebase_fingerprint TEXT, payload TEXT NOT NULL,
  oid TEXT NOT NULL, created_at TEXT NOT NULL) WITHOUT ROWID;
CREATE INDEX memory_zone_fp ON memory(zone, artifact_fingerprint);
CREATE TABLE vectors (memory_id TEXT PRIMARY KEY, zone TEXT NOT NULL, embedding BLOB NOT NULL,
  artifact_fingerprint TEXT);
CREATE TABLE objects (oid TEXT PRIMARY KEY NOT NULL,
  kind TEXT NOT NULL CHECK (kind IN ('sqlar','memory','cartridge','skill','attestation')),
  source_ref TEXT NOT NULL, canon TEXT NOT NULL,
  zone TEXT NOT NULL CHECK (zone IN ('rom','save')), sz INTEGER NOT NULL) WITHOUT ROWID;
CREATE TABLE signatures (sig_id TEXT PRIMARY KEY NOT NULL,
  target TEXT NOT NULL DEFAULT 'rom-manifest', manifest_hash TEXT NOT NULL,
  envelope TEXT NOT NULL, keyid TEXT NOT NULL, public_key_pem TEXT,
  alg TEXT NOT NULL DEFAULT 'ed25519', created_at TEXT NOT NULL) WITHOUT ROWID;
CREATE TABLE attestations (att_id TEXT PRIMARY KEY NOT NULL, type TEXT NOT NULL,
  subject_oid TEXT, media_type TEXT NOT NULL, document TEXT NOT NULL, status_url TEXT,
  created_at TEXT NOT NULL) WITHOUT ROWID;
CREATE TABLE acx_skill (sqlar_path TEXT PRIMARY KEY, name TEXT NOT NULL,
  description TEXT NOT NULL, license TEXT, compatibility TEXT, skill_version TEXT,
  body_tokens INTEGER, content_sha256 TEXT NOT NULL, resources TEXT NOT NULL, ext TEXT,
  schema_version TEXT NOT NULL);
CREATE TABLE capabilities (id TEXT PRIMARY KEY NOT NULL, json TEXT NOT NULL,
  content_hash TEXT NOT NULL);
"""


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


# --------------------------------------------------------------------------- sqlar content


def compress(data: bytes, deflate: str = "raw") -> bytes:
    """sqlar ``data`` for ``data``: ``raw`` DEFLATE (RFC 1951, the reference), ``zlib`` (RFC 1950,
    stock sqlite3 -Ac) or ``none``. Like both tools, stores the bytes as is when compressing
    does not make them shorter (``length(data) == sz`` means stored raw)."""
    if deflate == "none":
        return data
    if deflate == "raw":
        c = zlib.compressobj(9, zlib.DEFLATED, -15)
        packed = c.compress(data) + c.flush()
    elif deflate == "zlib":
        packed = zlib.compress(data, 9)
    else:
        raise ValueError(f"deflate must be 'raw', 'zlib' or 'none', not {deflate!r}")
    return packed if len(packed) < len(data) else data


def inflate(blob: bytes | None, sz: int) -> bytes:
    """Uncompressed bytes of a sqlar row (test-side reader: raw if ``len == sz``, else zlib or
    raw DEFLATE, whichever works)."""
    if blob is None:
        return b""
    if len(blob) == sz:
        return blob
    for wbits in (15, -15):
        try:
            return zlib.decompress(blob, wbits)
        except zlib.error:
            continue
    raise ValueError("blob inflates under neither zlib nor raw DEFLATE")


# --------------------------------------------------------------------------- skills (section 8)


def parse_frontmatter(text: str) -> dict[str, Any]:
    """The YAML between a first line ``---`` and the next line ``---`` (safe loader)."""
    lines = text.splitlines()
    if not lines or lines[0].strip() != "---":
        raise ValueError("SKILL.md does not start with a '---' line")
    for i, line in enumerate(lines[1:], start=1):
        if line.strip() == "---":
            data = yaml.safe_load("\n".join(lines[1:i]))
            if not isinstance(data, dict):
                raise ValueError("frontmatter is not a mapping")
            return data
    raise ValueError("frontmatter has no closing '---' line")


def skill_row(skill_md_path: str, files: Mapping[str, bytes]) -> dict[str, Any]:
    """The ``acx_skill`` row of section 8 for ``rom/skills/<dir>/SKILL.md`` in ``files``."""
    body = files[skill_md_path]
    fm = parse_frontmatter(body.decode("utf-8"))
    skill_dir = skill_md_path.rsplit("/", 1)[0] + "/"
    resources = [
        {"path": name, "bytes": len(data), "sha256": sha256_hex(data)}
        for name, data in sorted(files.items())
        if any(
            name.startswith(skill_dir + sub + "/") for sub in ("references", "scripts", "assets")
        )
    ]
    metadata = fm.get("metadata")
    version = metadata.get("version") if isinstance(metadata, dict) else None
    return {
        "sqlar_path": skill_md_path,
        "name": str(fm.get("name", "")),
        "description": str(fm.get("description", "")),
        "license": fm.get("license"),
        "compatibility": fm.get("compatibility"),
        "skill_version": None if version is None else str(version),
        "body_tokens": math.ceil(len(body) / 4),
        "content_sha256": sha256_hex(body),
        "resources": json.dumps(resources, separators=(",", ":"), ensure_ascii=False),
        "ext": None,
        "schema_version": SKILL_SCHEMA,
    }


def is_skill_md(name: str) -> bool:
    parts = name.split("/")
    return len(parts) == 4 and parts[:2] == ["rom", "skills"] and parts[3] == "SKILL.md"


# --------------------------------------------------------------------------- manifest (section 4)


@dataclass(frozen=True)
class RomObject:
    kind: str
    source_ref: str
    oid: str
    canon: str
    sz: int


def rom_rows(conn: sqlite3.Connection) -> list[RomObject]:
    """The stored ROM ``objects`` rows (their recorded oids; nothing is re-hashed)."""
    rows = conn.execute(
        "SELECT kind, source_ref, oid, canon, sz FROM objects WHERE zone = 'rom'"
    ).fetchall()
    return [RomObject(*row) for row in rows]


def manifest_bytes(rows: Iterable[RomObject]) -> bytes:
    """JCS of ``[{sourceRef, oid, canon, sz}]`` sorted by (kind, source_ref) in UTF-16 order."""
    ordered = sorted(
        rows, key=lambda r: (r.kind.encode("utf-16-be"), r.source_ref.encode("utf-16-be"))
    )
    return jcs(
        [{"sourceRef": r.source_ref, "oid": r.oid, "canon": r.canon, "sz": r.sz} for r in ordered]
    )


def manifest_hash(rows: Iterable[RomObject]) -> str:
    return oid_of(manifest_bytes(rows))


def checksum_hash(rows: Iterable[RomObject]) -> str:
    """``predicate.checksumHash``: sha256 of the sorted ``"<oid>  <source_ref>"`` lines."""
    lines = sorted((f"{r.oid}  {r.source_ref}" for r in rows), key=lambda s: s.encode("utf-16-be"))
    return oid_of("\n".join(lines).encode("utf-8"))


def cartridge_object_bytes(key: str, value: str) -> bytes:
    """Live bytes of a ``cartridge:<key>`` object: JCS of ``{"key", "value"}`` (value unparsed)."""
    return jcs({"key": key, "value": value})


def live_oid(conn: sqlite3.Connection, obj: RomObject) -> str | None:
    """The live digest of a ROM object (inflating sqlar rows), or None when its source is gone."""
    ref = obj.source_ref
    if ref.startswith("memory:"):
        row = conn.execute("SELECT payload FROM memory WHERE id = ?", (ref[7:],)).fetchone()
        return None if row is None else oid_of(row[0].encode("utf-8"))
    if ref.startswith("capability:"):
        row = conn.execute("SELECT json FROM capabilities WHERE id = ?", (ref[11:],)).fetchone()
        return None if row is None else oid_of(row[0].encode("utf-8"))
    if ref.startswith("cartridge:"):
        key = ref[10:]
        row = conn.execute("SELECT value FROM cartridge WHERE key = ?", (key,)).fetchone()
        return None if row is None else oid_of(cartridge_object_bytes(key, row[0]))
    row = conn.execute("SELECT sz, data FROM sqlar WHERE name = ?", (ref,)).fetchone()
    return None if row is None else oid_of(inflate(row[1], row[0]))


# --------------------------------------------------------------------------- DSSE (section 5)


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


def _sign_into(
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


# --------------------------------------------------------------------------- the writer


def _insert_object(
    conn: sqlite3.Connection, oid: str, kind: str, ref: str, canon: str, sz: int
) -> None:
    clash = conn.execute("SELECT source_ref FROM objects WHERE oid = ?", (oid,)).fetchone()
    if clash is not None:
        raise ValueError(
            f"{ref} and {clash[0]} have identical content ({oid}); ACX 0.1 cannot sign both"
        )
    conn.execute(
        "INSERT INTO objects (oid, kind, source_ref, canon, zone, sz)"
        " VALUES (?, ?, ?, ?, 'rom', ?)",
        (oid, kind, ref, canon, sz),
    )


def _dir_names(names: Iterable[str]) -> list[str]:
    dirs: set[str] = set()
    for name in names:
        parts = name.split("/")
        for i in range(1, len(parts)):
            dirs.add("/".join(parts[:i]))
    return sorted(dirs)


def build_cartridge(
    path: str | Path,
    files: Mapping[str, bytes],
    *,
    signer: Signer | None,
    publisher: str = "io.github.example",
    cartridge_id: str | None = None,
    deflate: str = "raw",
    sqlar_dirs: bool = False,
    modes: Mapping[str, int] | None = None,
    capabilities: Mapping[str, str] | None = None,
    memories: Mapping[str, str] | None = None,
    skill_index: bool = True,
    embed_public_key: bool = True,
    envelope_keyid: str | None = None,
    signed_at: str = SIGNED_AT,
    extra_meta: Mapping[str, str] | None = None,
    unbound_meta: Mapping[str, str] | None = None,
) -> Path:
    """Write a cartridge to ``path`` (overwritten) and return ``path``.

    files: full sqlar names to uncompressed bytes (see the module docstring).
    signer: the signing key, or None for an unsigned (legacy) cartridge.
    deflate: ``raw`` (reference), ``zlib`` (stock sqlite3) or ``none``.
    sqlar_dirs: also write stock ``sqlite3 -Ac`` directory rows (mode 0o40755, sz 0, data NULL)
        and give files the S_IFREG type bits (0o100644); by default files are mode 420, no dirs.
    modes: per-name mode overriding the above (e.g. 0o120777 for a symlink row).
    capabilities / memories: id -> JSON text, stored verbatim and bound by an object.
    skill_index: derive ``acx_skill`` rows for ``rom/skills/<dir>/SKILL.md`` (section 8).
    embed_public_key: write ``signatures.public_key_pem``.
    envelope_keyid: keyid hint written in the envelope and ``signatures.keyid`` (default: the
        signer's); lets a test name one key while signing with another.
    extra_meta: more cartridge keys, each bound by a ``cartridge:<key>`` object.
    unbound_meta: cartridge keys with no object (unsigned, like ``acx.vec0_format``).
    """
    path = Path(path)
    path.unlink(missing_ok=True)
    modes = dict(modes or {})
    meta = {
        "acx.spec_version": SPEC_VERSION,
        "acx.cartridge_id": cartridge_id
        or f"{publisher}/demo@00000000-0000-4000-8000-000000000001",
        "acx.publisher_id": publisher,
        "acx.artifact_id": "demo",
        "acx.artifact_version": "1.0.0",
        "acx.description": "A demo cartridge written by the acxfs test suite.",
        "acx.created_at": signed_at,
        "acx.embedding_engine": EMBEDDING_ENGINE,
        **(extra_meta or {}),
    }
    conn = sqlite3.connect(path)
    try:
        conn.executescript(DDL)
        conn.execute(f"PRAGMA application_id = {APPLICATION_ID}")
        conn.execute(f"PRAGMA user_version = {USER_VERSION}")
        if sqlar_dirs:
            for d in _dir_names(files):
                conn.execute(
                    "INSERT INTO sqlar (name, mode, mtime, sz, data) VALUES (?, ?, 0, 0, NULL)",
                    (d, modes.get(d, SQLAR_DIR_MODE)),
                )
        default_mode = SQLAR_FILE_MODE if sqlar_dirs else FILE_MODE
        for name, data in files.items():
            conn.execute(
                "INSERT INTO sqlar (name, mode, mtime, sz, data) VALUES (?, ?, 0, ?, ?)",
                (name, modes.get(name, default_mode), len(data), compress(data, deflate)),
            )
            if not name.startswith("save/"):
                _insert_object(conn, oid_of(data), "sqlar", name, "raw", len(data))
        for key, value in meta.items():
            conn.execute("INSERT INTO cartridge (key, value) VALUES (?, ?)", (key, value))
            _insert_object(
                conn,
                oid_of(cartridge_object_bytes(key, value)),
                "cartridge",
                f"cartridge:{key}",
                "jcs-rfc8785",
                len(value.encode("utf-8")),
            )
        for key, value in (unbound_meta or {}).items():
            conn.execute("INSERT INTO cartridge (key, value) VALUES (?, ?)", (key, value))
        for cap_id, text in (capabilities or {}).items():
            oid = oid_of(text.encode("utf-8"))
            conn.execute(
                "INSERT INTO capabilities (id, json, content_hash) VALUES (?, ?, ?)",
                (cap_id, text, oid),
            )
            _insert_object(
                conn,
                oid,
                "cartridge",
                f"capability:{cap_id}",
                "jcs-rfc8785",
                len(text.encode("utf-8")),
            )
        for mem_id, payload in (memories or {}).items():
            oid = oid_of(payload.encode("utf-8"))
            conn.execute(
                "INSERT INTO memory (id, zone, artifact_fingerprint, codebase_fingerprint, payload,"
                " oid, created_at) VALUES (?, 'rom', ?, NULL, ?, ?, ?)",
                (mem_id, sha256_hex(payload.encode("utf-8"))[:10], payload, oid, signed_at),
            )
            _insert_object(
                conn, oid, "memory", f"memory:{mem_id}", "jcs-rfc8785", len(payload.encode("utf-8"))
            )
        if skill_index:
            for name in sorted(files):
                if is_skill_md(name):
                    row = skill_row(name, files)
                    cols = ", ".join(row)
                    marks = ", ".join("?" for _ in row)
                    conn.execute(
                        f"INSERT INTO acx_skill ({cols}) VALUES ({marks})", tuple(row.values())
                    )
        _sign_into(
            conn,
            signer,
            signed_at=signed_at,
            embed_public_key=embed_public_key,
            envelope_keyid=envelope_keyid,
        )
        conn.commit()
    finally:
        conn.close()
    return path


def resign(
    path: str | Path,
    signer: Signer | None,
    *,
    signed_at: str = SIGNED_AT,
    embed_public_key: bool = True,
    envelope_keyid: str | None = None,
) -> str:
    """Recompute manifest, statement and signature from the CURRENT ``objects`` rows of
    ``path`` (for tests that edit rows, then sign the result); return the manifest hash.

    Only the stored oids are used: a test that edits content must update ``objects`` itself.
    """
    conn = sqlite3.connect(path)
    try:
        mhash = _sign_into(
            conn,
            signer,
            signed_at=signed_at,
            embed_public_key=embed_public_key,
            envelope_keyid=envelope_keyid,
        )
        conn.commit()
    finally:
        conn.close()
    return mhash


# --------------------------------------------------------------------------- trust registries


def namespace_proof(
    publisher: str, *, repo: str = "skills", verified_at: str = VERIFIED_AT
) -> dict[str, str]:
    """The namespace proof section 6 requires for ``publisher``: github-oidc for
    ``io.github.<owner>[...]``, else dns-txt on ``_acx-challenge.<reversed publisher root>``
    (``com.example.tools`` -> ``_acx-challenge.tools.example.com``)."""
    root = publisher.split("/")[0]
    parts = root.split(".")
    if len(parts) >= 3 and parts[:2] == ["io", "github"]:
        return {
            "method": "github-oidc",
            "oidcSubject": f"repo:{parts[2]}/{repo}",
            "oidcIssuer": GITHUB_OIDC_ISSUER,
            "verifiedAt": verified_at,
        }
    return {
        "method": "dns-txt",
        "txtRecord": "_acx-challenge." + ".".join(reversed(parts)),
        "verifiedAt": verified_at,
    }


def registry_entry(
    key: Signer | str,
    publisher: str = "io.github.example",
    *,
    status: str = "active",
    not_before: str = NOT_BEFORE,
    not_after: str = NOT_AFTER,
    revocation_reason: str | None = None,
    revoked_at: str | None = None,
    proof: dict[str, str] | None = None,
    keyid: str | None = None,
) -> dict[str, Any]:
    """One ``keys[]`` entry of an ``acx.trust-registry/1`` file.

    key: a Signer or an SPKI PEM. proof: defaults to :func:`namespace_proof` of ``publisher``.
    keyid: overrides the keyid computed from the key (to write an inconsistent entry).
    """
    pem = key.public_pem if isinstance(key, Signer) else key
    entry: dict[str, Any] = {
        "keyid": keyid or keyid_from_pem(pem),
        "publisherId": publisher,
        "algorithm": "ed25519",
        "publicKeyPem": pem,
        "status": status,
        "notBefore": not_before,
        "notAfter": not_after,
        "namespaceProof": proof if proof is not None else namespace_proof(publisher),
    }
    if revoked_at is not None:
        entry["revokedAt"] = revoked_at
    if revocation_reason is not None:
        entry["revocationReason"] = revocation_reason
    return entry


def registry_json(
    entries: Iterable[dict[str, Any]],
    *,
    registry_id: str = "acxfs-tests",
    updated_at: str | None = None,
) -> str:
    """The text of an ``acx.trust-registry/1`` file holding ``entries``."""
    doc: dict[str, Any] = {"schemaVersion": REGISTRY_SCHEMA, "registryId": registry_id}
    if updated_at is not None:
        doc["updatedAt"] = updated_at
    doc["keys"] = list(entries)
    return json.dumps(doc, indent=2) + "\n"
