"""A project's revisions are its own: one identity at 1.0.0 in a project and 1.1.0 in the user
library, each served and linked; removing the user one keeps the project's link readable;
`update --project` re-points only the project's links; `up` unlinks a project bundle whose
signer is no longer trusted.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.support.projects import init_repo, links_in, machines, pack

pytestmark = [pytest.mark.fuse, pytest.mark.slow]


def test_one_identity_at_two_versions_in_a_project_and_the_user_library(tmp_path: Path) -> None:
    with machines(tmp_path, "one") as (one,):
        one.ok("keygen")
        old = pack(one, tmp_path, "research", "1.0.0", "expertise-designer")
        new = pack(one, tmp_path, "research", "1.1.0", "expertise-designer")
        newer = pack(one, tmp_path, "research", "1.2.0", "expertise-designer")
        repo = init_repo(one, tmp_path / "repo")
        one.ok("add", new)  # the user library: 1.1.0, its floor 1.1.0
        one.ok("add", "--project", repo, old)  # the floor does not apply to a project
        user_link = one.home / ".claude" / "skills" / "expertise-designer"
        project_link = repo / ".claude" / "skills" / "expertise-designer"
        assert "Release 1.1.0." in (user_link / "SKILL.md").read_text()
        assert "Release 1.0.0." in (project_link / "SKILL.md").read_text()
        doc = one.listing()
        assert doc["floors"]["io.github.me/research"]["version"] == "1.1.0"
        (project,) = doc["projects"]
        assert project["dir"] == str(repo) and project["bundles"][0]["version"] == "1.0.0"

        user_before = os.readlink(user_link)
        out = one.ok("update", "--project", repo, newer)
        assert f"io.github.me/research: 1.0.0 -> 1.2.0 in {repo}/acxfs.lock" in out
        assert os.readlink(user_link) == user_before  # only project links re-pointed
        assert "Release 1.2.0." in (project_link / "SKILL.md").read_text()
        assert "Release 1.1.0." in (user_link / "SKILL.md").read_text()
        assert one.listing()["floors"]["io.github.me/research"]["version"] == "1.1.0"

        one.ok("remove", "io.github.me/research")  # the user one; the project keeps its own
        assert not user_link.is_symlink()
        assert "Release 1.2.0." in (project_link / "SKILL.md").read_text()
        assert set(links_in(repo)) == {".agents/skills/expertise-designer",
                                       ".claude/skills/expertise-designer"}


def test_update_project_of_an_identity_the_lock_does_not_name_is_refused(tmp_path: Path) -> None:
    with machines(tmp_path, "one") as (one,):
        one.ok("keygen")
        cart = pack(one, tmp_path, "research", "1.0.0", "expertise-designer")
        repo = init_repo(one, tmp_path / "repo")
        result = one.acxfs("update", "--project", repo, cart)
        assert result.returncode == 1, result.stderr
        assert f"is not in {repo}/acxfs.lock" in result.stderr
        assert not (repo / "acxfs.lock").exists() and not links_in(repo)


def test_up_unlinks_a_project_bundle_whose_signer_is_no_longer_trusted(tmp_path: Path) -> None:
    with machines(tmp_path, "one", "two") as (one, two):
        one.ok("keygen")
        cart = pack(one, tmp_path, "research", "1.0.0", "expertise-designer")
        pinned = two.ok("trust", "add", cart).split()[1]
        repo = init_repo(two, tmp_path / "repo")
        two.ok("add", "--project", repo, cart)
        assert links_in(repo)
        two.ok("trust", "remove", pinned)
        two.ok("up", "--reload")
        assert not links_in(repo)
        (project,) = two.listing()["projects"]
        assert project["bundles"][0]["served"] is False
        check = two.acxfs("sync", "--check", cwd=repo)
        assert check.returncode == 1 and "acxfs.lock confers no trust" in check.stdout
