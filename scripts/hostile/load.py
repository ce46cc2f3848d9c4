"""Load on a live acxfs mount: reader threads in several processes, every byte compared.

`build_cartridge` writes a signed cartridge of deterministic files (mixed sizes, compressed
rows, optionally some above the 8 MiB spill threshold); `run_readers` runs processes x threads
readers that stat (size checked) or read at random offsets and lengths, each comparing the bytes
with the source it regenerates from the seed; `stress` mounts with `acxfs mount`, runs them, and
measures the daemon's RSS (VmRSS from /proc/<pid>/status, the pid from `acxfs status`) against
the content cache bound plus a margin. Nothing here decides pass or fail; the caller does.
"""

from __future__ import annotations

import contextlib
import errno
import json
import multiprocessing
import os
import random
import subprocess
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

from scripts import cartwriter as cw
from scripts import mounting
from scripts.hostile.bases import PUBLISHER
from scripts.hostile.bases import SIGNER as SIGNER  # the cartridge signer, for callers
from scripts.liveness import status_kib

SPILL_BYTES = 8 * 1024 * 1024
RSS_MARGIN = 96 * 1024 * 1024  # interpreter, SQLite page caches, FUSE buffers, fragmentation


def file_name(index: int) -> str:
    return f"rom/data/d{index // 100:03d}/f{index:05d}.bin"


def file_size(seed: int, index: int, big: int) -> int:
    if index < big:
        return SPILL_BYTES + 1 + random.Random(seed * 7 + index).randrange(4 * 1024 * 1024)
    rng = random.Random(seed * 1_000_003 + index)
    roll = rng.random()
    if roll < 0.70:
        return rng.randrange(64, 16 * 1024)  # >= the unique header: no two files alike
    if roll < 0.95:
        return rng.randrange(16 * 1024, 128 * 1024)
    return rng.randrange(128 * 1024, 512 * 1024)


def content(seed: int, index: int, big: int) -> bytes:
    """File `index`'s bytes: unique, half compressible (hex text), half random."""
    size = file_size(seed, index, big)
    rng = random.Random(seed * 1_000_003 + index + 17)
    head = f"file {index} of stress seed {seed}\n".encode()
    if index % 2:
        block = rng.randbytes(512).hex().encode()
        body = (block * (size // len(block) + 1))[:size]
    else:
        body = rng.randbytes(size)
    return (head + body)[:size] if size >= len(head) else head[:size]


def build_cartridge(path: Path, seed: int, files: int, big: int) -> None:
    """Write the signed cartridge (atomically: a failed build leaves nothing at `path`)."""
    partial = path.with_name(path.name + ".partial")
    cw.build_cartridge(partial, {file_name(i): content(seed, i, big) for i in range(files)},
                       signer=SIGNER, publisher=PUBLISHER, deflate="raw")
    os.replace(partial, path)


class Source:
    """The expected bytes, regenerated on demand (a small per-thread cache)."""

    def __init__(self, seed: int, big: int) -> None:
        self.seed, self.big = seed, big
        self.cache: dict[int, bytes] = {}

    def get(self, index: int) -> bytes:
        data = self.cache.get(index)
        if data is None:
            if len(self.cache) > 64:
                self.cache.pop(next(iter(self.cache)))
            data = self.cache[index] = content(self.seed, index, self.big)
        return data


def reader_thread(mountpoint: str, seed: int, files: int, big: int, deadline: float,
                  thread_seed: int, stats: Counter[str], mismatches: list[str],
                  lock: threading.Lock) -> None:
    rng = random.Random(thread_seed)
    source = Source(seed, big)
    local: Counter[str] = Counter()
    bad: list[str] = []
    while time.monotonic() < deadline:
        index = rng.randrange(files)
        path = os.path.join(mountpoint, file_name(index))
        expected_size = file_size(seed, index, big)
        try:
            if rng.random() < 0.25:
                st = os.stat(path)
                local["stat"] += 1
                if st.st_size != expected_size:
                    bad.append(f"stat {path}: size {st.st_size}, expected {expected_size}")
                continue
            expected = source.get(index)
            offset = rng.randrange(len(expected) + 1)
            length = rng.choice([1, 4096, 65536, 131072, 262144, len(expected)])
            fd = os.open(path, os.O_RDONLY)
            try:
                got = os.pread(fd, length, offset)
            finally:
                os.close(fd)
            local["read"] += 1
            local["bytes"] += len(got)
            want = expected[offset : offset + length]
            if len(got) < len(want) and got == want[: len(got)]:
                # Right bytes, fewer of them: the kernel ends a read its daemon stopped in
                # the middle of with what it had (an error for a mount that keeps serving).
                local["error:SHORT"] += 1
            elif got != want:
                local["mismatched_bytes"] += sum(
                    1 for a, b in zip(got, want, strict=False) if a != b) + abs(
                    len(got) - len(want))
                bad.append(f"read {path} at {offset}+{length}: {len(got)} bytes differ")
        except OSError as exc:
            local["error:" + (errno.errorcode.get(exc.errno or 0, str(exc.errno)))] += 1
    with lock:
        stats.update(local)
        mismatches.extend(bad[:10])


def reader_process(mountpoint: str, seed: int, files: int, big: int, seconds: float,
                   threads: int, proc_seed: int, out: Any) -> None:
    stats: Counter[str] = Counter()
    mismatches: list[str] = []
    lock = threading.Lock()
    deadline = time.monotonic() + seconds
    workers = [threading.Thread(target=reader_thread, args=(
        mountpoint, seed, files, big, deadline, proc_seed * 1000 + t, stats, mismatches, lock))
        for t in range(threads)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    out.put({"stats": dict(stats), "mismatches": mismatches})


def run_readers(mountpoint: str, seed: int, files: int, big: int, seconds: float,
                processes: int, threads: int,
                on_tick: Any = None) -> tuple[Counter[str], list[str]]:
    """`processes` x `threads` readers for `seconds`; (summed counters, first mismatches)."""
    ctx = multiprocessing.get_context("fork")
    queue = ctx.Queue()
    procs = [ctx.Process(target=reader_process, args=(
        mountpoint, seed, files, big, seconds, threads, p + 1, queue)) for p in range(processes)]
    for proc in procs:
        proc.start()
    results: list[dict[str, Any]] = []
    deadline = time.monotonic() + seconds + 120
    while len(results) < len(procs) and time.monotonic() < deadline:
        if on_tick is not None:
            on_tick()
        with contextlib.suppress(Exception):
            results.append(queue.get(timeout=1.0))
    for proc in procs:
        proc.join(10)
        if proc.is_alive():  # a reader stuck in the kernel: report it, end it by its pid
            results.append({"stats": {"error:reader-hung": 1}, "mismatches": []})
            proc.kill()
            proc.join(5)
    total: Counter[str] = Counter()
    mismatches: list[str] = []
    for item in results:
        total.update(item["stats"])
        mismatches += item["mismatches"]
    return total, mismatches


def vm_rss(pid: int, field: str = "VmRSS") -> int:
    """A /proc/<pid>/status memory field in bytes (0 when the process is gone)."""
    return (status_kib(pid, field) or 0) * 1024


def stress(cartridge: Path, key: Path, mountpoint: Path, seed: int, files: int, big: int,
           seconds: float, processes: int, threads: int,
           cache_bytes: int = 256 * 1024 * 1024) -> dict[str, Any]:
    """Mount, load, measure, unmount; the summary dict."""
    summary: dict[str, Any] = {}
    peak = 0
    with mounting.mounted(cartridge, mountpoint, "--trust-key", key) as live:
        pid = mounting.daemon_pid(mountpoint) or live.pid  # as `acxfs status` has it
        rss_start = vm_rss(pid)

        started = time.monotonic()
        series: list[tuple[float, float]] = []

        def tick() -> None:
            nonlocal peak
            rss = vm_rss(pid)
            peak = max(peak, rss)
            at = time.monotonic() - started
            if not series or at - series[-1][0] >= 5.0:
                series.append((round(at, 1), round(rss / 2**20, 1)))

        totals, mismatches = run_readers(str(mountpoint), seed, files, big, seconds, processes,
                                         threads, tick)
        elapsed = time.monotonic() - started
        rss_end = vm_rss(pid)
        hwm = vm_rss(pid, "VmHWM")
        alive = mounting.pid_alive(pid)
        xattr = subprocess.run(["getfattr", "--absolute-names", "-n", "user.acx.stats",
                                "--only-values", str(mountpoint)], capture_output=True,
                               text=True, check=False)
    ops = totals["stat"] + totals["read"]
    errors = {k.removeprefix("error:"): v for k, v in totals.items() if k.startswith("error:")}
    growth = rss_end - rss_start
    summary.update({
        "files": files, "big_files": big, "seconds": round(elapsed, 1),
        "processes": processes, "threads_per_process": threads,
        "reader_threads": processes * threads,
        "ops": ops, "ops_per_second": round(ops / elapsed, 1),
        "reads": totals["read"], "stats": totals["stat"],
        "bytes_read": totals["bytes"], "mib_per_second": round(totals["bytes"] / elapsed / 2**20,
                                                                 1),
        "errors": errors, "error_count": sum(errors.values()),
        "mismatched_bytes": totals["mismatched_bytes"], "mismatches": mismatches[:20],
        "daemon_pid": pid, "daemon_alive_after_load": alive,
        "rss_start_mib": round(rss_start / 2**20, 1), "rss_end_mib": round(rss_end / 2**20, 1),
        "rss_peak_sampled_mib": round(peak / 2**20, 1), "rss_hwm_mib": round(hwm / 2**20, 1),
        "rss_growth_mib": round(growth / 2**20, 1),
        "rss_series_mib": series,
        "rss_bound_mib": round((cache_bytes + RSS_MARGIN) / 2**20, 1),
        "rss_bounded": growth <= cache_bytes + RSS_MARGIN,
        "daemon_stats": json.loads(xattr.stdout) if xattr.returncode == 0 else None,
        "unmount": "clean",
    })
    return summary
