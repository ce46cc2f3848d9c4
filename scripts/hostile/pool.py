"""Worker processes for the long fuzzing run: each checks one mutant at a time, under a memory
limit, and a worker that hangs or dies is killed by its pid and replaced.

Mutant `index` of run `seed` is the same mutant in every run (`run_one`), so a violation is
replayed with `python -m scripts.fuzz --seed SEED --only INDEX`.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import multiprocessing
import multiprocessing.connection
import os
import random
import resource
import shutil
import signal
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from scripts.hostile.bases import Base, chooser_for
from scripts.hostile.invariant import Result, check_mutant
from scripts.hostile.mutators import choose_mutators, make_mutant

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
