"""`python3 -m scripts.bench_library.profile`: where each millisecond of `acxfs up` and of a cold
first read of every SKILL.md goes, for N single-skill bundles in the library against N plain
copies.

Each round (rounds interleave the library and the copies; medians are printed):
1. `acxfs down`, page cache dropped, then `acxfs up` run through `scripts.bench_library.probe`
   (timers around each step of the command and of the check of each bundle), then the wait
   until every link resolves (the kernel's FUSE requests traced meanwhile);
2. page cache, dentries and inodes dropped, then one process reads every SKILL.md through the
   agent directory, timing each system call's share: the link (`readlink`), the path walk
   (`stat` through the link: the LOOKUPs), `open`, `read` to the end. Meanwhile the kernel
   traces every FUSE request (count per file and round trip) and every `pread64` of the daemon
   (SQLite's page reads), and the daemon's timers split its time per operation and per step of
   the first read (the row's fetch, inflate and sha256);
3. the same scan warm, then over the plain copies after another drop.

    python3 -m scripts.bench_library.profile --box bench-out/box       # 200 bundles, 3 rounds
    python3 -m scripts.bench_library.profile --box bench-out/box --rounds 5 --json out.json
    git archive REV acxfs | tar -x -C /tmp/base   # then, interleaved with that revision:
    python3 -m scripts.bench_library.profile --box bench-out/box --baseline /tmp/base

`--box DIR` keeps the bundles, the library and the copies there (made on first use, about two
minutes for 200), so later profiles of another acxfs revision measure the same files.
Needs root (drop_caches, ftrace) and /dev/fuse.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from scripts.bench.provenance import REPO, acxfs_revision, compile_acxfs, host_line
from scripts.bench.system import try_drop_caches
from scripts.bench_library.bundles import build_bundles
from scripts.bench_library.columns import Column, CopiesColumn, LibraryColumn
from scripts.bench_library.config import BenchError, Bundle
from scripts.bench_library.ftrace import FuseTrace, Trace, threads_of
from scripts.bench_library.probe import MARK
from scripts.bench_library.system import daemons, isolated_env, remove_tree, wait_until

PHASES = ("agent dir entry (readlink / lstat)", "path walk (stat through the link)", "open",
          "read to the end")
Figures = dict[str, list[float]]  # name -> one value per round


def make_box(box: Path, n: int, timeout: float) -> list[Bundle]:
    """N bundles, installed in a library and as plain copies under `box` (once)."""
    done = box / "bundles.json"
    trust = box / "trust"
    if done.exists():
        return [Bundle(b["skill"], Path(b["path"]), bytes.fromhex(b["skill_md"]))
                for b in json.loads(done.read_text())][:n]
    box.mkdir(parents=True, exist_ok=True)
    bundles = build_bundles(box / "build", isolated_env(box / "build", trust), n, timeout)
    LibraryColumn(box / "lib", trust, timeout).install(bundles)
    CopiesColumn(box / "cp", trust, timeout).install(bundles)
    done.write_text(json.dumps([{"skill": b.skill, "path": str(b.path),
                                 "skill_md": b.skill_md.hex()} for b in bundles]))
    return bundles


def drop() -> None:
    dropped, why = try_drop_caches()
    if not dropped:
        raise BenchError(why)


def scan(column: Column, bundles: list[Bundle]) -> list[float]:
    """Seconds per phase, summed over every SKILL.md (bytes checked after the clock)."""
    totals = [0.0] * len(PHASES)
    got = []
    clock = time.perf_counter
    for bundle in bundles:
        entry = column.skill_md(bundle).parent
        t0 = clock()
        if isinstance(column, LibraryColumn):
            os.readlink(entry)
        else:
            os.lstat(entry)
        t1 = clock()
        os.stat(entry / "SKILL.md")
        t2 = clock()
        fd = os.open(entry / "SKILL.md", os.O_RDONLY)
        t3 = clock()
        parts = []
        while chunk := os.read(fd, 65536):
            parts.append(chunk)
        t4 = clock()
        os.close(fd)
        got.append(b"".join(parts))
        for i, seconds in enumerate((t1 - t0, t2 - t1, t3 - t2, t4 - t3)):
            totals[i] += seconds
    for bundle, data in zip(bundles, got, strict=True):
        if data != bundle.skill_md:
            raise BenchError(f"{bundle.skill}/SKILL.md read back different bytes")
    return totals


def mark(mnt: Path, label: str) -> None:
    with contextlib.suppress(OSError):  # ENODATA: the probe took its snapshot
        os.getxattr(mnt, MARK + label)


def proc_io(pid: int) -> dict[str, int]:
    try:
        lines = Path(f"/proc/{pid}/io").read_text().splitlines()
    except OSError:
        return {}
    return {k: int(v) for k, v in (line.split(": ") for line in lines)}


class Round:
    """One round's figures, keyed by name (merged over rounds by the caller)."""

    def __init__(self) -> None:
        self.figures: dict[str, float] = {}
        self.requests: dict[str, tuple[int, list[float]]] = {}

    def put(self, name: str, value: float) -> None:
        self.figures[name] = self.figures.get(name, 0.0) + value


def trace_stretch(trace: FuseTrace | None, mnt: Path, daemon: int, action: Callable[[], Any],
                  ) -> tuple[Any, Trace | None]:
    if trace is None:
        return action(), None
    trace.arm(os.minor(os.stat(mnt).st_dev), [os.getpid(), *threads_of(daemon)])
    trace.start()
    try:
        result = action()
    finally:
        seen = trace.stop(threads_of(daemon))
    return result, seen


def probe_command(baseline: Path | None, out: str) -> list[str]:
    """`acxfs up` through the probe: this tree's acxfs, or the one in `baseline` (the probe and
    its timers are always this tree's; a step the baseline lacks is shown as not timed)."""
    start = ("import sys; sys.path.insert(0, sys.argv[1]); import scripts.bench_library.probe "
             "as probe; sys.path.insert(0, sys.argv[2]); sys.exit(probe.main(sys.argv[3:]))")
    return [sys.executable, "-c", start, str(REPO), str(baseline or REPO), out, "--", "up"]


def one_round(lib: LibraryColumn, cp: CopiesColumn, bundles: list[Bundle],
              trace: FuseTrace | None, work: Path, timeout: float,
              baseline: Path | None) -> Round:
    out = Round()
    n = len(bundles)
    mnt = lib.home / ".local" / "share" / "acxfs" / "mnt"
    lib.acxfs("down")
    drop()
    probe_out = str(work / f"probe-{time.monotonic_ns()}")
    start = time.perf_counter()
    done = subprocess.run(probe_command(baseline, probe_out), env=lib.env, cwd=REPO,
                          capture_output=True, text=True, timeout=timeout, check=False)
    out.put("up: the command (wall, process start to exit)", time.perf_counter() - start)
    if done.returncode != 0:
        raise BenchError(f"acxfs up failed: {done.stderr.strip()[-300:]}")
    pids = daemons(lib.root)
    if len(pids) != 1:
        raise BenchError(f"{len(pids)} library daemons, not one")
    daemon = pids[0]
    _, seen = trace_stretch(trace, mnt, daemon, lambda: out.put(
        "up: after the command, until every link resolves",
        _timed(lambda: wait_until(lambda: all(lib.resolves(b) for b in bundles), timeout,
                                  "links not resolving"))))
    _requests(out, "links", seen, n)
    command = json.loads(Path(probe_out + ".command.json").read_text())
    for name, (calls, seconds, cpu) in command["steps"].items():
        out.put(name, seconds)
        out.put(f"cpu of {name}", cpu)
        out.put(f"calls of {name}", calls)
    mark(mnt, "up")
    drop()
    before = proc_io(daemon)
    phases, seen = trace_stretch(trace, mnt, daemon, lambda: scan(lib, bundles))
    after = proc_io(daemon)
    mark(mnt, "cold")
    for phase, seconds in zip(PHASES, phases, strict=True):
        out.put(f"cold lib: {phase}", seconds)
    out.put("cold lib: disk bytes read by the daemon", after.get("read_bytes", 0)
            - before.get("read_bytes", 0))
    _requests(out, "cold", seen, n)
    if seen is not None:
        out.put("cold: preads", len(seen.preads))
        out.put("cold: pread seconds", sum(s for s, _ in seen.preads))
        out.put("cold: pread bytes", sum(b for _, b in seen.preads))
    for phase, seconds in zip(PHASES, scan(lib, bundles), strict=True):
        out.put(f"warm lib: {phase}", seconds)
    mark(mnt, "warm")
    drop()
    for phase, seconds in zip(PHASES, scan(cp, bundles), strict=True):
        out.put(f"cold copies: {phase}", seconds)
    lib.acxfs("down")
    wait_until(lambda: Path(probe_out + ".daemon.json").exists(), timeout, "no daemon figures")
    for label, steps in json.loads(Path(probe_out + ".daemon.json").read_text())["phases"]:
        for name, (calls, seconds, cpu) in steps.items():
            out.put(f"daemon {label}: {name}", seconds)
            out.put(f"daemon {label}: cpu of {name}", cpu)
            out.put(f"daemon {label}: calls of {name}", calls)
    return out


def _timed(action: Callable[[], object]) -> float:
    start = time.perf_counter()
    action()
    return time.perf_counter() - start


def _requests(out: Round, label: str, seen: Trace | None, n: int) -> None:
    if seen is None:
        return
    for op, trips in seen.requests.items():
        out.put(f"{label} requests: {op}", len(trips))
        out.put(f"{label} round trips: {op}", sum(trips))
        out.requests.setdefault(f"{label}:{op}", (0, []))[1].extend(trips)


def med(rounds: list[Round], name: str) -> float:
    values = [r.figures.get(name, 0.0) for r in rounds]
    return statistics.median(values) if values else 0.0


def trips_of(rounds: list[Round], key: str) -> list[float]:
    return [t for r in rounds for t in r.requests.get(key, (0, []))[1]]


VERIFY = "daemon cold: read: verify (fetch + inflate + sha256)"
FETCH = "daemon cold: read: stored chunks (fetch)"


def _phase_cell(rounds: list[Round], kind: str, keys: Sequence[str], n: int) -> str:
    value = sum(med(rounds, f"{kind}: {k}") for k in keys)
    return f"{value * 1000:.1f} ({value / n * 1e6:.0f})"


def _verify_us(rounds: list[Round], n: int) -> str:
    return f"{med(rounds, VERIFY) / n * 1e6:.0f}"


def _fetch_us(rounds: list[Round], n: int) -> str:
    return f"{med(rounds, FETCH) / n * 1e6:.0f}"


def _inflate_us(rounds: list[Round], n: int) -> str:
    return f"{(med(rounds, VERIFY) - med(rounds, FETCH)) / n * 1e6:.0f}"


def _preads(rounds: list[Round], n: int) -> str:
    return f"{med(rounds, 'cold: preads') / n:.2f}"


def _pread_us(rounds: list[Round], n: int) -> str:
    count = med(rounds, "cold: preads")
    return f"{med(rounds, 'cold: pread seconds') / count * 1e6:.0f}" if count else "none"


def _disk_bytes(rounds: list[Round], n: int) -> str:
    return f"{med(rounds, 'cold lib: disk bytes read by the daemon') / n:.0f}"


def _link_lookups(rounds: list[Round], n: int) -> str:
    return f"{med(rounds, 'links requests: LOOKUP') / n:.2f}"


def render(runs: dict[str, list[Round]], n: int, note: str, rev: str) -> str:
    """Markdown: one column (or pair of columns) per variant, medians over its rounds."""
    ms = 1000.0
    names = list(runs)
    every = [r for rounds in runs.values() for r in rounds]
    lines = [f"## Profile: `acxfs up` and a cold first read, {n} bundles "
             f"({len(next(iter(runs.values())))} rounds of each of {', '.join(names)}, "
             f"interleaved; medians; {time.strftime('%Y-%m-%d %H:%M')})", "",
             f"{note} Load average at the end: {os.getloadavg()[0]:.1f}. {host_line(rev)}", "",
             "### `acxfs up` until every link resolves (wall and CPU ms)", "",
             "| step | calls | " + " | ".join(f"{v} ms | {v} CPU" for v in names) + " |",
             "|---|---:|" + "---:|---:|" * len(names)]
    steps = sorted({k for r in every for k in r.figures if k.startswith(("up:", "check:",
                                                                         "mount:"))})
    for name in steps:
        calls = max(med(rounds, "calls of " + name) for rounds in runs.values())
        cells = [f"{med(rounds, name) * ms:.1f} | {med(rounds, 'cpu of ' + name) * ms:.1f}"
                 if any("calls of " + name in r.figures or name in r.figures for r in rounds)
                 else "not timed | " for rounds in runs.values()]
        lines.append(f"| {name} | {calls:.0f} | " + " | ".join(cells) + " |")
    lines += ["", "### A cold read of every SKILL.md (ms, summed over the files; µs per file)",
              "", "| phase | " + " | ".join(f"library, {v}" for v in names) +
              " | library warm | plain copies |", "|---|" + "---:|" * (len(names) + 2)]
    last = runs[names[-1]]
    for phase in (*PHASES, "total"):
        keys = PHASES if phase == "total" else (phase,)
        lines.append(f"| {phase} | " + " | ".join(
            _phase_cell(r, "cold lib", keys, n) for r in runs.values()) +
            f" | {_phase_cell(last, 'warm lib', keys, n)} | "
            f"{_phase_cell(every, 'cold copies', keys, n)} |")
    lines += ["", "### Its FUSE requests (kernel trace) and the daemon's Python time, per file",
              "", "| request | " + " | ".join(
                  f"{v}: count | {v}: round trip µs median / mean | {v}: in Python µs"
                  for v in names) + " |", "|---|" + "---:|" * (3 * len(names))]
    ops = {"LOOKUP": "getattr", "GETATTR": "getattr", "READ": "read", "READDIR": "readdir",
           "GETXATTR": "getxattr", "ACCESS": "access", "STATFS": "statfs"}
    for op in sorted({k.split(": ", 1)[1] for r in every for k in r.figures
                      if k.startswith("cold requests: ")}):
        cells = []
        for rounds in runs.values():
            trips = trips_of(rounds, f"cold:{op}")
            py = ops.get(op, "")
            calls, spent = (med(rounds, f"daemon cold: calls of op: {py}"),
                            med(rounds, f"daemon cold: op: {py}"))
            cells.append(f"{med(rounds, f'cold requests: {op}') / n:.2f} | "
                         f"{statistics.median(trips) * 1e6 if trips else 0:.0f} / "
                         f"{statistics.fmean(trips) * 1e6 if trips else 0:.0f} | "
                         f"{spent / calls * 1e6 if calls and py else 0:.0f}")
        lines.append(f"| {op} | " + " | ".join(cells) + " |")
    lines += ["", "### Inside a first read, per file (daemon timers and trace)", "",
              "| step | " + " | ".join(names) + " |", "|---|" + "---:|" * len(names)]
    for label, show in (("verify (fetch + inflate + sha256) µs", _verify_us),
                        ("SQLite fetch of the row µs", _fetch_us),
                        ("inflate + sha256 µs", _inflate_us),
                        ("SQLite page reads (pread64)", _preads),
                        ("µs per page read", _pread_us),
                        ("bytes the daemon read from disk", _disk_bytes),
                        ("LOOKUPs while `up`'s links first resolved", _link_lookups)):
        lines.append(f"| {label} | " + " | ".join(show(r, n) for r in runs.values()) + " |")
    return "\n".join(lines) + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python3 -m scripts.bench_library.profile",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, default=200, help="bundles (default 200)")
    parser.add_argument("--rounds", type=int, default=3, help="rounds (default 3)")
    parser.add_argument("--box", metavar="DIR", help="keep and reuse the bundles there")
    parser.add_argument("--json", metavar="FILE", help="every round's figures")
    parser.add_argument("--baseline", metavar="DIR",
                        help="also profile the acxfs package in DIR (e.g. `git archive REV "
                        "acxfs | tar -x -C DIR`), interleaved with this tree's")
    args = parser.parse_args(argv)
    timeout = 600.0
    compile_acxfs()
    work = Path(tempfile.mkdtemp(prefix="prof-", dir=REPO / "bench-out"
                                 if (REPO / "bench-out").is_dir() else None))
    box = Path(args.box).resolve() if args.box else work / "box"
    trace, why = FuseTrace.open()
    note = why + "." if why else "Kernel trace: FUSE requests and the daemon's pread64."
    baseline = Path(args.baseline).resolve() if args.baseline else None
    variants = {"baseline": baseline, "current": None} if baseline else {"current": None}
    runs: dict[str, list[Round]] = {name: [] for name in variants}
    try:
        bundles = make_box(box, args.n, timeout)
        trust = box / "trust"
        lib = LibraryColumn(box / "lib", trust, timeout)
        lib.bundles = bundles
        cp = CopiesColumn(box / "cp", trust, timeout)
        for index in range(args.rounds):
            for name, tree in variants.items():
                print(f"round {index + 1}/{args.rounds}: {name}", file=sys.stderr, flush=True)
                runs[name].append(one_round(lib, cp, bundles, trace, work, timeout, tree))
    except BenchError as exc:
        print(f"profile stopped: {exc}", file=sys.stderr)
        return 1
    finally:
        if trace is not None:
            trace.close()
        if args.box is None:
            LibraryColumn(box / "lib", box / "trust", timeout).stop()
        remove_tree(work)
    print(render(runs, len(bundles), note, acxfs_revision()))
    if args.json:
        Path(args.json).write_text(json.dumps(
            {name: [r.figures for r in rounds] for name, rounds in runs.items()}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
