"""How a figure is taken for one peer: its cells filled with what a measurement returns (or
the reason it could not run), and the cold-then-warm pattern every read workload repeats.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

from scripts.bench.context import BenchError, Context
from scripts.bench.datasets import Dataset
from scripts.bench.peers import Mount, Peer
from scripts.bench.results import Cell, Row

Op = Callable[[Mount], float]


def record(ctx: Context, peer: Peer, rows: Sequence[Row],
           measure: Callable[[], Sequence[list[float]]]) -> None:
    """Fill `peer`'s cell in each row with the lists `measure` returns (or why it could not)."""
    if peer.absent:
        for row in rows:
            row.cells[peer.name] = Cell(note=f"absent: {peer.absent}")
        return
    ctx.log(f"  {peer.name}: {rows[0].label}")
    try:
        results = measure()
    except Exception as exc:  # any failure becomes the cell's note; the run goes on
        text = str(exc) if isinstance(exc, BenchError) else f"error: {type(exc).__name__}: {exc}"
        for row in rows:
            row.cells[peer.name] = Cell(note=text[:160])
        ctx.log(f"    {text}")
        return
    for row, values in zip(rows, results, strict=True):
        row.cells[peer.name] = Cell(values=values)


def not_applicable(rows: Sequence[Row], peer: Peer, why: str = "n/a") -> None:
    for row in rows:
        row.cells[peer.name] = Cell(note=f"absent: {peer.absent}" if peer.absent else why)


def warm_per_mount(ctx: Context) -> int:
    """Warm repeats on each fresh mount, so that all mounts together give `warm_reps`."""
    return max(1, math.ceil(ctx.cfg.warm_reps / ctx.cfg.cold_reps))


def cold_and_warm(ctx: Context, peer: Peer, ds: Dataset, op: Op,
                  after: Callable[[Mount], None] | None = None) -> tuple[list[float],
                                                                         list[float]]:
    """`cold_reps` fresh mounts (page cache dropped first), each followed by warm repeats;
    `after` sees each mount once its runs are done, before it is unmounted."""
    cold: list[float] = []
    warm: list[float] = []
    for _ in range(ctx.cfg.cold_reps):
        with peer.mounted(ds, cold=True) as mount:
            cold.append(op(mount))
            for _ in range(warm_per_mount(ctx)):
                warm.append(op(mount))
            if after is not None:
                after(mount)
    return cold, warm
