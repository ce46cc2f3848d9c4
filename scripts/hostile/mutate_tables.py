"""Mutators of the tables around the content: `objects` rows, sizes and deflate bombs, ROM rows
renamed into `save/` and back, schema tricks, header fields, cartridge keys, and the fields the
signature does not cover.
"""

from __future__ import annotations

import contextlib
import sqlite3
import zlib
from typing import Any

from scripts import cartwriter as cw
from scripts.hostile.bases import Chooser
from scripts.hostile.mutant import Mutant, columns, flip_text, mutator


@mutator
def m_objects_edit(m: Mutant, ch: Chooser) -> str:
    with contextlib.closing(m.conn()) as conn:
        oids = [r[0] for r in conn.execute("SELECT oid FROM objects")]
        oid = ch.choice(oids)
        column = ch.choice(["oid", "kind", "source_ref", "canon", "zone", "sz"])
        (current,) = conn.execute(f"SELECT {column} FROM objects WHERE oid=?", (oid,)).fetchone()
        choices: dict[str, list[Any]] = {
            "oid": [oid.upper(), "sha256:" + "0" * 64, oid[:-1], ch.choice(oids)],
            "kind": ["memory", "cartridge", "skill", "attestation", "sqlar", "SQLAR"],
            "source_ref": [flip_text(current, ch), "rom/x", "save/" + current.split("/", 1)[-1],
                           current + "\u0000"],
            "canon": ["raw", "jcs-rfc8785", "", "RAW"],
            "zone": ["save", "rom", "ROM"],
            "sz": [current + 1, current - 1, 0, -1, 2**62],
        }
        value = ch.choice(choices[column])
        try:
            conn.execute(f"UPDATE objects SET {column}=? WHERE oid=?", (value, oid))
        except sqlite3.Error as exc:
            return f"objects_edit {column}: refused by sqlite ({exc})"
        return f"objects_edit {column} of {oid[:19]} := {value!r:.50}"


@mutator
def m_huge_size(m: Mutant, ch: Chooser) -> str:
    with contextlib.closing(m.conn()) as conn:
        rows = conn.execute("SELECT rowid, name, sz, length(data) FROM sqlar "
                            "WHERE name LIKE 'rom/%' AND sz > 0").fetchall()
        rowid, name, sz, stored = ch.choice(rows)
        how = ch.choice(["sz", "sz+object", "bomb", "bomb-zlib", "zeroblob", "sz-below-data"])
        if how in ("sz", "sz+object"):
            new = ch.choice([2**31, 2**40, 2**63 - 1, 4 * 1024**3, 4 * 1024**3 + 1, sz * 1000])
            conn.execute("UPDATE sqlar SET sz=? WHERE rowid=?", (new, rowid))
            if how == "sz+object":
                conn.execute("UPDATE objects SET sz=? WHERE source_ref=?", (new, name))
            return f"huge_size {how} {name} := {new}"
        if how.startswith("bomb"):
            # 64 MiB of zeros in ~64 KB: inflation must stop at sz, never fill memory or disk
            wbits = 15 if how == "bomb-zlib" else -15
            packer = zlib.compressobj(9, zlib.DEFLATED, wbits)
            chunk = bytes(1024 * 1024)
            bomb = b"".join(packer.compress(chunk) for _ in range(64)) + packer.flush()
            if len(bomb) >= sz:
                bomb = bomb[: max(0, sz - 1)]
            conn.execute("UPDATE sqlar SET data=? WHERE rowid=?", (bomb, rowid))
            return f"huge_size {how} in {name} ({len(bomb)} bytes for sz {sz})"
        if how == "zeroblob":
            n = ch.choice([sz, sz + 1, 9 * 1024 * 1024])
            conn.execute("UPDATE sqlar SET data=zeroblob(?), sz=? WHERE rowid=?", (n, n, rowid))
            return f"huge_size zeroblob {name} {n}"
        conn.execute("UPDATE sqlar SET sz=? WHERE rowid=?", (max(0, (stored or 0) - 1), rowid))
        return f"huge_size sz-below-data {name}"


@mutator
def m_zone_rename(m: Mutant, ch: Chooser) -> str:
    """ROM rows renamed into save/ and SAVE rows into rom/, with or without their objects."""
    with contextlib.closing(m.conn()) as conn:
        names = [r[0] for r in conn.execute("SELECT name FROM sqlar")]
        rom = [n for n in names if n.startswith("rom/") and "/" in n[4:]]
        save = [n for n in names if n.startswith("save/")]
        direction = ch.choice(["rom->save", "save->rom", "round-trip"]) if save else "rom->save"
        with_objects = ch.choice([True, False])
        if direction == "save->rom":
            old = ch.choice(save)
            new = "rom/" + old[5:]
        else:
            old = ch.choice(rom)
            new = "save/" + old[4:]
        try:
            conn.execute("UPDATE sqlar SET name=? WHERE name=?", (new, old))
            if with_objects:
                conn.execute("UPDATE objects SET source_ref=?, zone=? WHERE source_ref=?",
                             (new, new.split("/")[0], old))
            if direction == "round-trip":  # and back again: must still be exactly the original
                conn.execute("UPDATE sqlar SET name=? WHERE name=?", (old, new))
                if with_objects:
                    conn.execute("UPDATE objects SET source_ref=?, zone='rom' WHERE source_ref=?",
                                 (old, new))
        except sqlite3.Error as exc:
            return f"zone_rename refused by sqlite ({exc})"
        return f"zone_rename {direction} {old} objects={with_objects}"


@mutator
def m_schema(m: Mutant, ch: Chooser) -> str:
    """The SQLite schema is untrusted too: views, triggers, extra or hidden columns."""
    with contextlib.closing(m.conn()) as conn:
        table = ch.choice(["sqlar", "objects", "signatures", "cartridge", "acx_skill"])
        how = ch.choice(["view", "trigger", "extra-column", "generated-column", "drop-column",
                         "writable-schema", "index", "rename-column"])
        try:
            if how == "view":
                conn.executescript(f"ALTER TABLE {table} RENAME TO {table}_real;"
                                   f"CREATE VIEW {table} AS SELECT * FROM {table}_real;")
            elif how == "trigger":
                conn.execute(f"CREATE TRIGGER evil AFTER UPDATE ON {table} BEGIN "
                             f"DELETE FROM {table}; END")
            elif how == "extra-column":
                conn.execute(f"ALTER TABLE {table} ADD COLUMN extra TEXT DEFAULT 'x'")
            elif how == "generated-column":
                conn.execute(f"ALTER TABLE {table} ADD COLUMN gen TEXT "
                             f"GENERATED ALWAYS AS (hex(randomblob(16))) VIRTUAL")
            elif how == "drop-column":
                col = ch.choice(columns(conn, table)[1:])
                conn.execute(f"ALTER TABLE {table} DROP COLUMN {col}")
            elif how == "rename-column":
                col = ch.choice(columns(conn, table))
                conn.execute(f'ALTER TABLE {table} RENAME COLUMN "{col}" TO "{col}_"')
            elif how == "index":
                conn.execute(f"CREATE INDEX evil_idx ON {table}(abs(1) + length(hex(randomblob("
                             f"1000))))")
            else:
                conn.execute("PRAGMA writable_schema=ON")
                (sql,) = conn.execute("SELECT sql FROM sqlite_master WHERE name=?",
                                      (table,)).fetchone()
                conn.execute("UPDATE sqlite_master SET sql=? WHERE name=?",
                             (flip_text(sql, ch), table))
                conn.execute("PRAGMA writable_schema=OFF")
        except sqlite3.Error as exc:
            return f"schema {how} {table}: refused by sqlite ({exc})"
        return f"schema {how} {table}"


@mutator
def m_header(m: Mutant, ch: Chooser) -> str:
    with contextlib.closing(m.conn()) as conn:
        which = ch.choice(["application_id", "user_version"])
        value = ch.choice([0, -1, 0x41435832, 0x02000100, 0x01FF0000, 0x00000100, 2**31 - 1])
        conn.execute(f"PRAGMA {which}={value}")
        return f"header {which}={value}"


@mutator
def m_meta_edit(m: Mutant, ch: Chooser) -> str:
    """Edit cartridge keys: signed ones (must be refused) and unsigned ones (stay accepted)."""
    with contextlib.closing(m.conn()) as conn:
        keys = [r[0] for r in conn.execute("SELECT key FROM cartridge")]
        key = ch.choice(keys)
        value = ch.choice(["", "changed", "\x1b[31mred", '{"id":"x"}', "io.github.attacker"])
        conn.execute("UPDATE cartridge SET value=? WHERE key=?", (value, key))
        return f"meta_edit {key} := {value!r}"


@mutator
def m_unsigned_fields(m: Mutant, ch: Chooser) -> str:
    """Fields the signature does not cover: mtime, mode, the SAVE zone, attestations, vectors;
    and an equivalent re-encoding of a file (same bytes, other codec). Reads must not change."""
    with contextlib.closing(m.conn()) as conn:
        how = ch.choice(["mtime", "mode", "save-data", "attestation", "recompress"])
        rows = conn.execute("SELECT rowid, name, sz, data FROM sqlar WHERE data IS NOT NULL "
                            "AND sz > 0").fetchall()
        rowid, name, sz, data = ch.choice(rows)
        if how == "mtime":
            value = ch.choice([0, -1, 2**62, 2**63 - 1, -(2**63), 1700000000])
            conn.execute("UPDATE sqlar SET mtime=? WHERE rowid=?", (value, rowid))
        elif how == "mode":
            value = ch.choice([0o100777, 0o4755, 0o104755, 0o777, 0o100000, 0])
            conn.execute("UPDATE sqlar SET mode=? WHERE rowid=?", (value, rowid))
        elif how == "save-data":
            conn.execute("UPDATE sqlar SET data=?, sz=? WHERE name LIKE 'save/%'",
                         (b"overwritten", 11))
        elif how == "attestation":
            conn.execute("INSERT OR REPLACE INTO attestations VALUES ('a1', 'x', NULL, "
                         "'application/json', '{\"evil\":true}', NULL, '2026')")
        else:
            plain = cw.inflate(data, sz)
            codec = ch.choice(["raw", "zlib", "none"])
            conn.execute("UPDATE sqlar SET data=? WHERE rowid=?",
                         (cw.compress(plain, codec), rowid))
            return f"unsigned_fields recompress {name} as {codec}"
        return f"unsigned_fields {how} {name}"
