"""A mutant and the mutator registry, and the random edits every mutator draws on: a row picked
from a table, a value, text or bytes flipped, a JSON document edited anywhere.

Every decision comes from a `Chooser`, so the same chooser gives the same edit. Registering a
mutator (`@mutator`) names it; the order mutators are drawn in is fixed by `mutators`.
"""

from __future__ import annotations

import dataclasses
import json
import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Any

from scripts.hostile.bases import Base, Chooser


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
REGISTERED: dict[str, Mutator] = {}  # name -> mutator, in no useful order


def mutator(func: Mutator) -> Mutator:
    REGISTERED[func.__name__.removeprefix("m_")] = func
    return func


TABLES = ("sqlar", "objects", "signatures", "cartridge", "memory", "capabilities", "acx_skill",
          "attestations", "vectors")


def columns(conn: sqlite3.Connection, table: str) -> list[str]:
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
    first = columns(conn, table)[0]
    return first, [r[0] for r in conn.execute(f'SELECT "{first}" FROM "{table}"')]


def pick_row(conn: sqlite3.Connection, ch: Chooser, table: str) -> tuple[str, Any] | None:
    col, ids = _row_ids(conn, table)
    if not ids:
        return None
    return col, ch.choice(ids)


def flip_text(value: str, ch: Chooser) -> str:
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


def random_value(ch: Chooser, current: Any) -> Any:
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
        pool += [lambda: flip_text(current, ch)] * 4 + [lambda: current.encode()]
    if isinstance(current, int) and not isinstance(current, bool):
        pool += [lambda: current + ch.choice([-1, 1, 4096, -4096]), lambda: str(current)] * 2
    if isinstance(current, bytes):
        pool += [lambda: flip_bytes(current, ch)] * 4 + [lambda: current.decode("latin-1")]
    return ch.choice(pool)()


def flip_bytes(data: bytes, ch: Chooser) -> bytes:
    if not data:
        return b"\x00"
    out = bytearray(data)
    for _ in range(ch.integer(1, 4)):
        i = ch.integer(0, len(out) - 1)
        out[i] ^= 1 << ch.integer(0, 7)
    return bytes(out)
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
        new: Any = flip_text(current, ch)
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
