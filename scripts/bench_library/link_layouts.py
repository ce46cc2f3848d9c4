"""`python3 -m scripts.bench_library.link_layouts`: what links and the depth of a skill's real
path cost an agent by themselves, with no FUSE at all.

N skills (the library bench's own) are laid out as plain directories in several ways under one
temporary root: as plain copies in the agent's directory, and as copies elsewhere behind one
link per skill in it, at real paths of several depths (the library's nested layout of old, its
layout now, a skill straight below a short path), and as copies in a directory elsewhere that
the agent's skills directory itself links to (one link for all). Codex starts warm against
each, interleaved round by round (one unmeasured start each first), headless against the
loopback mock, and every start must list all N skills; the table gives medians and each layout
over the plain copies.

    python3 -m scripts.bench_library.link_layouts              # 200 skills, 9 rounds
    python3 -m scripts.bench_library.link_layouts --skills 50 --rounds 5
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path

from scripts.agent_runs import runs
from scripts.bench_library.bundles import skill_files
from scripts.bench_library.startup import AGENTS

DIGEST = "0123456789ab"
HOME_MNT = Path(".local", "share", "acxfs", "mnt")  # under the home, as the library's
WHOLE = "one link, ~/.agents/skills -> mnt/<view>/"  # the skills directory itself is the link
LAYOUTS: dict[str, tuple[Callable[[str], str], bool] | None] = {  # real path, under home?
    "plain copies": None,
    "links, mnt/<publisher>/<id>/<version>-<digest>/<skill>": (
        lambda s: f"io.github.bench/{s}/1.0.0-{DIGEST}/{s}", True),
    "links, mnt/<publisher>+<id>@<version>-<digest>/<skill>": (
        lambda s: f"io.github.bench+{s}@1.0.0-{DIGEST}/{s}", True),
    "links, <short path>/<skill>": (lambda s: s, False),
    WHOLE: None,
}


def lay_out(root: Path, n: int) -> dict[str, Path]:
    """Each layout's home under `root`, its N skills in place; name -> home."""
    homes = {}
    for index, (name, how) in enumerate(LAYOUTS.items()):
        home = root / str(index) / "home"
        skills = home / ".agents" / "skills"
        if name == WHOLE:
            (home / HOME_MNT / "@view").mkdir(parents=True)
            skills.parent.mkdir()
            os.symlink(home / HOME_MNT / "@view", skills)
        else:
            skills.mkdir(parents=True)
        for number in range(1, n + 1):
            skill = f"bench-skill-{number:04d}"
            if how is None:
                where = skills / skill
            else:
                real, under_home = how
                where = (home / HOME_MNT if under_home else root / str(index) / "m") / real(skill)
            for rel, data in skill_files(skill, number).items():
                (where / rel).parent.mkdir(parents=True, exist_ok=True)
                (where / rel).write_bytes(data)
            if how is not None:
                os.symlink(where, skills / skill)
        (root / str(index) / "project").mkdir()
        homes[name] = home
    return homes


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python3 -m scripts.bench_library.link_layouts",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--skills", type=int, default=200, metavar="N")
    parser.add_argument("--rounds", type=int, default=9, metavar="R")
    args = parser.parse_args(argv)
    problem = runs.agent_problem("codex")
    if problem:
        print(f"link_layouts: Codex cannot run here: {problem}", file=sys.stderr)
        return 2
    start = next(agent for agent in AGENTS if agent.slug == "codex").run
    root = Path(tempfile.mkdtemp(prefix="acxfs-links-"))
    try:
        homes = lay_out(root, args.skills)
        took: dict[str, list[float]] = {name: [] for name in homes}
        for round_index in range(args.rounds + 1):  # the first round is not measured
            for name, home in homes.items():
                seconds, listed = start(home, home.parent / "project", 120.0,
                                        home.parent / "started")
                if len({skill for skill, _ in listed}) < args.skills:
                    print(f"link_layouts: {name}: Codex listed {len(listed)} of {args.skills}",
                          file=sys.stderr)
                    return 1
                if round_index:
                    took[name].append(seconds)
    finally:
        shutil.rmtree(root)
    floor = statistics.median(took["plain copies"])
    print(f"Codex warm start-up with {args.skills} skills, medians of {args.rounds} "
          f"interleaved rounds (load average {os.getloadavg()[0]:.1f})\n")
    print("| layout | start-up | over plain copies |\n|---|---:|---:|")
    for name, values in took.items():
        median = statistics.median(values)
        print(f"| {name} | {median:.3f} s | {median / floor:.2f}x |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
