"""Two hundred bundles are served by one daemon under 60 MiB of resident memory, before and
after every SKILL.md was read through the links.

Through the real `acxfs add` and the real daemon it starts; the figure is the daemon's own
VmRSS. Each served bundle keeps one connection, the one its check read it through: it must not
keep what the check needed (its prepared statements, its page cache), or 200 bundles cost
some 20 MiB more than one connection each.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from scripts.mounting import acxfs
from tests.conftest import Bulk
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


@pytest.mark.xdist_group("two-hundred-bundles")
def test_two_hundred_bundles_are_served_in_under_60_mib(two_hundred_bundles: Bulk) -> None:
    carts = two_hundred_bundles.cartridges
    names = sorted(two_hundred_bundles.skill_md)
    assert len(carts) == BUNDLES
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
