"""The rows of a cartridge a registry index describes it with and never verifies: its
`capabilities`, its `vc-2.0` attestations and its memory payloads, and how much its SAVE zone
holds.

Invariant: read through a hardened read-only connection of a file the caller has checked
(its private copy); a table the cartridge lacks reads as no rows.  Nothing here is trusted:
the index is discovery, and its readers verify the cartridge itself.
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass

from acxfs.formats.acx.connection import connect_readonly, release


@dataclass(frozen=True)
class DiscoveryRows:
    capabilities: tuple[object, ...]  # `json` of each row, by id
    attestations: tuple[tuple[object, object], ...]  # (att_id, document), by created_at, att_id
    memory: tuple[object, ...]  # each row's payload
    save_rows: int  # memory rows, sqlar files and objects in the SAVE zone


def _rows(conn: sqlite3.Connection, sql: str) -> list[tuple[object, ...]]:
    try:
        return list(conn.execute(sql))
    except sqlite3.OperationalError:  # the table is absent: none
        return []


def _count(conn: sqlite3.Connection, sql: str) -> int:
    rows = _rows(conn, sql)
    return int(rows[0][0]) if rows and isinstance(rows[0][0], int) else 0


def discovery_rows(path: str) -> DiscoveryRows:
    conn = connect_readonly(path)
    try:
        return DiscoveryRows(
            tuple(r[0] for r in _rows(conn, "SELECT json FROM capabilities ORDER BY id")),
            tuple((r[0], r[1]) for r in _rows(
                conn, "SELECT att_id, document FROM attestations WHERE type='vc-2.0' "
                "ORDER BY created_at, att_id")),
            tuple(r[0] for r in _rows(conn, "SELECT payload FROM memory")),
            _count(conn, "SELECT COUNT(*) FROM memory WHERE zone='save'")
            + _count(conn, "SELECT COUNT(*) FROM sqlar WHERE name GLOB 'save/*'")
            + _count(conn, "SELECT COUNT(*) FROM objects WHERE zone='save'"))
    finally:
        release(conn)
