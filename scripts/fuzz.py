"""Mutation fuzzing of acxfs: hostile variants of validly signed cartridges.

Each mutant starts as a copy of a valid signed cartridge (written by the independent test
writer `scripts/cartwriter.py`, or one of the real fixtures of `tests/fixtures/real/`) and
receives one to three mutations (`scripts/hostile/mutators.py`). Every mutant must keep
the invariant of `scripts/hostile/invariant.py`: a verdict line and an allowed exit code
from `verify`, `verify --deep` and `inspect` (each mutant in a worker process killed after a
timeout), never a traceback, a hang or a terminal control character taken from the file; when
`verify` accepts, `cat` of every file prints exactly the original signed bytes or fails with
exit 5 and prints nothing, and `inspect` shows as signed only the original signed facts. A
sample of accepted mutants is mounted (`--mount-sample`): every served file equals the signed
source or its read fails with EIO, and the daemon stays up and unmounts cleanly.

Usage, from the repository root:
  python -m scripts.fuzz --count 5000 --seed 1 --json fuzz-summary.json
  python -m scripts.fuzz --seed 1 --only 1234 --keep /tmp/m     # replay one mutant

Prints counts per outcome and the time; the JSON summary holds the same and every violation
(with the seed and index that replay it). Exit status 1 when any violation was found.

The reproducers of the acxfs bugs this fuzzer found (`scripts/hostile/repro.py`, all
fixed) run first as regression checks; a violation that matches a regressed one is labelled
with it, and still counts.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import random
import re
import shutil
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from scripts.hostile.bases import Base, build_bases
from scripts.hostile.invariant import Result, check_mount
from scripts.hostile.pool import Pool, run_one
from scripts.hostile.repro import FIXED_BUGS, classify, regressed_bugs


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter,
                                     epilog="example:\n  python -m scripts.fuzz --count 5000 "
                                     "--seed 1 --json fuzz-summary.json")
    parser.add_argument("--count", type=int, default=1000, help="mutants to check")
    parser.add_argument("--seed", type=int, default=1, help="run seed (mutant i is replayable)")
    parser.add_argument("--workers", type=int, default=max(1, (os.cpu_count() or 2)))
    parser.add_argument("--timeout", type=float, default=60.0, help="seconds per mutant")
    parser.add_argument("--memory-limit-mb", type=int, default=3072,
                        help="address-space limit of each worker (0: none)")
    parser.add_argument("--mount-sample", type=int, default=25,
                        help="mount up to this many accepted mutants (0: none)")
    parser.add_argument("--no-real", action="store_true", help="writer bases only")
    parser.add_argument("--only", type=int, help="check only mutant INDEX (in-process)")
    parser.add_argument("--keep", type=Path, help="with --only: keep the mutant here")
    parser.add_argument("--json", type=Path, help="write the JSON summary here")
    parser.add_argument("--workdir", type=Path, help="scratch directory (default: a temp dir)")
    args = parser.parse_args(argv)

    scratch = Path(tempfile.mkdtemp(prefix="acxfs-fuzz-", dir=args.workdir))
    for name in ("ACXFS_TRUST_DIR", "XDG_CONFIG_HOME", "XDG_STATE_HOME", "XDG_CACHE_HOME"):
        os.environ[name] = str(scratch / name.lower())
    try:
        return _run(args, scratch)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def _run(args: argparse.Namespace, scratch: Path) -> int:
    started = time.monotonic()
    bases = build_bases(scratch / "bases", include_real=not args.no_real)
    regressed = regressed_bugs(scratch / "repro")
    print(f"bases: {', '.join(b.name for b in bases)}")
    print(f"regression checks of the {len(FIXED_BUGS)} fixed bugs: "
          + (f"REGRESSED: {', '.join(regressed)}" if regressed else "all still fixed"))

    if args.only is not None:
        result, kept = run_one(bases, args.seed, args.only, scratch / "only", keep=args.keep)
        classify(result, regressed)
        print(json.dumps(dataclasses.asdict(result), indent=2))
        print(f"kept in {kept}" if kept else "")
        return 1 if result.violations or regressed else 0

    outcomes: Counter[str] = Counter()
    verdicts: Counter[str] = Counter()
    by_mutator: dict[str, Counter[str]] = {}
    violations: list[dict[str, Any]] = []
    inconsistencies: list[dict[str, Any]] = []
    accepted: list[tuple[int, str]] = []
    reads = Counter[str]()
    done = 0

    def on_result(index: int, raw: dict[str, Any] | None, kept: str | None, note: str) -> None:
        nonlocal done
        done += 1
        if raw is None:
            outcomes["VIOLATION"] += 1
            violations.append({"index": index, "violations": [note], "known": [""]})
            return
        result = Result(**{k: v for k, v in raw.items()})
        classify(result, regressed)
        outcomes[result.outcome] += 1
        verdicts[_verdict_key(result.verdict)] += 1
        for step in result.steps:
            by_mutator.setdefault(step.split()[0].rstrip(":"), Counter())[result.outcome] += 1
        reads["ok"] += result.reads_ok
        reads["failed (exit 5)"] += result.reads_failed
        if result.violations:
            violations.append({"index": index, "steps": result.steps,
                               "violations": [v for v in result.violations
                                              if not v.startswith("TRACEBACK ")],
                               "known": result.known,
                               "traceback": next((v[10:] for v in result.violations
                                                  if v.startswith("TRACEBACK ")), None),
                               "kept": kept})
        if result.inconsistencies:
            inconsistencies.append({"index": index, "steps": result.steps,
                                    "inconsistencies": result.inconsistencies})
        if result.shallow == 0 and kept and not result.violations:
            accepted.append((index, kept))
        if done % 500 == 0:
            print(f"  {done}/{args.count} mutants, {time.monotonic() - started:.0f} s",
                  flush=True)

    keep_rate = min(1.0, 5.0 * args.mount_sample / max(1, args.count))
    pool = Pool(args.workers, bases, args.seed, scratch / "work",
                args.memory_limit_mb * 1024 * 1024, keep_rate)
    try:
        pool.run(range(args.count), args.timeout, on_result)
    finally:
        pool.close()
    fuzz_seconds = time.monotonic() - started

    mount_results = _mount_sample(args, accepted, bases, scratch)
    for item in mount_results:
        if item["problems"]:
            outcomes["VIOLATION"] += 1
            violations.append({"index": item["index"], "violations": item["problems"],
                               "known": [""] * len(item["problems"]), "mount": True})

    total_seconds = time.monotonic() - started
    regressed_count = sum(1 for v in violations if all(v["known"]))
    summary = {
        "command": "python -m scripts.fuzz " + " ".join(sys.argv[1:]),
        "seed": args.seed, "count": args.count, "workers": args.workers,
        "bases": [b.name for b in bases],
        "seconds": round(total_seconds, 1), "fuzz_seconds": round(fuzz_seconds, 1),
        "mutants_per_second": round(args.count / fuzz_seconds, 1),
        "outcomes": dict(outcomes.most_common()),
        "verdicts": dict(verdicts.most_common()),
        "by_mutator": {k: dict(v.most_common()) for k, v in sorted(by_mutator.items())},
        "reads": dict(reads),
        "mounted": len(mount_results),
        "mount_clean": sum(1 for m in mount_results if not m["problems"]),
        "mount_reads": dict(sum((Counter(m["reads"]) for m in mount_results), Counter())),
        "violations_total": len(violations),
        "violations_unknown": len(violations) - regressed_count,  # matching no regressed bug
        "regressed_bugs": {b.ident: b.summary for b in regressed.values()},
        "regressed_bug_hits": dict(Counter(k for v in violations for k in v["known"] if k)),
        "inconsistencies": inconsistencies[:50],
        "inconsistencies_total": len(inconsistencies),
        "violations": violations[:200],
    }
    _print_summary(summary)
    if args.json:
        args.json.write_text(json.dumps(summary, indent=2) + "\n", encoding="utf-8")
        print(f"JSON summary: {args.json}")
    return 1 if violations or regressed else 0


def _verdict_key(line: str) -> str:
    """A verdict line with the path it names replaced, for counting."""
    line = re.sub(r"\brom/\S+|\bsave/\S+|/\S+\.json", "<path>", line)
    line = re.sub(r"\(.*\)\.$", "(...).", line) if "malformed" in line else line
    return line[:110]


def _mount_sample(args: argparse.Namespace, accepted: list[tuple[int, str]], bases: list[Base],
                  scratch: Path) -> list[dict[str, Any]]:
    if not args.mount_sample or not accepted or not os.path.exists("/dev/fuse"):
        return []
    rng = random.Random(args.seed)
    sample = rng.sample(accepted, min(args.mount_sample, len(accepted)))
    by_name = {b.name: b for b in bases}
    out = []
    for index, kept in sorted(sample):
        meta = json.loads((Path(kept) / "trust.json").read_text())
        problems, reads = check_mount(Path(kept) / "mutant.acx", by_name[meta["base"]],
                                      meta["trust"], scratch / "mounts" / str(index))
        out.append({"index": index, "problems": problems, "reads": dict(reads)})
    return out


def _print_summary(summary: dict[str, Any]) -> None:
    print(f"\n{summary['count']} mutants in {summary['fuzz_seconds']} s "
          f"({summary['mutants_per_second']}/s, {summary['workers']} workers); "
          f"total with mounts {summary['seconds']} s")
    print("outcomes:")
    for key, n in summary["outcomes"].items():
        print(f"  {n:6}  {key}")
    print("verdicts of verify --deep:")
    for key, n in list(summary["verdicts"].items())[:25]:
        print(f"  {n:6}  {key}")
    print(f"reads through acxfs cat: {summary['reads']}")
    print(f"mounted {summary['mounted']} accepted mutants, clean: {summary['mount_clean']}; "
          f"reads: {summary['mount_reads']}")
    print(f"violations: {summary['violations_total']}")
    for ident, n in summary["regressed_bug_hits"].items():
        print(f"  {n:6}  match regressed fixed bug {ident}: {summary['regressed_bugs'][ident]}")
    for item in summary["violations"][:10]:
        print(f"  #{item['index']}: {item.get('steps')} -> {item['violations'][:2]}")
    print(f"inconsistencies (not security violations): {summary['inconsistencies_total']}")
    for item in summary["inconsistencies"][:5]:
        print(f"  #{item['index']}: {item['steps']} -> {item['inconsistencies'][:2]}")


if __name__ == "__main__":
    sys.exit(main())
