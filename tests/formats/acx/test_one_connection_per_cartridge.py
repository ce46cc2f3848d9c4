"""A cartridge is checked and served through one SQLite connection, and that connection serves
within every bound a serving connection has.

The check's connection on the pinned file is the one the source then serves from (no second
connection, no second parse of the schema: most of what opening a small bundle cost besides
its check). It was opened for a check, so these tests prove it is bounded once it serves as
any serving connection is: a value of at most `SERVE_LENGTH` bytes, a statement of at most
`SERVE_SQL_LENGTH`, a step of at most `STEP_SECONDS` (an endless query on it is interrupted).
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from acxfs.content.cache import VerifiedCache
from acxfs.formats import open_source
from acxfs.formats.acx import connection
from acxfs.formats.acx.source import CartridgeSource
from acxfs.trust.store import load_trust
from scripts import cartwriter as cw
from tests.support.demo import PUBLISHER

FILES = {"rom/skills/one-connection/SKILL.md":
         b"---\nname: one-connection\ndescription: Served as checked.\n---\n# One\n"}
ENDLESS = "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) SELECT count(*) FROM c"


@pytest.fixture
def served(tmp_path: Path, signer: cw.Signer, trusted_registry: Path,
           monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[CartridgeSource, list[Any]]]:
    """A source opened on a signed cartridge, and every SQLite connection opened meanwhile."""
    cart = cw.build_cartridge(tmp_path / "one.acx", FILES, signer=signer, publisher=PUBLISHER)
    trust = load_trust([str(trusted_registry)])
    opened: list[Any] = []
    real: Callable[..., sqlite3.Connection] = sqlite3.connect

    def counting(*args: Any, **kwargs: Any) -> sqlite3.Connection:
        conn = real(*args, **kwargs)
        opened.append(conn)
        return conn

    monkeypatch.setattr(sqlite3, "connect", counting)
    source, _ = open_source(str(cart), trust, VerifiedCache())
    monkeypatch.setattr(sqlite3, "connect", real)
    assert isinstance(source, CartridgeSource)
    try:
        yield source, opened
    finally:
        source.close()


def test_a_bundle_is_checked_and_served_through_one_connection(
        served: tuple[CartridgeSource, list[Any]]) -> None:
    source, opened = served
    assert len(opened) == 1
    (path, data), = FILES.items()
    entry = source.tree.entries[path]
    assert source.read(entry, 0, entry.size + 1) == data
    with source._pool.connection() as conn:  # the anchor: the check's own connection
        assert conn is opened[0]


def test_the_checks_connection_serves_within_the_serving_bounds(
        served: tuple[CartridgeSource, list[Any]], monkeypatch: pytest.MonkeyPatch) -> None:
    source, opened = served
    monkeypatch.setattr(connection, "STEP_SECONDS", 0.3)
    with source._pool.connection() as conn:
        assert conn is opened[0]
        assert conn.getlimit(sqlite3.SQLITE_LIMIT_LENGTH) == connection.SERVE_LENGTH
        assert conn.getlimit(sqlite3.SQLITE_LIMIT_SQL_LENGTH) == connection.SERVE_SQL_LENGTH
        started = time.monotonic()
        with pytest.raises(sqlite3.OperationalError, match="interrupt"):
            conn.execute(ENDLESS).fetchone()
        assert time.monotonic() - started < 5.0
