"""The library keeps bundles from an OCI repository current with no command typed: the real
distribution registry (plain HTTP on loopback, its access log showing each request and its
status), two HOMEs installed from `REPO:latest`, each daemon's timer shortened with
`acxfs refresh --every 1s`.  An unchanged tag costs a `304` (the registry gives each manifest
an ETag and answers `If-None-Match`); when `latest` is pushed again to a newer release, the
`auto` bundle moves to it and the `notify` one shows it waiting (under the tag's name: a
tag that names no version is shown as `update --check` shows it).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.freshness import bundle, wait_until
from tests.support.oci_library import OciMachine, oci_machines, push
from tests.support.projects import PUBLISHER, pack, skill_text
from tests.support.registry import Registry, registry
from tests.support.servers import logged_requests

pytestmark = [pytest.mark.fuse, pytest.mark.slow]

REPO = "acx/research"
NAME = f"{PUBLISHER}/research"
TAG = f"/v2/{REPO}/manifests/latest"


def served(machine: OciMachine) -> str:
    return (machine.home / ".claude" / "skills" / "alpha" / "SKILL.md").read_text()


def tag_answers(reg: Registry) -> list[int]:
    """The status of each manifest GET of `latest` the registry logged."""
    return [status for path, status in logged_requests(reg.work / "registry.log")
            if path == TAG]


def test_latest_pushed_again_moves_auto_and_shows_notify(tmp_path: Path) -> None:
    with registry(tmp_path, tls=False, access_log=True) as reg, \
            oci_machines(tmp_path, "auto", "notify") as (auto, notify):
        auto.ok("keygen")
        carts = {v: pack(auto, tmp_path / f"packs-{v}", "research", v, "alpha")
                 for v in ("1.0.0", "1.1.0")}
        push(auto, carts["1.0.0"], reg.ref(REPO, tag="latest"))
        notify.ok("trust", "add", carts["1.0.0"])
        auto.ok("add", reg.ref(REPO, tag="latest"), "--updates", "auto")
        notify.ok("add", reg.ref(REPO, tag="latest"))
        for machine in (auto, notify):
            machine.ok("refresh", "--every", "1s")
        wait_until("an unchanged tag answers 304", lambda: 304 in tag_answers(reg))
        assert bundle(auto)["checkError"] is None and bundle(auto)["checkedAt"] is not None

        push(auto, carts["1.1.0"], reg.ref(REPO, tag="latest"))
        wait_until("auto moves to 1.1.0", lambda: bundle(auto)["version"] == "1.1.0")
        assert served(auto) == skill_text("alpha", "1.1.0")
        assert bundle(auto)["previous"]["version"] == "1.0.0"
        # a tag that names no version waits under its name, as `update --check` shows it
        wait_until("notify shows the moved tag waiting",
                   lambda: bundle(notify)["updateAvailable"] is not None)
        assert f"waits: acxfs update {NAME}" in notify.ok("list")
        assert bundle(notify)["version"] == "1.0.0"
        assert served(notify) == skill_text("alpha", "1.0.0")
