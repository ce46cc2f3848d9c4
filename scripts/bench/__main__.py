"""`python3 -m scripts.bench`: the arguments, then one run (peers probed, datasets built, every
chosen workload measured, the table printed and the JSON written). See the package docstring.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import time
from collections.abc import Sequence
from pathlib import Path

from scripts.bench.config import PEER_NAMES, make_config
from scripts.bench.context import Context
from scripts.bench.datasets import build_datasets
from scripts.bench.peers import make_peers
from scripts.bench.provenance import acxfs_revision, compile_acxfs
from scripts.bench.report import render, write_json
from scripts.bench.results import Table
from scripts.bench.system import cleanup_mounts, run_checked, tool, try_drop_caches
from scripts.bench.targets import evaluate_targets
from scripts.bench.worker import worker_main
from scripts.bench.workloads import WORKLOADS


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python3 -m scripts.bench",
        description="Benchmark acxfs against a plain directory, sqlite3 -Ax, ratarmount, "
        "fuse-zip and a do-nothing FUSE filesystem on the same synthetic skills.",
        epilog="example:\n  python3 -m scripts.bench --quick --json bench-out/quick.json",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    scale = parser.add_mutually_exclusive_group()
    scale.add_argument("--quick", action="store_true",
                       help="small sizes and few repetitions (CI smoke test, < 3 minutes)")
    scale.add_argument("--goal-sizes", action="store_true",
                       help="the sizes the goals name: a 5k-file mount, 5k small files, "
                       "a 64 MiB file (3/3 repetitions)")
    parser.add_argument("--json", default="bench-out/bench.json", metavar="PATH",
                        help="where to write every run as JSON (default: bench-out/bench.json)")
    parser.add_argument("--work", default="bench-out/work", metavar="DIR",
                        help="data, mountpoints and the isolated acxfs trust store "
                        "(default: bench-out/work; datasets are reused across runs)")
    parser.add_argument("--install-peers", action="store_true",
                        help="install missing peers (pip ratarmount, apt fuse-zip, sqlite3)")
    parser.add_argument("--peers", metavar="LIST",
                        help=f"comma-separated subset of: {','.join(PEER_NAMES)}")
    parser.add_argument("--workloads", metavar="LETTERS",
                        help="subset of a,b,c,d,e,f,v (verify --deep),p (build costs); "
                        "default: all")
    parser.add_argument("--reps", type=int, metavar="N",
                        help="cold and warm repetitions (default: 3/3, quick 1/1)")
    parser.add_argument("--rebuild", action="store_true", help="regenerate and repack datasets")
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    return parser.parse_args(argv)


def setup_trust(ctx: Context) -> None:
    """An isolated trust store with a local key: bench cartridges verify as 'local'."""
    trust = Path(ctx.env["ACXFS_TRUST_DIR"])
    if not (trust / "keys" / "local.pem").exists():
        run_checked([tool("acxfs"), "keygen"], env=ctx.env)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    if args.worker:
        return worker_main(args.worker)
    cfg = make_config(args)
    started = time.perf_counter()
    cfg.work.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ, ACXFS_TRUST_DIR=str(cfg.work / "trust"),
               XDG_STATE_HOME=str(cfg.work / "state"))
    drop_ok, drop_note = try_drop_caches()

    def log(message: str) -> None:
        print(f"[{time.perf_counter() - started:7.1f}s] {message}", file=sys.stderr, flush=True)

    ctx = Context(cfg, env, Table(), drop_ok, drop_note, log, acxfs_revision())
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    try:
        log(compile_acxfs())
        setup_trust(ctx)
        peers = make_peers(ctx)
        for peer in peers:
            log(f"peer {peer.name}: {'absent: ' + peer.absent if peer.absent else 'ready'}")
        data = build_datasets(ctx)
        for letter in cfg.workloads:
            if letter in WORKLOADS:
                log(f"workload {letter}")
                WORKLOADS[letter](ctx, peers, data)
                # Partial results survive an interrupted (long) run.
                write_json(ctx, peers, evaluate_targets(cfg, ctx.table), data,
                           time.perf_counter() - started, complete=False)
    finally:
        cleanup_mounts()
    elapsed = time.perf_counter() - started
    targets = evaluate_targets(cfg, ctx.table)
    print(render(ctx, peers, targets, elapsed))
    write_json(ctx, peers, targets, data, elapsed)
    log(f"wrote {cfg.json_path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
