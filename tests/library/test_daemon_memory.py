"""Two hundred bundles are served by one daemon under 60 MiB of resident memory, before and
after every SKILL.md was read through the links.

Through the real `acxfs add` and the real daemon it starts; the figure is the daemon's own
VmRSS. Each served bundle keeps one connection, the one its check read it through: it must not
keep what the check needed (its prepared statements, its page cache), or 200 bundles cost
some 20 MiB more than one connection each.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from scripts.mounting import acxfs
from tests.conftest import CliResult
from tests.support.agent_setup import write_skill
from tests.support.demo import PUBLISHER
from tests.support.library import agent_dirs, listing, ok

pytestmark = [pytest.mark.fuse, pytest.mark.slow, pytest.mark.usefixtures("library_stops",
                                                                          "local_key")]

BUNDLES = 200
BOUND_MIB = 60.0  # the library's target for 200 bundles (docs/performance.md)


def rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text(encoding="ascii").splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise AssertionError(f"no VmRSS for {pid}")


def test_two_hundred_bundles_are_served_in_under_60_mib(
        tmp_path: Path, run_cli: Callable[..., CliResult]) -> None:
    names = [f"memory-skill-{i:03d}" for i in range(BUNDLES)]
    carts = []
    for name in names:  # packed in this process: the same `acxfs pack`, without 200 start-ups
        skill = write_skill(tmp_path / "src", name, f"Probe {name} of the daemon's memory.")
        (skill / "references").mkdir()
        (skill / "references" / "guide.md").write_text(f"How to use {name}.\n" * 40)
        out = tmp_path / "carts" / f"{name}.acx"
        out.parent.mkdir(exist_ok=True)
        packed = run_cli("pack", skill, "-o", out, "--publisher", PUBLISHER)
        assert packed.code == 0, packed.err
        carts.append(out)
    ok(acxfs("add", *carts, timeout=180))
    ok(acxfs("down"))
    ok(acxfs("up", timeout=120))  # a daemon that did nothing but check and serve them all
    doc = listing()
    assert len(doc["bundles"]) == BUNDLES and all(b["served"] for b in doc["bundles"])
    pid = int(doc["daemon"]["pid"])
    after_up = rss_mib(pid)
    for name in names:
        assert f"name: {name}" in (agent_dirs()[1] / name / "SKILL.md").read_text()
    after_reads = rss_mib(pid)
    assert after_up < BOUND_MIB and after_reads < BOUND_MIB, (after_up, after_reads)
