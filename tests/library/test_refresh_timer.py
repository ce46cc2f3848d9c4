"""The library keeps itself current with no command typed: several HOMEs installed from one
registry served by `python -m http.server` (its log shows every request and its status),
each daemon's timer shortened with `acxfs refresh --every 1s`; the tests only publish at the
source and wait, with a deadline, for what every machine shows.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.support import acx_registry as reg
from tests.support.freshness import (
    DEADLINE,
    NAME,
    SKILL,
    bundle,
    install,
    link_of,
    publish,
    releases,
    wait_until,
)
from tests.support.projects import Machine, init_repo, machines
from tests.support.servers import logged_requests, static_server

pytestmark = [pytest.mark.fuse, pytest.mark.slow]


@pytest.fixture
def cartridges(tmp_path: Path) -> Callable[[Machine], dict[str, reg.Packed]]:
    def made(signer: Machine) -> dict[str, reg.Packed]:
        return releases(signer, tmp_path, "1.0.0", "1.1.0")
    return made


def test_a_revocation_at_the_source_unlinks_it_in_every_home(
        tmp_path: Path, cartridges: Callable[[Machine], dict[str, reg.Packed]]) -> None:
    root, log = tmp_path / "registry", tmp_path / "http.log"
    with machines(tmp_path, "one", "two", "three") as homes:
        carts = cartridges(homes[0])
        publish(root, [carts["1.0.0"]], status=[], at="2026-11-20T00:00:00.000Z")
        with static_server(root, log) as base:
            for home in homes:
                install(home, carts["1.0.0"].file, base)
                assert link_of(home).is_symlink() and (link_of(home) / "SKILL.md").is_file()
            publish(root, [carts["1.0.0"]], at="2026-11-21T00:00:00.000Z", status=[
                reg.status_entry(carts["1.0.0"], "withdrawn", "leaks credentials")])
            published = time.monotonic()
            for home in homes:
                wait_until(f"{home.root.name} unlinks the withdrawn release",
                           lambda home=home: not os.path.lexists(link_of(home)))  # type: ignore[misc]
            took = time.monotonic() - published
            for home in homes:
                b = bundle(home)
                assert not b["served"] and "withdrawn" in b["why"]
                assert "leaks credentials" in b["why"]
                assert not os.path.exists(b["path"])  # no longer served, at once
                assert "withdrawn" in (home.root / "home/.local/share/acxfs/daemon.log").read_text()
                # The index is unchanged from here on: the next checks cost no body.
                wait_until("an unchanged index answered 304", lambda: 304 in {
                    status for path, status in logged_requests(log) if path == "/index.json"})
        assert took < DEADLINE


def test_auto_moves_notify_waits_and_off_stays(
        tmp_path: Path, cartridges: Callable[[Machine], dict[str, reg.Packed]]) -> None:
    root = tmp_path / "registry"
    with machines(tmp_path, "auto", "notify", "off") as (auto, notify, off):
        carts = cartridges(auto)
        publish(root, [carts["1.0.0"]], status=[], at="2026-11-20T00:00:00.000Z")
        with static_server(root) as base:
            install(auto, carts["1.0.0"].file, base, "--updates", "auto")
            install(notify, carts["1.0.0"].file, base)
            install(off, carts["1.0.0"].file, base)
            off.ok("refresh", "--updates", "off", NAME)
            before = {m.root.name: os.readlink(link_of(m)) for m in (notify, off)}
            publish(root, [carts["1.0.0"], carts["1.1.0"]], status=[],
                    at="2026-11-21T00:00:00.000Z")
            wait_until("auto installs 1.1.0", lambda: bundle(auto)["version"] == "1.1.0")
            wait_until("notify shows 1.1.0 waiting",
                       lambda: bundle(notify)["updateAvailable"] == "1.1.0")
            assert "Release 1.1.0." in (link_of(auto) / "SKILL.md").read_text()
            assert bundle(auto)["previous"]["version"] == "1.0.0"
            assert bundle(auto)["updateAvailable"] is None
            wait_until("off was checked after the release",
                       lambda: bundle(off)["checkedAt"] is not None and
                       bundle(notify)["checkedAt"] is not None)
            assert bundle(notify)["version"] == "1.0.0"
            assert os.readlink(link_of(notify)) == before["notify"]
            assert f"1.1.0 waits: acxfs update {NAME}" in notify.ok("list")
            assert (bundle(off)["version"], bundle(off)["updateAvailable"]) == ("1.0.0", None)
            assert bundle(off)["updates"] == "off"
            assert os.readlink(link_of(off)) == before["off"]
            now = notify.acxfs("refresh")
            assert now.returncode == 1 and f"{NAME}: 1.1.0 waits" in now.stdout, now


def test_a_project_keeps_its_lock_and_loses_a_revoked_release(
        tmp_path: Path, cartridges: Callable[[Machine], dict[str, reg.Packed]]) -> None:
    root = tmp_path / "registry"
    with machines(tmp_path, "one") as (one,):
        carts = cartridges(one)
        publish(root, [carts["1.0.0"]], status=[], at="2026-11-20T00:00:00.000Z")
        with static_server(root) as base:
            project = init_repo(one, tmp_path / "project")
            one.ok("add", "--project", project, NAME, "--from", base)
            one.ok("refresh", "--every", "1s")
            lock = (project / "acxfs.lock").read_bytes()
            linked = project / ".claude" / "skills" / SKILL
            target = os.readlink(linked)
            publish(root, [carts["1.0.0"], carts["1.1.0"]], status=[],
                    at="2026-11-21T00:00:00.000Z")
            wait_until("the release was seen", lambda: one.listing()["lastCheck"] is not None
                       and "index.json" in (root / "index.json").name and _checked_after(one))
            assert os.readlink(linked) == target  # a project never moves past its lock
            publish(root, [carts["1.0.0"], carts["1.1.0"]], at="2026-11-22T00:00:00.000Z",
                    status=[reg.status_entry(carts["1.0.0"], "withdrawn", "compromised key")])
            wait_until("the project link goes", lambda: not os.path.lexists(linked))
            assert (project / "acxfs.lock").read_bytes() == lock
            check = one.acxfs("sync", "--check", cwd=project)
            assert check.returncode == 1, check
            assert f"{NAME} 1.0.0: {NAME} 1.0.0 is withdrawn" in check.stdout
            sync = one.acxfs("sync", cwd=project)
            assert sync.returncode == 1 and "withdrawn" in sync.stderr, sync
            assert not os.path.lexists(linked)


def _checked_after(machine: Machine) -> bool:
    checks = json.loads((machine.home / ".local/share/acxfs/checks.json").read_text())
    return any(s["checked_at"] for s in checks["sources"].values())
