"""The measured operations, each run in a fresh process of its own (`in_worker`, killed at the
timeout) that times itself: a walk reading every file, first byte, sequential, random and
backwards preads, two files alternately, parallel readers.

The worker process is `python -m scripts.bench --worker SPEC` (SPEC: the op and its arguments
as JSON); it prints the op's own figures as JSON.
"""

from __future__ import annotations

import json
import multiprocessing
import os
import random
import subprocess
import sys
import time
from collections.abc import Callable
from typing import Any

from scripts.bench.config import MiB
from scripts.bench.context import BenchError, Context, OpTimeout
from scripts.bench.provenance import REPO  # where `-m scripts.bench` resolves


def op_walk(root: str) -> dict[str, float]:
    """Walk `root` and read every file to its end, in one process."""
    start = time.perf_counter()
    files = size = 0
    for dirpath, _dirs, names in os.walk(root):
        for name in names:
            with open(os.path.join(dirpath, name), "rb", buffering=0) as handle:
                while chunk := handle.read(MiB):
                    size += len(chunk)
            files += 1
    return {"seconds": time.perf_counter() - start, "files": files, "bytes": size}


def op_first_byte(path: str) -> dict[str, float]:
    start = time.perf_counter()
    fd = os.open(path, os.O_RDONLY)
    try:
        got = len(os.read(fd, 4096))
    finally:
        os.close(fd)
    return {"seconds": time.perf_counter() - start, "bytes": got}


def op_sequential(path: str) -> dict[str, float]:
    start = time.perf_counter()
    size = 0
    with open(path, "rb", buffering=0) as handle:
        while chunk := handle.read(MiB):
            size += len(chunk)
    return {"seconds": time.perf_counter() - start, "bytes": size}


def op_random(path: str, count: int) -> dict[str, float]:
    """`count` 4 KiB preads at random offsets, then `count` going backwards over the file."""
    fd = os.open(path, os.O_RDONLY)
    try:
        size = os.fstat(fd).st_size
        blocks = max(1, size // 4096)
        rng = random.Random(5)
        offsets = [rng.randrange(blocks) * 4096 for _ in range(count)]
        stride = max(1, blocks // count)
        offsets += [(blocks - 1 - i * stride) * 4096 for i in range(count) if i * stride < blocks]
        start = time.perf_counter()
        for offset in offsets:
            if len(os.pread(fd, 4096, offset)) != min(4096, size - offset):
                raise OSError(f"short read at {offset}")
        return {"seconds": time.perf_counter() - start, "reads": len(offsets)}
    finally:
        os.close(fd)


def op_alternate(first: str, second: str) -> dict[str, float]:
    """Read two files alternately, 1 MiB from each in turn, to the end of both."""
    start = time.perf_counter()
    size = 0
    with open(first, "rb", buffering=0) as a, open(second, "rb", buffering=0) as b:
        live = [a, b]
        while live:
            for handle in list(live):
                chunk = handle.read(MiB)
                size += len(chunk)
                if not chunk:
                    live.remove(handle)
    return {"seconds": time.perf_counter() - start, "bytes": size}


def _read_shard(paths: list[str], gate: Any) -> None:
    gate.wait()
    for path in paths:
        with open(path, "rb", buffering=0) as handle:
            while handle.read(MiB):
                pass


def op_parallel(root: str, list_file: str, readers: int) -> dict[str, float]:
    """`readers` processes, each reading every readers-th file of the list."""
    with open(list_file, encoding="utf-8") as handle:
        paths = [os.path.join(root, line.rstrip("\n")) for line in handle if line.strip()]
    mp = multiprocessing.get_context("fork")
    gate = mp.Event()
    procs = [mp.Process(target=_read_shard, args=(paths[i::readers], gate))
             for i in range(readers)]
    for proc in procs:
        proc.start()
    start = time.perf_counter()
    gate.set()
    for proc in procs:
        proc.join()
    elapsed = time.perf_counter() - start
    if any(proc.exitcode != 0 for proc in procs):
        raise OSError("a reader failed")
    return {"seconds": elapsed, "files": len(paths)}


WORKER_OPS: dict[str, Callable[..., dict[str, float]]] = {
    "walk": op_walk, "first_byte": op_first_byte, "sequential": op_sequential,
    "random": op_random, "alternate": op_alternate, "parallel": op_parallel,
}


def worker_main(spec: str) -> int:
    doc = json.loads(spec)
    op = WORKER_OPS[doc.pop("op")]
    print(json.dumps(op(**doc)))
    return 0


def in_worker(ctx: Context, op: str, **args: Any) -> dict[str, float]:
    """Run one operation in a fresh process (killed at the timeout); its own timing."""
    spec = json.dumps({"op": op, **args})
    try:
        done = subprocess.run([sys.executable, "-m", "scripts.bench", "--worker", spec],
                              cwd=REPO, capture_output=True, text=True, timeout=ctx.cfg.timeout,
                              check=False)
    except subprocess.TimeoutExpired as exc:
        raise OpTimeout(f"timeout > {ctx.cfg.timeout:.0f} s") from exc
    if done.returncode != 0:
        lines = done.stderr.strip().splitlines()
        raise BenchError(f"{op} failed: {lines[-1] if lines else done.returncode}")
    result: dict[str, float] = json.loads(done.stdout)
    return result
