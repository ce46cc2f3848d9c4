"""One round reads each source's index once, however many bundles it updates from it: two
`auto` bundles from one ACX registry (served by `python -m http.server`, whose log shows
each request) both move in a round that asks `/index.json` once.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support import acx_registry as reg
from tests.support.freshness import NAME, SKILL, bundle, publish, releases
from tests.support.projects import PUBLISHER, machines, pack
from tests.support.servers import logged_requests, static_server

pytestmark = [pytest.mark.fuse, pytest.mark.slow]

T1 = "2026-11-20T00:00:00.000Z"
T2 = "2026-11-21T00:00:00.000Z"
OTHER = f"{PUBLISHER}/notes"


def test_two_auto_bundles_from_one_registry_cost_one_index_read(tmp_path: Path) -> None:
    root, log = tmp_path / "registry", tmp_path / "http.log"
    with machines(tmp_path, "one") as (one,):
        research = releases(one, tmp_path, "1.0.0", "1.1.0")
        notes = {v: reg.Packed(PUBLISHER, "notes", v,
                               pack(one, tmp_path / f"notes-{v}", "notes", v, "notes-skill"))
                 for v in ("1.0.0", "1.1.0")}
        publish(root, [research["1.0.0"], notes["1.0.0"]], status=[], at=T1)
        with static_server(root, log) as base:
            one.ok("trust", "add", research["1.0.0"].file)
            for identity in (NAME, OTHER):  # the daemon's own timer: 1 h away
                one.ok("add", identity, "--from", base, "--updates", "auto")
            publish(root, [*research.values(), *notes.values()], status=[], at=T2)
            before = len(logged_requests(log))
            result = one.acxfs("refresh")
            assert result.returncode == 0, result
            asked = [path for path, _ in logged_requests(log)[before:]]
        assert asked.count("/index.json") == 1, asked
        assert bundle(one, NAME)["version"] == "1.1.0"
        assert bundle(one, OTHER)["version"] == "1.1.0"
        assert (one.home / ".claude" / "skills" / SKILL).exists()
