"""`add --project`, `remove --project` and `sync` killed (`kill -9`, through
ACXFS_TEST_KILL_AT) at each step: the next command leaves the old project (killed before the
intent was written) or finishes the change (after it): links, exclude lines, lock and state
all agree, and `sync --check` says the project matches its lock.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.projects import Machine, exclude_lines, init_repo, links_in, machines, pack

pytestmark = [pytest.mark.fuse, pytest.mark.slow]

BEFORE_INTENT = ("checked", "served")
LINKS = {".agents/skills/expertise-designer", ".claude/skills/expertise-designer"}
LINES = ["/.agents/skills/expertise-designer", "/.claude/skills/expertise-designer"]


def _killed(machine: Machine, step: str, *args: object, cwd: Path | None = None) -> None:
    result = machine.acxfs(*args, cwd=cwd, kill_at=step)
    assert result.returncode == -9, (step, result.stdout, result.stderr)
    machine.ok("list")  # any command finishes the change first


def _matches(machine: Machine, repo: Path) -> None:
    result = machine.acxfs("sync", "--check", cwd=repo)
    assert result.returncode == 0, (result.stdout, result.stderr)


@pytest.mark.parametrize("step", [*BEFORE_INTENT, "intent", "link", "exclude", "lock", "commit",
                                  "cleanup"])
def test_add_project_killed_at_each_step(tmp_path: Path, step: str) -> None:
    with machines(tmp_path, "one") as (one,):
        one.ok("keygen")
        cart = pack(one, tmp_path, "research", "1.0.0", "expertise-designer")
        repo = init_repo(one, tmp_path / "repo")
        _killed(one, f"project-add:{step}", "add", "--project", repo, cart)
        if step in BEFORE_INTENT:
            assert not (repo / "acxfs.lock").exists() and not links_in(repo)
            assert not list(one.store.iterdir())
            assert one.listing()["projects"] == []
            return
        assert set(links_in(repo)) == LINKS
        assert exclude_lines(repo) == LINES
        assert "expertise-designer" in (repo / "acxfs.lock").read_text()
        assert "Release 1.0.0." in (repo / ".claude/skills/expertise-designer/SKILL.md").read_text()
        _matches(one, repo)


@pytest.mark.parametrize("step", ["intent", "unlink", "exclude", "lock", "commit", "cleanup"])
def test_remove_project_entry_killed_at_each_step(tmp_path: Path, step: str) -> None:
    with machines(tmp_path, "one") as (one,):
        one.ok("keygen")
        keep = pack(one, tmp_path, "tools", "1.0.0", "lint-helper")
        cart = pack(one, tmp_path, "research", "1.0.0", "expertise-designer")
        repo = init_repo(one, tmp_path / "repo")
        one.ok("add", "--project", repo, keep, cart)
        _killed(one, f"project-remove:{step}", "remove", "--project", repo,
                "io.github.me/research")
        assert set(links_in(repo)) == {".agents/skills/lint-helper", ".claude/skills/lint-helper"}
        assert exclude_lines(repo) == ["/.agents/skills/lint-helper", "/.claude/skills/lint-helper"]
        assert "expertise-designer" not in (repo / "acxfs.lock").read_text()
        assert len(list(one.store.iterdir())) == 1
        _matches(one, repo)


@pytest.mark.parametrize("step", ["intent", "unlink", "exclude", "commit", "cleanup"])
def test_remove_project_alone_killed_at_each_step(tmp_path: Path, step: str) -> None:
    with machines(tmp_path, "one") as (one,):
        one.ok("keygen")
        cart = pack(one, tmp_path, "research", "1.0.0", "expertise-designer")
        repo = init_repo(one, tmp_path / "repo")
        one.ok("add", "--project", repo, cart)
        lock = (repo / "acxfs.lock").read_bytes()
        _killed(one, f"project-remove:{step}", "remove", "--project", repo)
        assert not links_in(repo) and exclude_lines(repo) == []
        assert (repo / "acxfs.lock").read_bytes() == lock
        assert one.listing()["projects"] == [] and not list(one.store.iterdir())


@pytest.mark.parametrize("step", [*BEFORE_INTENT, "intent", "link", "exclude", "commit",
                                  "cleanup"])
def test_sync_killed_at_each_step(tmp_path: Path, step: str) -> None:
    with machines(tmp_path, "one", "two") as (one, two):
        one.ok("keygen")
        cart = pack(one, tmp_path, "research", "1.0.0", "expertise-designer")
        origin = init_repo(one, tmp_path / "origin")
        one.ok("add", "--project", origin, cart)
        one.git("add", "-A", cwd=origin)
        one.git("commit", "-qm", "lock", cwd=origin)
        two.ok("trust", "add", cart)
        clone = tmp_path / "clone"
        two.git("clone", "-q", origin, clone, cwd=tmp_path)
        _killed(two, f"sync:{step}", "sync", "--from", tmp_path, cwd=clone)
        if step in BEFORE_INTENT:
            assert not links_in(clone) and not list(two.store.iterdir())
            assert two.acxfs("sync", "--check", cwd=clone).returncode == 1
            two.ok("sync", "--from", tmp_path, cwd=clone)  # and it can be done again
        assert set(links_in(clone)) == LINKS
        assert exclude_lines(clone) == LINES
        assert "Release 1.0.0." in (clone / ".agents/skills/expertise-designer/SKILL.md") \
            .read_text()
        _matches(two, clone)
        assert two.git("status", "--porcelain", cwd=clone) == ""
