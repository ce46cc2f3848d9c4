"""The ACX cartridge source: a VerifiedCartridge's tree plus its BLOBs, read by row id.

Built only from a `VerifiedCartridge`; the stored bytes it yields go to `acxfs.content`,
which releases them only after their sha256 matched the entry's digest.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator

from acxfs.cartridge import VerifiedCartridge
from acxfs.errors import TamperError
from acxfs.limits import DEFAULT_LIMITS, Limits
from acxfs.sources.acx_file import ConnectionPool, blob_chunks, small_blob
from acxfs.sources.base import Entry, Tree, build_tree

SMALL_ROW_BYTES = 64 * 1024


class CartridgeSource:
    """Serves one verified cartridge; `with_save` adds the unsigned SAVE zone beside rom/."""

    format = "acx"

    def __init__(
        self, cartridge: VerifiedCartridge, *, with_save: bool = False,
        limits: Limits = DEFAULT_LIMITS,
    ) -> None:
        # Only what serving needs is kept: the check's rows (every sqlar and objects row) are
        # freed as soon as the report is, before a mount forks its daemon.
        self.verdict = cartridge.verdict
        self.label = cartridge.rows.path
        self._limits = limits
        self._pool = ConnectionPool(cartridge.rows.path)
        self.tree: Tree = cartridge.tree
        if with_save:
            files = [e for e in cartridge.tree.entries.values() if not e.is_dir]
            files += [e for e in cartridge.save_tree.entries.values() if not e.is_dir]
            dirs = [p for p, e in cartridge.tree.entries.items() if e.is_dir and p]
            dirs += [p for p, e in cartridge.save_tree.entries.items() if e.is_dir and p]
            self.tree = build_tree(files, [*dirs, "save"], cartridge.tree.dir_mtime)

    @property
    def skills_root(self) -> str:
        return "rom/skills"

    @property
    def default_root(self) -> str:
        return ""

    def raw_chunks(self, entry: Entry) -> Iterator[bytes]:
        """The row's stored bytes; a row that no longer reads as checked is a TamperError."""
        try:
            if entry.stored_size <= SMALL_ROW_BYTES:  # one query beats a BLOB handle
                conn = self._pool.take()
                try:
                    data = small_blob(conn, entry.ref, entry.stored_size)
                finally:
                    self._pool.give(conn)
                yield data
            else:
                with self._pool.connection() as conn:
                    yield from blob_chunks(conn, entry.ref, entry.stored_size,
                                           self._limits.chunk_bytes)
        except (sqlite3.Error, UnicodeDecodeError, ValueError) as exc:
            raise TamperError(
                f"{entry.path} cannot be read as it was checked ({exc}); the file changed",
                entry.path,
            ) from exc

    def small_blobs(self, max_stored: int) -> Iterator[tuple[int, bytes]]:
        """(rowid, stored bytes) of every row stored in at most `max_stored` bytes, in one scan
        (for `verify --deep`, where a BLOB handle per small file costs more than the file)."""
        try:
            with self._pool.connection() as conn:
                cursor = conn.execute(
                    "SELECT rowid, data FROM sqlar WHERE length(data) <= ?", (max_stored,))
                for rowid, data in cursor:
                    yield rowid, data if isinstance(data, bytes) else b""
        except (sqlite3.Error, UnicodeDecodeError, ValueError) as exc:
            raise TamperError(f"the cartridge cannot be read as it was checked ({exc})") from exc

    def close(self) -> None:
        self._pool.close()
