"""The ACX 0.1 cartridge schema, once: what `pack` writes and what the reader demands.

Invariant: `DDL` is the one definition of the tables; `TABLE_COLUMNS` (the tables acxfs
reads, with exactly their columns) is derived from it, so the writer and the reader cannot
disagree on a column.
"""

from __future__ import annotations

import sqlite3

APPLICATION_ID = 1094932529  # "ACX1"
USER_VERSION = 0x01000100
SQLITE_MAGIC = b"SQLite format 3\x00"

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
  target TEXT NOT NULL DEFAULT 'rom-manifest', manifest_hash TEXT NOT NULL, envelope TEXT NOT NULL,
  keyid TEXT NOT NULL, public_key_pem TEXT, alg TEXT NOT NULL DEFAULT 'ed25519',
  created_at TEXT NOT NULL) WITHOUT ROWID;
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

READ_TABLES = ("cartridge", "sqlar", "objects", "signatures", "acx_skill", "memory",
               "capabilities")
"""The tables acxfs reads, in the order their presence is checked."""


def create_schema(conn: sqlite3.Connection) -> None:
    """Create every table of `DDL` inside the caller's transaction."""
    for statement in DDL.split(";"):
        if statement.strip():
            conn.execute(statement)


def _columns() -> dict[str, tuple[str, ...]]:
    conn = sqlite3.connect(":memory:")
    try:
        create_schema(conn)
        return {table: tuple(row[1] for row in conn.execute(f'PRAGMA table_info("{table}")'))
                for table in READ_TABLES}
    finally:
        conn.close()


TABLE_COLUMNS: dict[str, tuple[str, ...]] = _columns()
"""Each table acxfs reads with exactly the columns it must have (from `DDL`)."""
