"""Measuring the columns: one rep (up, RSS, cold read, add one more, down), every column at one
N with the reps interleaved (then, at the largest N, the agents' start-up: `startup`), and the
whole run over every N.

Invariant: whatever was measured before a failure stays in the results; a failed column is
stopped and marked, and the others go on.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable
from pathlib import Path

from scripts.bench.results import Cell
from scripts.bench.system import try_drop_caches
from scripts.bench_library.bundles import build_bundles
from scripts.bench_library.columns import COLUMN_TYPES, Column
from scripts.bench_library.config import MEASURES, BenchError, Bundle, Config, Results
from scripts.bench_library.startup import bench_startup
from scripts.bench_library.system import daemons, isolated_env, rss_mib, timed


def read_every_skill_md(column: Column) -> float:
    """Seconds to read every SKILL.md through the agent directory; checks the bytes after."""
    paths = [column.skill_md(b) for b in column.bundles]
    start = time.perf_counter()
    got = [path.read_bytes() for path in paths]
    took = time.perf_counter() - start
    for bundle, data in zip(column.bundles, got, strict=True):
        if data != bundle.skill_md:
            raise BenchError(f"{bundle.skill}/SKILL.md read back different bytes")
    return took


def one_rep(column: Column, n: int, extra: Bundle, results: Results, notes: list[str]) -> None:
    """Up, RSS, drop caches, cold read, RSS, add one more, down (each where the column has
    it)."""
    def put(measure: str, value: float) -> None:
        results.setdefault((n, measure, column.name), Cell()).values.append(value)

    if column.has_daemon:
        put("up", timed(column.up))
        pids = daemons(column.root)
        if not pids:
            raise BenchError("no daemon found (no process with /dev/fuse open and this HOME)")
        put("daemons", len(pids))
        put("rss_up", rss_mib(pids))
    # The mount is fresh, so the kernel's FUSE caches hold nothing but the looked-up skill
    # directories; drop_caches evicts those too (dentries and inodes), and the page cache.
    dropped, why = try_drop_caches()
    if not dropped and why not in notes:
        notes.append(why)
    put("read", read_every_skill_md(column))
    if column.has_daemon:
        put("rss_read", rss_mib(daemons(column.root)))
    if column.measures_add:
        put("add", timed(lambda: column.add(extra)))
        column.undo_add(extra)
    if column.has_daemon:
        column.down()


def bench_size(n: int, columns: list[Column], bundles: list[Bundle], cfg: Config,
               agents: tuple[str, ...], results: Results, notes: list[str],
               log: Callable[[str], None]) -> dict[str, str]:
    """Every column at N bundles, then the start-up of `agents` with them; returns why each
    failed column failed."""
    reps = cfg.reps
    broken: dict[str, str] = {}

    def attempt(column: Column, what: str, step: Callable[[], None]) -> None:
        if column.name in broken:
            return
        log(f"N={n} {column.name}: {what}")
        try:
            step()
        except BenchError as exc:
            broken[column.name] = str(exc)
            log(f"N={n} {column.name}: failed: {exc}")
            column.stop()

    def install(column: Column) -> None:
        took = column.install(bundles[:n])
        cell = results.setdefault((n, "install", column.name), Cell(note="= up"))
        if took is not None:
            cell.values.append(took)

    try:
        for column in columns:
            attempt(column, "install", functools.partial(install, column))
        for rep in range(reps):  # interleaved, so drift hits every column alike
            for column in columns:
                attempt(column, f"rep {rep + 1}/{reps}",
                        functools.partial(one_rep, column, n, bundles[-1], results, notes))
        if agents:
            alive = [c for c in columns if c.name not in broken]
            for name, why in bench_startup(n, alive, bundles[:n], agents, reps, not cfg.quick,
                                           cfg.timeout, results, notes, log).items():
                broken[f"{name} start-up"] = why
    finally:
        for column in columns:
            column.stop()
    return broken


def bench(cfg: Config, base: Path, log: Callable[[str], None], results: Results,
          notes: list[str], failures: list[str]) -> None:
    """Fill `results` (what was measured before a failure or Ctrl-C stays there); page-cache
    notes go to `notes`, one line per failed column to `failures`."""
    trust = base / "trust"
    log(f"packing {max(cfg.sizes) + 1} single-skill bundles ...")
    bundles = build_bundles(base / "build", isolated_env(base / "build", trust),
                            max(cfg.sizes) + 1, cfg.timeout)
    for n in cfg.sizes:
        columns = [kind(base / f"n{n}-{kind.slug}", trust, cfg.timeout)
                   for kind in COLUMN_TYPES if kind.slug in cfg.columns]
        agents = cfg.agents if n == max(cfg.sizes) else ()
        for name, reason in bench_size(n, columns, bundles, cfg, agents, results, notes,
                                       log).items():
            failures.append(f"N={n} {name}: {reason}")
            if name.endswith(" start-up"):
                continue  # its start-up cells were marked by bench_startup
            for key, _label, _unit in MEASURES:
                cell = results.setdefault((n, key, name), Cell())
                cell.note = cell.note if cell.values else "failed"
