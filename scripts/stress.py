"""Load on a live acxfs mount: reader threads in several processes, every byte compared.

Builds a signed cartridge of `--files` files (deterministic content, mixed sizes, compressed
rows; optionally `--big` files above the 8 MiB spill threshold), mounts it with `acxfs mount`,
then runs `--processes` x `--threads` reader threads for `--seconds`: each operation is a stat
(size checked) or a read at a random offset and length (bytes compared with the source, which
every reader regenerates independently from the seed). Reports operations per second, bytes,
errors (must be 0), mismatched bytes (must be 0), and the daemon's RSS (VmRSS from
/proc/<pid>/status, the pid from `acxfs status`) at start and end, its peak, and whether the
growth stays within the content cache bound (Limits.cache_bytes) plus a margin.

The load generator is `scripts/hostile/load.py`; this is its command line.

Usage, from the repository root:
  python -m scripts.stress --files 10000 --seconds 60 --json stress-summary.json
Exit status 1 when any error or mismatch happened, the RSS growth exceeded the bound, or the
unmount was unclean.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

from scripts.hostile.load import SIGNER, build_cartridge, stress


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter,
                                     epilog="example:\n  python -m scripts.stress --files 10000 "
                                     "--seconds 60 --json stress-summary.json")
    parser.add_argument("--files", type=int, default=10_000)
    parser.add_argument("--big", type=int, default=2, help="files above the spill threshold")
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--processes", type=int, default=4)
    parser.add_argument("--threads", type=int, default=2, help="reader threads per process")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--cartridge", type=Path,
                        help="reuse (or create) the cartridge here instead of a temp file")
    parser.add_argument("--json", type=Path, help="write the summary here")
    args = parser.parse_args(argv)

    scratch = Path(tempfile.mkdtemp(prefix="acxfs-stress-"))
    for name in ("ACXFS_TRUST_DIR", "XDG_CONFIG_HOME", "XDG_STATE_HOME", "XDG_CACHE_HOME"):
        os.environ[name] = str(scratch / name.lower())
    try:
        cartridge = args.cartridge or scratch / "stress.acx"
        built = 0.0
        if not cartridge.exists():
            started = time.monotonic()
            build_cartridge(cartridge, args.seed, args.files, args.big)
            built = time.monotonic() - started
        key = scratch / "signer.pub.pem"
        key.write_text(SIGNER.public_pem)
        print(f"cartridge: {cartridge} ({cartridge.stat().st_size / 2**20:.1f} MiB, "
              f"{args.files} files, built in {built:.1f} s)", flush=True)
        try:
            summary = stress(cartridge, key, scratch / "mnt", args.seed, args.files, args.big,
                             args.seconds, args.processes, args.threads)
        except AssertionError as exc:  # mounting.mounted: unclean unmount
            print(f"FAILED: {exc}")
            return 1
        summary["cartridge_mib"] = round(cartridge.stat().st_size / 2**20, 1)
        summary["build_seconds"] = round(built, 1)
        summary["command"] = "python -m scripts.stress " + " ".join(sys.argv[1:])
        for key_name, value in summary.items():
            if key_name not in ("mismatches", "daemon_stats", "rss_series_mib"):
                print(f"{key_name}: {value}")
        print(f"daemon_stats: {summary['daemon_stats']}")
        print("rss_series_mib (seconds, MiB): "
              + " ".join(f"{t:.0f}s:{m:.0f}" for t, m in summary["rss_series_mib"]))
        for line in summary["mismatches"]:
            print(f"  MISMATCH {line}")
        if args.json:
            args.json.write_text(json.dumps(summary, indent=2) + "\n")
            print(f"JSON summary: {args.json}")
        ok = (summary["error_count"] == 0 and summary["mismatched_bytes"] == 0
              and not summary["mismatches"] and summary["rss_bounded"]
              and summary["daemon_alive_after_load"])
        return 0 if ok else 1
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
