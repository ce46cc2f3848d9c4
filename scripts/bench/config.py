"""What one benchmark run measures: the peers compared, and the sizes and repetitions of a run
(`--quick` shrinks them). Frozen once the arguments are read.
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from pathlib import Path

MiB = 1024 * 1024
PEER_NAMES = ("plain", "sqlite3 -Ax", "ratarmount", "fuse-zip", "nullfs", "nullfs -s", "acxfs",
              "acxfs libfuse3", "acxfs lowlevel")


@dataclass(frozen=True)
class Config:
    """Sizes and repetitions of one run (`--quick` shrinks them)."""

    scale: str  # "quick", "goal" (the goals' own sizes) or "full"
    work: Path
    json_path: Path
    mount_counts: tuple[int, ...]  # (a) file counts of the cartridges mounted
    listing_counts: tuple[int, ...]  # (b) file counts listed with find -ls / ls -lR
    read_count: int  # (c) and (f): small files read
    small_size: int  # bytes per small file
    big_mib: int  # (d) the large file
    alt_mib: int  # (e) each of the two alternating files
    verify_files: int  # acxfs verify --deep: reference files in one skill
    cold_reps: int  # fresh mounts per cold measurement
    warm_reps: int  # repetitions on a live mount
    timeout: float  # seconds before one measured operation counts as a timeout
    random_reads: int  # (d) random preads, and as many backwards preads
    readers: tuple[int, ...]  # (f) parallel reader counts
    install_peers: bool
    peers: tuple[str, ...]
    workloads: tuple[str, ...]
    rebuild: bool

    @property
    def quick(self) -> bool:
        return self.scale == "quick"


# Sizes per scale: mount file counts, listing file counts, small files read, large and
# alternating file MiB. "goal" is the sizes the performance goals name (a 5k-file mount, a cold
# read of 5k small files, a cold 64 MiB read), in minutes rather than the full run's hour.
SCALES = {
    "quick": ((1000, 5000), (5000,), 1000, 32, 16),
    "goal": ((1000, 5000), (5000,), 5000, 64, 32),
    "full": ((1000, 10_000, 100_000), (10_000, 100_000), 10_000, 256, 128),
}


def make_config(args: argparse.Namespace) -> Config:
    quick = bool(args.quick)
    scale = "quick" if quick else "goal" if args.goal_sizes else "full"
    mounts, listings, reads, big, alt = SCALES[scale]
    return Config(
        scale=scale,
        work=Path(args.work).resolve(),
        json_path=Path(args.json).resolve(),
        mount_counts=mounts,
        listing_counts=listings,
        read_count=reads,
        small_size=4096,
        big_mib=big,
        alt_mib=alt,
        verify_files=5000,
        cold_reps=args.reps or (1 if quick else 3),
        warm_reps=args.reps or (1 if quick else 3),
        timeout=30.0 if quick else 600.0,
        random_reads=200 if quick else 1000,
        readers=(2, 4),
        install_peers=bool(args.install_peers),
        peers=tuple(args.peers.split(",")) if args.peers else PEER_NAMES,
        workloads=tuple(args.workloads.split(",")) if args.workloads else tuple("abcdefvp"),
        rebuild=bool(args.rebuild),
    )
