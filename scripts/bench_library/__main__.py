"""`python3 -m scripts.bench_library`: the arguments, then one run in a temporary directory that
is removed on any exit. See the package docstring.
"""

from __future__ import annotations

import argparse
import signal
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

from scripts.bench.provenance import REPO, acxfs_revision, compile_acxfs
from scripts.bench_library.columns import COLUMN_TYPES
from scripts.bench_library.config import BenchError, Config, Results
from scripts.bench_library.measuring import bench
from scripts.bench_library.report import render, write_json
from scripts.bench_library.startup import AGENT_SLUGS
from scripts.bench_library.system import remove_tree, stop_daemons


def parse_args(argv: Sequence[str] | None) -> Config:
    parser = argparse.ArgumentParser(
        prog="python3 -m scripts.bench_library",
        description="N single-skill bundles as the acxfs skills library (a link per skill, "
        "and agent directories served whole), as per-bundle "
        "acxfs mounts, as copies behind the library's links and as plain copies, side by "
        "side.",
        epilog="example:\n  python3 -m scripts.bench_library --sizes 10,50 --reps 5 "
        "--json bench-out/library.json", formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="N = 10, 1 rep (CI, < 60 s)")
    parser.add_argument("--sizes", metavar="LIST", help="bundle counts (default: 10,50,200)")
    parser.add_argument("--reps", type=int, metavar="R", help="repetitions (default: 3)")
    parser.add_argument("--json", metavar="FILE", help="write every raw figure there")
    parser.add_argument("--work", default=str(REPO / "bench-out"), metavar="DIR",
                        help="where the temporary run directory goes (default: bench-out; "
                        "not tmpfs, or drop_caches cannot make the copies cold)")
    parser.add_argument("--keep", action="store_true", help="keep the run directory")
    slugs = ",".join(kind.slug for kind in COLUMN_TYPES)
    parser.add_argument("--columns", default=slugs, metavar="LIST",
                        help="subset of lib (library, a link per skill), lw (library, agent "
                        "directories served whole), mnt (per-bundle mounts), ln (copies "
                        "behind links: the library's links and layout, no daemon), cp (plain "
                        "copies); default: all")
    parser.add_argument("--agents", metavar="LIST",
                        help="whose start-up to measure at the largest N (claude, codex, "
                        "gemini, opencode; 'none' for no start-up rows); default: all, "
                        "with --quick claude,codex")
    args = parser.parse_args(argv)
    try:
        sizes = tuple(int(s) for s in args.sizes.split(",")) if args.sizes else (
            (10,) if args.quick else (10, 50, 200))
    except ValueError:
        parser.error(f"--sizes: not a list of numbers: {args.sizes}")
    if not sizes or min(sizes) < 1 or (args.reps is not None and args.reps < 1):
        parser.error("--sizes and --reps must be positive")
    columns = tuple(args.columns.split(","))
    if not set(columns) <= {kind.slug for kind in COLUMN_TYPES}:
        parser.error(f"--columns: not a subset of {slugs}: {args.columns}")
    named = args.agents or ("claude,codex" if args.quick else ",".join(AGENT_SLUGS))
    agents = () if named == "none" else tuple(named.split(","))
    if not set(agents) <= set(AGENT_SLUGS):
        parser.error(f"--agents: not a subset of {','.join(AGENT_SLUGS)}: {named}")
    return Config(sizes, args.reps or (1 if args.quick else 3), bool(args.quick),
                  60.0 if args.quick else 600.0, Path(args.json).resolve() if args.json
                  else None, Path(args.work).resolve(), bool(args.keep), columns, agents)


def main(argv: Sequence[str] | None = None) -> int:
    cfg = parse_args(argv)
    started = time.perf_counter()

    def log(message: str) -> None:
        print(f"[{time.perf_counter() - started:6.1f}s] {message}", file=sys.stderr, flush=True)

    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    signal.signal(signal.SIGINT, signal.default_int_handler)  # even when started with it ignored
    cfg.work.mkdir(parents=True, exist_ok=True)
    base = Path(tempfile.mkdtemp(prefix="bl-", dir=cfg.work))
    rev = acxfs_revision()
    results: Results = {}
    notes: list[str] = []
    failures: list[str] = []
    complete = False
    try:
        compile_acxfs()
        bench(cfg, base, log, results, notes, failures)
        complete = not failures
    except (BenchError, KeyboardInterrupt) as exc:
        failures.append(f"run stopped: {str(exc) or 'interrupted (Ctrl-C)'}")
    finally:
        stop_daemons(base)
        if cfg.keep:
            log(f"kept {base}")
        else:
            remove_tree(base)
    markdown = render(cfg, results, notes, failures, time.perf_counter() - started, rev)
    print(markdown)
    write_json(cfg, results, markdown, rev, complete)
    return 0 if complete else 1


if __name__ == "__main__":
    sys.exit(main())
