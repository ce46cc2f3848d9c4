"""The bundles every column installs: small, realistic single-skill cartridges, packed in
parallel and signed with the run's local key.
"""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from scripts.bench.system import tool
from scripts.bench_library.config import Bundle
from scripts.bench_library.system import run

PUBLISHER = "io.github.bench"


def skill_files(skill: str, index: int) -> dict[str, bytes]:
    """A small, realistic skill: SKILL.md with front matter, one reference, one script."""
    body = "".join(f"{step}. Step {step} of the {skill} procedure: check the input, act, and "
                   f"report what changed (variant {index}).\n" for step in range(1, 13))
    return {
        "SKILL.md": (f"---\nname: {skill}\ndescription: Benchmark skill number {index}; use it "
                     f"when a library benchmark needs a skill.\n---\n# {skill}\n\n{body}"
                     ).encode(),
        "references/guide.md": (f"# Guide to {skill}\n\n" + body * 4).encode(),
        "scripts/check.sh": f"#!/bin/sh\necho {skill} ok\n".encode(),
    }


def build_bundles(base: Path, env: dict[str, str], count: int, timeout: float) -> list[Bundle]:
    """`count` single-skill cartridges signed with this run's local key."""
    run([tool("acxfs"), "keygen"], env, timeout)
    bundles = []
    for index in range(1, count + 1):
        skill = f"bench-skill-{index:04d}"
        for rel, data in skill_files(skill, index).items():
            (base / "src" / skill / rel).parent.mkdir(parents=True, exist_ok=True)
            (base / "src" / skill / rel).write_bytes(data)
        bundles.append(Bundle(skill, base / "bundles" / f"{skill}.acx",
                              skill_files(skill, index)["SKILL.md"]))
    (base / "bundles").mkdir()
    with ThreadPoolExecutor(max_workers=os.cpu_count() or 2) as pool:
        list(pool.map(lambda b: run([tool("acxfs"), "pack", str(base / "src" / b.skill), "-o",
                                     str(b.path), "--publisher", PUBLISHER], env, timeout),
                      bundles))
    return bundles
