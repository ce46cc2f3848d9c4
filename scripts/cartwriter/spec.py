"""The ACX 0.1 constants the writer writes: header values, type URIs and schema names, key
prefixes, the fixed timestamps that make every build reproducible, sqlar modes, and the DDL.

Values only, from the format contract; nothing here is derived from acxfs.
"""

from __future__ import annotations

import stat

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
