"""The ACX cartridge source: a VerifiedCartridge's tree, served as verified bytes only.

Invariant: a `CartridgeSource` is built only from a `VerifiedCartridge` whose verdict met
the required trust, and its only byte API (`blob`, `read`) goes through the process's
`VerifiedCache`, which releases a file only once its sha256 matched the entry's digest.  The
stored BLOBs (`stored_chunks`, `small_rows`) are read only here and by the deep check.
`open_source` checks the file through one pinned descriptor and serves that same file (the
inode the check read) for as long as the source lives, whatever its path names later; its
connections are bounded in number, time and size (`acxfs.formats.acx.connection`).
"""

from __future__ import annotations

import contextlib
import sqlite3
from collections.abc import Iterator

from acxfs import verdict as v
from acxfs.container import Entry, build_tree
from acxfs.content.cache import VerifiedCache
from acxfs.errors import TamperError, UntrustedError
from acxfs.formats.acx.check import (
    SKILLS_ROOT,
    AcxReport,
    VerifiedCartridge,
    check_cartridge,
    report_of,
)
from acxfs.formats.acx.connection import ConnectionPool, PinnedFile, pinned
from acxfs.formats.base import StoredSource
from acxfs.limits import DEFAULT_LIMITS, Limits
from acxfs.trust.policy import TrustContext

SMALL_ROW_BYTES = 64 * 1024
ROW_SQL = "SELECT data FROM sqlar NOT INDEXED WHERE rowid = ?"
EDGE_ROWIDS = (-(2**63), 2**63 - 1)  # below and above every row: seeks that find none


class CartridgeSource(StoredSource):
    """Serves one verified cartridge; `with_save` adds the unsigned SAVE zone beside rom/."""

    skills_root = SKILLS_ROOT

    def __init__(
        self, cartridge: VerifiedCartridge, cache: VerifiedCache, pool: ConnectionPool, *,
        with_save: bool = False, limits: Limits = DEFAULT_LIMITS,
    ) -> None:
        # Only what serving needs is kept: the check's rows (every sqlar and objects row) are
        # freed as soon as the report is, before a mount forks its daemon.
        tree = cartridge.tree
        if with_save:
            files = [e for e in cartridge.tree.entries.values() if not e.is_dir]
            files += [e for e in cartridge.save_tree.entries.values() if not e.is_dir]
            dirs = [p for p, e in cartridge.tree.entries.items() if e.is_dir and p]
            dirs += [p for p, e in cartridge.save_tree.entries.items() if e.is_dir and p]
            tree = build_tree(files, [*dirs, "save"], cartridge.tree.dir_mtime)
        super().__init__(tree, cartridge.rows.path, cache, limits)
        self._pool = pool  # on the pinned file the check read (ConnectionPool.serving)

    def _stored_chunks(self, entry: Entry) -> Iterator[bytes]:
        return stored_chunks(self._pool, entry, self._step)

    def _release(self) -> None:
        self._pool.close()


def stored_chunks(pool: ConnectionPool, entry: Entry, step: int) -> Iterator[bytes]:
    """The row's stored bytes, for `acxfs.content.cache` only; a row that no longer reads as
    checked, or a file written in place since its check, is a TamperError."""
    if pool.changed_in_place():
        raise TamperError(f"{entry.path} cannot be read as it was checked: the file was "
                          "written since", entry.path)
    try:
        if entry.stored_size <= SMALL_ROW_BYTES:  # one query beats a BLOB handle
            conn = pool.take()
            try:
                data = _small_blob(conn, entry.ref, entry.stored_size)
            finally:
                pool.give(conn)
            yield data
        else:
            with pool.connection() as conn:
                yield from _blob_chunks(conn, entry.ref, entry.stored_size, step)
    except (sqlite3.Error, UnicodeDecodeError, ValueError) as exc:
        raise TamperError(
            f"{entry.path} cannot be read as it was checked ({exc}); the file changed",
            entry.path,
        ) from exc


def read_row_index(pool: ConnectionPool) -> None:
    """Read, on the serving connection, what every file's first read passes through: the schema,
    the row's statement, and the `sqlar` b-tree's pages from its root down to its first and last
    leaf (two seeks for rowids no row has, so no BLOB is read, let alone inflated).  They stay in
    that connection's page cache (an immutable file is never re-read for a change), so a first
    read needs only its own pages, whatever the page cache dropped meanwhile; a small bundle's
    rows all live in its one leaf.  A failure is left to the read that meets it."""
    with contextlib.suppress(sqlite3.Error), pool.connection() as conn:
        for rowid in EDGE_ROWIDS:
            conn.execute(ROW_SQL, (rowid,)).fetchone()


def small_rows(pool: ConnectionPool, max_stored: int) -> Iterator[tuple[int, bytes]]:
    """(rowid, stored bytes) of every row stored in at most `max_stored` bytes, in one scan
    (for the deep check, where a BLOB handle per small file costs more than the file); each
    step of the scan has its own `STEP_SECONDS`, whatever the caller does between rows."""
    try:
        with pool.connection() as conn:
            cursor = conn.execute(
                "SELECT rowid, data FROM sqlar NOT INDEXED WHERE length(data) <= ?", (max_stored,))
            for rowid, data in cursor:
                yield rowid, data if isinstance(data, bytes) else b""
                pool.renew(conn)  # the caller verified that row meanwhile: not SQLite's time
    except (sqlite3.Error, UnicodeDecodeError, ValueError) as exc:
        raise TamperError(f"the cartridge cannot be read as it was checked ({exc})") from exc


def _small_blob(conn: sqlite3.Connection, rowid: int, stored_len: int) -> bytes:
    """The whole stored BLOB of one small sqlar row, in one query."""
    row = conn.execute(ROW_SQL, (rowid,)).fetchone()
    data = None if row is None else row[0]
    if stored_len == 0 and data is None:
        return b""
    if not isinstance(data, bytes) or len(data) != stored_len:
        raise sqlite3.DatabaseError("BLOB changed since it was checked")
    return data


def _blob_chunks(
    conn: sqlite3.Connection, rowid: int, stored_len: int, step: int
) -> Iterator[bytes]:
    """The stored BLOB of one sqlar row, read incrementally."""
    if stored_len == 0:
        return
    with conn.blobopen("sqlar", "data", rowid, readonly=True) as blob:
        if len(blob) != stored_len:
            raise sqlite3.DatabaseError("BLOB changed size since it was checked")
        while True:
            chunk = blob.read(step)
            if not chunk:
                return
            yield chunk


def open_source(
    path: str, trust: TrustContext, cache: VerifiedCache, *, min_trust: v.MinTrust = "verified",
    with_save: bool = False, limits: Limits = DEFAULT_LIMITS,
) -> tuple[CartridgeSource, AcxReport]:
    """A source for the cartridge `path` if its verdict meets `min_trust`; UntrustedError
    otherwise.  The check reads the file through one descriptor, and the source serves the
    file that descriptor opened."""
    pin = PinnedFile(path, keep=True)  # the check's connection goes on serving
    try:
        with pinned(pin):
            report = check_cartridge(path, trust, limits)
        if report.verified is None or not report.verdict.allows(min_trust):
            raise UntrustedError(report.verdict)
        pool = ConnectionPool.serving(pin)
    finally:
        pin.close()
    read_row_index(pool)
    source = CartridgeSource(report.verified, cache, pool, with_save=with_save, limits=limits)
    return source, report_of(report)
