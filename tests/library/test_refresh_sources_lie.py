"""A source that lies, fails, restarts or goes quiet changes nothing installed: an ACX registry
served by `python -m http.server` (its log shows each request and its status), each daemon's
timer shortened with `acxfs refresh --every 1s`.  A rolled-back index is refused as
`rollback:`, an outage shows as `unreachable:` while the daemon keeps serving and clears when
the source is back, a stale index shows as `stale:`, a withdrawal the source drops stays in
force, `refresh --every off` and `ACXFS_OFFLINE=1` send nothing, and the interval outlives
`down`/`up`.
"""

from __future__ import annotations

import json
import os
import time
import urllib.parse
from pathlib import Path

import pytest

from acxfs.library.updates.refresh import Round
from scripts.mounting import acxfs
from tests.support import acx_registry as reg
from tests.support.freshness import (
    NAME,
    bundle,
    daemon_log,
    install,
    link_of,
    publish,
    releases,
    wait_until,
)
from tests.support.projects import Machine, machines
from tests.support.servers import logged_requests, static_server

pytestmark = [pytest.mark.fuse, pytest.mark.slow]

T1 = "2026-11-20T00:00:00.000Z"
T2 = "2026-11-21T00:00:00.000Z"
T0 = "2026-11-10T00:00:00.000Z"  # before T1: a rolled-back index
QUIET = 4.0  # seconds (4 intervals) in which nothing may be asked: absence is the claim


def index_requests(log: Path) -> list[int]:
    return [status for path, status in logged_requests(log) if path == "/index.json"]


def daemon_alive(machine: Machine) -> bool:
    daemon = machine.listing()["daemon"]
    if daemon is None:
        return False
    try:
        os.kill(int(daemon["pid"]), 0)
    except OSError:
        return False
    return True


def served_text(machine: Machine) -> str:
    return (link_of(machine) / "SKILL.md").read_text()


def quiet_after(log: Path) -> int:
    """The number of requests in `log` once a check in flight has finished."""
    seen = -1
    while (now := len(logged_requests(log))) != seen:
        seen = now
        time.sleep(1.5)
    return seen


def test_a_lying_failing_or_restarted_source_changes_nothing(tmp_path: Path) -> None:
    root, log = tmp_path / "registry", tmp_path / "http.log"
    with machines(tmp_path, "one") as (one,):
        carts = releases(one, tmp_path, "1.0.0", "1.1.0")
        publish(root, [carts["1.0.0"]], status=[], at=T1)
        with static_server(root, log) as base:
            port = int(urllib.parse.urlsplit(base).port or 0)
            install(one, carts["1.0.0"].file, base, "--updates", "auto")
            target, text = os.readlink(link_of(one)), served_text(one)
            wait_until("an unchanged index answers 304", lambda: 304 in index_requests(log))
            assert bundle(one)["checkedAt"] is not None and bundle(one)["checkError"] is None

            # a rolled-back index: an older generatedAt, with a newer release an auto
            # bundle would take
            publish(root, [carts["1.0.0"], carts["1.1.0"]], status=[], at=T0)
            wait_until("the rollback shows", lambda: str(
                bundle(one)["checkError"]).startswith("rollback:"))
            b = bundle(one)
            assert (b["version"], b["updateAvailable"]) == ("1.0.0", None)
            assert os.readlink(link_of(one)) == target and served_text(one) == text
            publish(root, [carts["1.0.0"]], status=[], at=T1)
            wait_until("the index as it was clears the rollback",
                       lambda: bundle(one)["checkError"] is None)

        # an outage
        wait_until("the outage shows", lambda: str(
            bundle(one)["checkError"]).startswith("unreachable:"))
        assert served_text(one) == text and daemon_alive(one)
        assert bundle(one)["served"]
        with static_server(root, log, port=port):
            wait_until("the source back clears checkError",
                       lambda: bundle(one)["checkError"] is None)
            assert os.readlink(link_of(one)) == target and served_text(one) == text
            assert bundle(one)["version"] == "1.0.0" and daemon_alive(one)
            back = len(index_requests(log))
            wait_until("the restarted source answers 304 again",
                       lambda: 304 in index_requests(log)[back:])

            # a policy that wants an index at most 10 days old (this one is older)
            policy = one.root / "trust" / "policy.json"
            policy.write_text(json.dumps({"schemaVersion": "acxfs.policy/1",
                                          "maxIndexAgeDays": 10}))
            policy.chmod(0o600)
            wait_until("the old index shows as stale", lambda: str(
                bundle(one)["checkError"]).startswith("stale:"))
            assert os.readlink(link_of(one)) == target and served_text(one) == text
        assert "Traceback" not in daemon_log(one)


def test_a_withdrawal_stays_the_interval_outlives_down_up_and_off_sends_nothing(
        tmp_path: Path) -> None:
    root = tmp_path / "registry"
    logs = {"one": tmp_path / "one.log", "offline": tmp_path / "offline.log"}
    with machines(tmp_path, "one", "offline") as (one, offline):
        carts = releases(one, tmp_path, "1.0.0")
        publish(root, [carts["1.0.0"]], status=[], at=T1)
        with static_server(root, logs["one"]) as base, \
                static_server(root, logs["offline"]) as offline_base:
            install(one, carts["1.0.0"].file, base)
            install(offline, carts["1.0.0"].file, offline_base)
            wait_until("the offline machine checks while online",
                       lambda: len(index_requests(logs["offline"])) >= 2)
            offline.ok("down")
            up = acxfs("up", env={**offline.env, "ACXFS_OFFLINE": "1"}, timeout=90)
            assert up.returncode == 0, up

            one.ok("down")
            one.ok("up")
            assert one.listing()["refreshEvery"] == 1
            doc = json.loads((one.home / ".local/share/acxfs/library.json").read_text())
            assert doc["refreshEvery"] == 1

            publish(root, [carts["1.0.0"]], at=T2, status=[
                reg.status_entry(carts["1.0.0"], "withdrawn", "leaks credentials")])
            wait_until("the withdrawal unlinks it after down/up",
                       lambda: not os.path.lexists(link_of(one)))
            assert "leaks credentials" in bundle(one)["why"]

            # the source drops the withdrawal: it stays in force
            publish(root, [carts["1.0.0"]], status=[], at="2026-11-22T00:00:00.000Z")
            seen = len(index_requests(logs["one"]))
            wait_until("two more checks", lambda: len(index_requests(logs["one"])) >= seen + 2)
            b = bundle(one)
            assert not b["served"] and "leaks credentials" in b["why"]
            assert not os.path.lexists(link_of(one))

            # off: nothing more is asked; and the daemon that runs with ACXFS_OFFLINE=1 asks
            # nothing all along (watched over the same quiet time, and the settling before it)
            asked = len(logged_requests(logs["offline"]))
            one.ok("refresh", "--every", "off")
            assert one.listing()["refreshEvery"] is None
            before = quiet_after(logs["one"])
            time.sleep(QUIET)
            assert len(logged_requests(logs["one"])) == before
            assert len(logged_requests(logs["offline"])) == asked
            assert os.path.lexists(link_of(offline)) and bundle(offline)["served"]


def test_refresh_in_the_foreground_prints_what_changed_and_exits_1_when_an_update_waits(
        tmp_path: Path) -> None:
    root = tmp_path / "registry"
    with machines(tmp_path, "one") as (one,):
        carts = releases(one, tmp_path, "1.0.0", "1.1.0", "1.2.0")
        publish(root, [carts["1.0.0"]], status=[], at=T1)
        with static_server(root) as base:
            one.ok("trust", "add", carts["1.0.0"].file)
            one.ok("add", NAME, "--from", base)  # the daemon's own timer: 1 h away
            now = one.acxfs("refresh")
            assert now.returncode == 0 and "checked 1 of 1 sources" in now.stdout, now
            publish(root, [carts["1.0.0"], carts["1.1.0"]], at=T2, status=[
                reg.status_entry(carts["1.0.0"], "withdrawn", "leaks credentials")])
            now = one.acxfs("refresh")
            assert now.returncode == 1, now
            assert "withdrawn" in now.stdout and "links removed" in now.stdout
            assert f"{NAME}: 1.1.0 waits: acxfs update {NAME}" in now.stdout
            assert not os.path.lexists(link_of(one))
            as_json = one.acxfs("refresh", "--json")
            assert as_json.returncode == 1, as_json
            doc = json.loads(as_json.stdout)
            assert set(doc) == set(Round().to_doc())
            assert doc["waiting"] == {NAME: "1.1.0"} and doc["pulled"] == {}
            assert len(doc["checked"]) == 1
            assert doc["failed"] == {} and isinstance(doc["bytes"], int)
