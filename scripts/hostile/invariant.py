"""The invariant every mutant must keep, checked through the real command.

For every mutant (`check_mutant`):
  * `acxfs verify --quick`, `acxfs verify` and `acxfs inspect` end with a verdict line and an
    exit code in {0, 3, 4, 5, 6}; 2 only when the mutated trust registry is unusable (with one
    `acxfs: error:` line). Never a traceback, a hang, or a terminal control character taken
    from the file;
  * when `verify --quick` accepts (exit 0, the original signer trusted through a registry or
    --trust-key), `acxfs cat` of every file either prints exactly the original signed bytes of
    that path or fails with exit 5 and prints nothing, and `inspect` shows as signed only the
    original signed cartridge facts.
For an accepted mutant that is mounted (`check_mount`): every served file equals the signed
source or its read fails with EIO, and the daemon stays up and unmounts cleanly.
"""

from __future__ import annotations

import dataclasses
import errno
import json
import os
import re
import time
from collections import Counter
from pathlib import Path

from scripts import mounting
from scripts.hostile.bases import Base
from scripts.hostile.mutant import Mutant
from scripts.hostile.running import Run, run_main

ALLOWED_CODES = frozenset({0, 3, 4, 5, 6})
VERDICT_RE = re.compile(r"^(verified|warning|invalid) / [a-z]+ - .+$")
CONTROL_RE = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


# ============================================================================ the invariant


@dataclasses.dataclass
class Result:
    """The outcome of checking one mutant."""

    steps: list[str]
    shallow: int | None = None
    deep: int | None = None
    verdict: str = ""
    reads_ok: int = 0
    reads_failed: int = 0
    violations: list[str] = dataclasses.field(default_factory=list)
    inconsistencies: list[str] = dataclasses.field(default_factory=list)
    known: list[str] = dataclasses.field(default_factory=list)  # regressed fixed-bug ids
    seconds: float = 0.0

    @property
    def outcome(self) -> str:
        if self.violations:
            return "VIOLATION"
        if self.shallow == 0:
            return f"accepted (deep {self.deep})"
        return f"refused {self.shallow}"


def _check_verdict_run(run: Run, what: str, registry_mutated: bool, result: Result) -> None:
    if run.tb is not None:
        result.violations.append(f"{what}: traceback: {run.tb.strip().splitlines()[-1]}")
        result.violations.append("TRACEBACK " + run.tb)
        return
    allowed = ALLOWED_CODES | ({2} if registry_mutated else set())
    if run.code not in allowed:
        result.violations.append(f"{what}: exit {run.code}: {run.err.strip()[:200]}")
        return
    if run.code == 2:
        lines = run.err.strip().splitlines()
        if run.out or len(lines) != 1 or "trust registry" not in lines[0]:
            result.violations.append(f"{what}: exit 2 without one registry error line: "
                                     f"{run.err.strip()[:200]}")
        return
    first = run.out.splitlines()[0] if run.out else ""
    if not VERDICT_RE.match(first):
        result.violations.append(f"{what}: no verdict line: {run.out[:200]!r}")
    if CONTROL_RE.search(run.out) or CONTROL_RE.search(run.err):
        result.violations.append(f"{what}: control characters from the file reach the terminal:"
                                 f" {(run.out + run.err)[:200]!r}")


def check_mutant(mutant: Mutant) -> Result:
    """Apply the invariant of the module docstring to one mutant (never raises for acxfs)."""
    started = time.monotonic()
    result = Result(list(mutant.steps))
    target = str(mutant.path)
    shallow = run_main(["verify", "--quick", target, *mutant.trust_args])
    deep = run_main(["verify", target, *mutant.trust_args])  # every byte
    _check_verdict_run(shallow, "verify --quick", mutant.registry_mutated, result)
    _check_verdict_run(deep, "verify", mutant.registry_mutated, result)
    result.shallow, result.deep = shallow.code, deep.code
    result.verdict = deep.out.splitlines()[0] if deep.out else deep.err.strip()[:120]
    if shallow.code is not None and deep.code is not None and shallow.code != deep.code and not (
        shallow.code in (0, 4) and deep.code == 5  # deep finds content edits of signed files
    ):
        result.inconsistencies.append(f"verify --quick {shallow.code} but verify {deep.code}")
    inspect = run_main(["inspect", target, *mutant.trust_args])
    _check_verdict_run(inspect, "inspect", mutant.registry_mutated, result)
    if shallow.code == 0 and shallow.tb is None:
        _check_reads(mutant, result, deep_ok=deep.code == 0)
    result.seconds = time.monotonic() - started
    return result


def _accepted_paths(mutant: Mutant) -> list[str] | None:
    from acxfs.content.cache import VerifiedCache
    from acxfs.formats import open_source
    from acxfs.trust.store import load_trust

    args = mutant.trust_args
    registries = [args[i + 1] for i, a in enumerate(args) if a == "--registry"]
    keys = [args[i + 1] for i, a in enumerate(args) if a == "--trust-key"]
    try:
        source, _ = open_source(str(mutant.path), load_trust(registries, keys), VerifiedCache())
    except Exception:
        return None
    try:
        return [e.path for e in source.tree.files()]
    finally:
        source.close()


def _check_reads(mutant: Mutant, result: Result, deep_ok: bool) -> None:
    paths = _accepted_paths(mutant)
    if paths is None:
        result.inconsistencies.append("verify accepted but open_source refused")
        return
    signed = mutant.base.files
    for path in paths:
        if not path.startswith("rom/"):
            result.violations.append(f"{path}: a non-ROM path is listed in the verified tree")
        run = run_main(["cat", str(mutant.path), path, *mutant.trust_args])
        if run.tb is not None:
            result.violations.append(f"cat {path}: traceback: {run.tb.strip().splitlines()[-1]}")
            result.violations.append("TRACEBACK " + run.tb)
            continue
        if run.code == 0:
            if path not in signed or run.raw != signed[path]:
                result.violations.append(
                    f"cat {path}: served {len(run.raw)} bytes that are not the signed bytes")
            else:
                result.reads_ok += 1
        elif run.code == 5:
            result.reads_failed += 1
            if run.raw:
                result.violations.append(f"cat {path}: exit 5 after {len(run.raw)} bytes")
            if deep_ok:
                result.inconsistencies.append(f"--deep accepted but cat {path} failed")
        else:
            result.violations.append(f"cat {path}: exit {run.code}: {run.err.strip()[:160]}")
    inspect = run_main(["inspect", "--json", str(mutant.path), *mutant.trust_args])
    if inspect.tb is not None:
        result.violations.append(f"inspect: traceback: {inspect.tb.strip().splitlines()[-1]}")
        return
    try:
        shown = json.loads(inspect.out).get("signedMeta", {})
    except ValueError:
        result.violations.append(f"inspect --json printed no JSON: {inspect.out[:100]!r}")
        return
    wrong = {k: v for k, v in shown.items() if mutant.base.signed_meta.get(k) != v}
    if wrong:
        result.violations.append(f"inspect shows unsigned values as signed facts: {wrong}")




# ============================================================================ mounting a sample


def check_mount(mutant_path: Path, base: Base, trust_args: list[str],
                workdir: Path) -> tuple[list[str], Counter[str]]:
    """Mount an accepted mutant: each served file equals the signed source or read gives EIO,
    and the daemon stays up and unmounts cleanly. Returns the violations and read counts."""
    problems: list[str] = []
    reads: Counter[str] = Counter()
    mountpoint = workdir / "mnt"
    mountpoint.mkdir(parents=True, exist_ok=True)
    try:
        with mounting.mounted(mutant_path, mountpoint, *trust_args) as live:
            for root, _dirs, names in os.walk(mountpoint):
                for name in names:
                    full = Path(root) / name
                    rel = str(full.relative_to(mountpoint))
                    try:
                        data = full.read_bytes()
                    except OSError as exc:
                        reads["EIO" if exc.errno == errno.EIO else "other error"] += 1
                        if exc.errno != errno.EIO:
                            problems.append(f"mount read {rel}: {exc}")
                        continue
                    reads["signed bytes" if base.files.get(rel) == data else "WRONG BYTES"] += 1
                    if base.files.get(rel) != data:
                        problems.append(f"mount served {len(data)} bytes of {rel} that are not "
                                        "the signed bytes")
            if not mounting.pid_alive(live.pid):
                problems.append("the daemon died while serving")
    except mounting.MountFailed as exc:
        problems.append(f"verify accepted but the mount failed: {exc}")
    except AssertionError as exc:
        problems.append(f"unclean unmount: {exc}")
    return problems, reads
