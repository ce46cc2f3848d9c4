"""The library keeps bundles from an azphalt repository current with no command typed: the
loopback Repository API the azphalt tests use (the real signed skill package), several HOMEs
installed from it, each daemon's timer shortened with `acxfs refresh --every 1s`.  A version
the repository's `/revocations` feed revokes loses its links in every HOME; a newer version
the repository yanked is never installed by `auto`, nor shown as waiting.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from tests.sources.test_azphalt_repository import AZP, ID, Repository
from tests.support.freshness import bundle, daemon_log, wait_until
from tests.support.projects import Machine, machines
from tests.support.servers import Scripted

pytestmark = [pytest.mark.fuse, pytest.mark.slow]

NEWER = f"/packages/{ID}/versions/1.1.0/download"


class YankedNewer(Repository):
    """The repository with a 1.1.0 listed after 1.0.0, yanked."""

    def detail(self) -> dict[str, Any]:
        body = super().detail()
        body.update(version="1.1.0", latest="1.1.0")
        body["versions"].append({"version": "1.1.0", "publishedAt": "2026-02-01T00:00:00.000Z",
                                 "size": len(self.blob), "digest": self.digest,
                                 "yanked": True})
        return body


def install(machine: Machine, base: str, *extra: str) -> list[Path]:
    """ID installed from the repository at `base`, checked every 2 s; its skill links."""
    machine.ok("trust", "add", AZP)
    machine.ok("add", ID, "--from", f"azphalt+{base}", *extra)
    machine.ok("refresh", "--every", "1s")
    skills = bundle(machine, ID)["skills"]
    links = [machine.home / agent / "skills" / s for agent in (".agents", ".claude")
             for s in skills]
    assert links and all((link / "SKILL.md").is_file() for link in links)
    return links


def test_a_revocation_in_the_feed_unlinks_it_in_every_home(tmp_path: Path) -> None:
    repo = Repository()
    server = Scripted(repo.route)
    with machines(tmp_path, "one", "two", "three") as homes, server.running() as base:
        links = {home.root.name: install(home, base) for home in homes}
        wait_until("each home read the feed",
                   lambda: server.seen.count("/revocations") >= len(homes))
        repo.revocations = [{"id": ID, "version": "1.0.0", "reason": "malware",
                             "revokedAt": "2026-11-30T09:30:00Z"}]
        for home in homes:
            wait_until(f"{home.root.name} unlinks the revoked version", lambda home=home: not any(
                os.path.lexists(link) for link in links[home.root.name]))  # type: ignore[misc]
        for home in homes:
            b = bundle(home, ID)
            assert not b["served"] and "revoked" in b["why"] and "malware" in b["why"]
            assert "revoked" in daemon_log(home)


def test_a_yanked_newer_version_is_never_installed_by_auto(tmp_path: Path) -> None:
    repo = YankedNewer()
    server = Scripted(repo.route)
    with machines(tmp_path, "auto") as (auto,), server.running() as base:
        links = install(auto, base, "--updates", "auto")
        detail = f"/packages/{ID}"
        wait_until("three checks of the package",
                   lambda: sum(p.split("?")[0] == detail for p in server.seen) >= 4)
        b = bundle(auto, ID)
        assert (b["version"], b["updateAvailable"], b["checkError"]) == ("1.0.0", None, None)
        assert b["updates"] == "auto" and b["checkedAt"] is not None
        assert NEWER not in server.seen
        assert all((link / "SKILL.md").is_file() for link in links)
