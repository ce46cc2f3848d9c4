"""The in-process floor for cold reads: inflating and hashing a file's sqlar BLOB straight from
SQLite in 256 KiB steps, as acxfs reads it, with no FUSE and no verification bookkeeping.
"""

from __future__ import annotations

import hashlib
import sqlite3
import time
import zlib
from collections.abc import Sequence
from pathlib import Path

from scripts.bench.context import Context
from scripts.bench.datasets import Dataset
from scripts.bench.system import try_drop_caches

STEP = 256 * 1024  # BLOB read and inflate step, as acxfs.limits.chunk_bytes


def inflate_floor(ctx: Context, ds: Dataset, rel: str) -> list[list[float]]:
    """Inflate + sha256 the file's BLOB straight from SQLite, 256 KiB steps (as acxfs reads)."""
    cold: list[float] = []
    warm: list[float] = []
    for _ in range(max(ctx.cfg.cold_reps, 3)):
        if ctx.drop_caches:
            try_drop_caches()
        cold.append(ctx.cfg.big_mib / inflate_and_hash(ds.acx, [rel]))
        warm.append(ctx.cfg.big_mib / inflate_and_hash(ds.acx, [rel]))
    return [cold, warm]


def inflate_and_hash(acx: Path, names: Sequence[str]) -> float:
    """Seconds to inflate and hash the named sqlar rows (zlib or stored) in this process."""
    conn = sqlite3.connect(f"file:{acx}?mode=ro&immutable=1", uri=True)
    try:
        start = time.perf_counter()
        for name in names:
            rowid, size = conn.execute("SELECT rowid, sz FROM sqlar WHERE name=?",
                                       (name,)).fetchone()
            hasher = hashlib.sha256()
            with conn.blobopen("sqlar", "data", rowid, readonly=True) as blob:
                stored = len(blob)
                inflater = zlib.decompressobj() if stored < size else None
                while chunk := blob.read(STEP):
                    if inflater is None:
                        hasher.update(chunk)
                        continue
                    while chunk:  # bounded output, as acxfs.content.rule inflates
                        hasher.update(inflater.decompress(chunk, STEP))
                        chunk = inflater.unconsumed_tail
                if inflater is not None:
                    hasher.update(inflater.flush())
            hasher.digest()
        return time.perf_counter() - start
    finally:
        conn.close()
