"""`python3 -m scripts.bench_oci`: the arguments, the cartridges, the interleaved rounds and the
one table, in a temporary directory that is removed on any exit. See the package docstring.
"""

from __future__ import annotations

import argparse
import signal
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from scripts.bench.provenance import REPO, acxfs_revision, compile_acxfs, host_line
from scripts.bench_library.config import BenchError
from scripts.bench_library.system import remove_tree, stop_daemons
from scripts.bench_oci import registry
from scripts.bench_oci.steps import Cartridge, Steps, parse_size

Step = Callable[[Steps, Cartridge, int], float]
# (key, row, column, the step): rows "push" and "fetch", columns side by side.
CELLS: tuple[tuple[str, str, str, Step], ...] = (
    ("acxfs_push", "push", "acxfs", Steps.acxfs_push),
    ("oras_push", "push", "oras-py", Steps.oras_push),
    ("acxfs_add_oci", "fetch", "acxfs", Steps.acxfs_add_oci),
    ("acxfs_add_file", "fetch", "acxfs from disk", Steps.acxfs_add_file),
    ("oras_pull", "fetch", "oras-py", Steps.oras_pull),
    ("curl_blob", "fetch", "curl", Steps.curl_blob),
)
ROWS = {"push": "push", "fetch": "fetch / install"}
COLUMNS = ("acxfs", "acxfs from disk", "oras-py", "curl")
WHAT = {  # what each cell of a row is, for the notes under the table
    "push": "acxfs: `acxfs push FILE oci+http://…` (full check, then upload); oras-py: "
            "`OrasClient.push` of the same file; each to a fresh repository",
    "fetch": "acxfs: `acxfs add oci+http://…:TAG` into a fresh HOME, key pinned (resolve, "
             "download, full check, store, daemon start, links; `acxfs down` after, untimed); "
             "acxfs from disk: `acxfs add FILE` of the same cartridge, likewise; oras-py: "
             "`OrasClient.pull` of the same artifact (download only); curl: `curl -o` of its "
             "layer blob",
}


@dataclass(frozen=True)
class Config:
    sizes: tuple[int, ...]
    rounds: int
    timeout: float
    work: Path
    keep: bool


def parse_args(argv: Sequence[str] | None) -> Config:
    parser = argparse.ArgumentParser(
        prog="python3 -m scripts.bench_oci",
        description="acxfs push / add against a loopback OCI registry, side by side with "
        "oras-py and curl.",
        epilog="example:\n  python3 -m scripts.bench_oci --sizes 64K,8M,64M --rounds 5",
        formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="2 rounds (30-40 s)")
    parser.add_argument("--sizes", default="64K,8M,64M", metavar="LIST",
                        help="cartridge sizes (K, M suffixes; default: 64K,8M,64M)")
    parser.add_argument("--rounds", type=int, metavar="N", help="rounds (default: 5)")
    parser.add_argument("--work", default=str(REPO / "bench-out"), metavar="DIR",
                        help="where the temporary run directory goes (default: bench-out)")
    parser.add_argument("--keep", action="store_true", help="keep the run directory")
    args = parser.parse_args(argv)
    try:
        sizes = tuple(parse_size(s) for s in args.sizes.split(","))
    except ValueError:
        parser.error(f"--sizes: not a list of sizes: {args.sizes}")
    rounds = args.rounds or (2 if args.quick else 5)
    if min(sizes) < 1 or rounds < 1:
        parser.error("--sizes and --rounds must be positive")
    return Config(sizes, rounds, 120.0, Path(args.work).resolve(), bool(args.keep))


Times = dict[tuple[str, str], list[float]]  # (cartridge slug, cell key) -> seconds per round


def measure(cfg: Config, base: Path, log: Callable[[str], None]) -> tuple[list[Cartridge], Times]:
    times: Times = {}
    with registry.running(base / "registry") as host:
        steps = Steps(base, host, cfg.timeout)
        steps.keygen()
        carts = []
        for size in cfg.sizes:
            carts.append(steps.cartridge(size))
            log(f"packed and pushed {carts[-1].label} ({carts[-1].size} bytes)")
        for round_no in range(cfg.rounds):
            for cart in carts:
                shift = round_no % len(CELLS)  # a rotated order: no command always goes first
                for key, _row, _col, step in CELLS[shift:] + CELLS[:shift]:
                    times.setdefault((cart.slug, key), []).append(step(steps, cart, round_no))
            log(f"round {round_no + 1}/{cfg.rounds} done")
    return carts, times


def cell(values: list[float] | None) -> str:
    if not values:
        return "—"
    median = statistics.median(values)
    return f"{median:.3f} s" if median < 10 else f"{median:.1f} s"


def render(cfg: Config, carts: list[Cartridge], times: Times, elapsed: float, rev: str) -> str:
    keys = {(row, col): key for key, row, col, _ in CELLS}
    lines = [f"## acxfs and OCI registries (median of {cfg.rounds} rounds, seconds)", "",
             "| cartridge | | " + " | ".join(COLUMNS) + " |",
             "|---|---|" + "---:|" * len(COLUMNS)]
    for cart in carts:
        for row, name in ROWS.items():
            values = [cell(times.get((cart.slug, keys[(row, col)]))) if (row, col) in keys
                      else "—" for col in COLUMNS]
            lines.append(f"| {cart.label} ({cart.size / 1024 / 1024:.2f} MiB .acx) | {name} | "
                         + " | ".join(values) + " |")
    lines += ["", *(f"- {ROWS[row]}: {text}" for row, text in WHAT.items()),
              "- registry: docker-registry (distribution) on 127.0.0.1, plain http, storage on "
              "local disk; page cache warm; every command a fresh process; rounds interleaved",
              f"- {host_line(rev)} Run took {elapsed:.0f} s.", ""]
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    cfg = parse_args(argv)
    started = time.perf_counter()

    def log(message: str) -> None:
        print(f"[{time.perf_counter() - started:6.1f}s] {message}", file=sys.stderr, flush=True)

    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    signal.signal(signal.SIGINT, signal.default_int_handler)
    cfg.work.mkdir(parents=True, exist_ok=True)
    base = Path(tempfile.mkdtemp(prefix="bo-", dir=cfg.work))
    rev = acxfs_revision()
    try:
        log(compile_acxfs())
        carts, times = measure(cfg, base, log)
    except (BenchError, KeyboardInterrupt) as exc:
        print(f"run stopped: {str(exc) or 'interrupted (Ctrl-C)'}", file=sys.stderr)
        return 1
    finally:
        stop_daemons(base)
        if cfg.keep:
            log(f"kept {base}")
        else:
            remove_tree(base)
    print(render(cfg, carts, times, time.perf_counter() - started, rev))
    return 0


if __name__ == "__main__":
    sys.exit(main())
