"""A project's committed acxfs.lock reproduced on a second machine from a git clone, through
the real `acxfs` and `git` commands: the first machine adds bundles to the project, the
second pins the signer, clones, syncs from a directory of the bundles, and sees the same
verified bytes through the same link paths; a bundle removed and pulled is unlinked there,
and `remove --project` alone forgets the project.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

import pytest

from tests.support.projects import (
    exclude_lines,
    init_repo,
    links_in,
    machines,
    pack,
    tree_through_links,
)

pytestmark = [pytest.mark.fuse, pytest.mark.slow]


def test_add_project_writes_the_lock_links_and_exclude_lines_and_git_stages_only_the_lock(
        tmp_path: Path) -> None:
    with machines(tmp_path, "one", "two") as (one, two):
        one.ok("keygen")
        cart = pack(one, tmp_path, "research", "1.1.0", "expertise-designer")
        two.ok("trust", "add", cart)
        repo_one = init_repo(one, tmp_path / "repo-one")
        repo_two = init_repo(two, tmp_path / "repo-two")
        out = one.ok("add", "--project", repo_one, cart)
        assert "expertise-designer: io.github.me/research 1.1.0 -> " in out
        two.ok("add", "--project", repo_two, cart)
        data = (repo_one / "acxfs.lock").read_bytes()
        assert data == (repo_two / "acxfs.lock").read_bytes()  # no path of either machine
        doc = json.loads(data)
        assert data == (json.dumps(doc, indent=2, sort_keys=True) + "\n").encode()
        (entry,) = doc["bundles"]
        assert entry == {
            "identity": "io.github.me/research", "format": "acx", "version": "1.1.0",
            "sha256": hashlib.sha256(cart.read_bytes()).hexdigest(),
            "bytes": cart.stat().st_size, "manifest": entry["manifest"],
            "keyid": entry["keyid"], "publisher": "io.github.me",
            "skills": ["expertise-designer"], "agents": ["agents", "claude"],
            "source": {"file": cart.name}}
        assert entry["manifest"].startswith("sha256:") and entry["keyid"].startswith("ed25519:")
        assert set(links_in(repo_one)) == {".agents/skills/expertise-designer",
                                           ".claude/skills/expertise-designer"}
        assert (repo_one / ".claude/skills/expertise-designer/SKILL.md").read_text() \
            .startswith("---\nname: expertise-designer\n")
        assert exclude_lines(repo_one) == ["/.agents/skills/expertise-designer",
                                           "/.claude/skills/expertise-designer"]
        assert not (one.home / ".claude" / "skills").exists()  # the user library: untouched
        assert not (one.home / ".agents" / "skills").exists()
        one.git("add", "-A", cwd=repo_one)
        staged = one.git("diff", "--cached", "--name-only", cwd=repo_one).split()
        assert staged == ["README.md", "acxfs.lock"]


def test_a_clone_on_a_second_machine_syncs_the_same_bytes_and_follows_a_removal(
        tmp_path: Path) -> None:
    with machines(tmp_path, "one", "two") as (one, two):
        one.ok("keygen")
        research = pack(one, tmp_path, "research", "1.1.0", "expertise-designer")
        tools = pack(one, tmp_path, "tools", "2.0.0", "lint-helper", "test-helper")
        origin = init_repo(one, tmp_path / "origin")
        one.ok("add", "--project", origin, research, tools)
        one.git("add", "-A", cwd=origin)
        one.git("commit", "-qm", "skills", cwd=origin)
        vendor = tmp_path / "vendor"
        vendor.mkdir()
        for cart in (research, tools):
            (vendor / cart.name).write_bytes(cart.read_bytes())

        two.ok("trust", "add", research)
        clone = tmp_path / "clone"
        two.git("clone", "-q", origin, clone, cwd=tmp_path)
        check = two.acxfs("sync", "--project", clone, "--check")
        assert check.returncode == 1, (check.stdout, check.stderr)
        assert "io.github.me/research 1.1.0: bundle missing" in check.stdout
        assert "io.github.me/tools 2.0.0: bundle missing" in check.stdout
        assert not links_in(clone) and not two.store.exists()  # --check changed nothing
        out = two.ok("sync", "--project", clone, "--from", vendor)
        assert f"{clone}: matches acxfs.lock (2 bundles, 3 skills)" in out
        assert tree_through_links(clone) == tree_through_links(origin)  # byte for byte
        assert len(tree_through_links(clone)) == 12
        assert two.ok("sync", "--check", cwd=clone).endswith("(2 bundles, 3 skills)\n")
        again = two.ok("sync", cwd=clone)
        assert "linked" not in again
        assert two.git("status", "--porcelain", cwd=clone) == ""

        mine = clone / ".claude" / "skills" / "my-own"
        mine.mkdir()
        (mine / "SKILL.md").write_text("---\nname: my-own\ndescription: mine.\n---\n")
        one.ok("remove", "--project", origin, "lint-helper")  # a skill names its bundle
        one.git("commit", "-qam", "no tools", cwd=origin)
        two.git("pull", "-q", cwd=clone)
        assert two.acxfs("sync", "--check", cwd=clone).returncode == 1
        out = two.ok("sync", cwd=clone)
        assert f"unlinked {clone}/.claude/skills/test-helper" in out
        assert set(links_in(clone)) == {".agents/skills/expertise-designer",
                                        ".claude/skills/expertise-designer",
                                        ".claude/skills/my-own"}
        assert links_in(clone)[".claude/skills/my-own"] == "not a link"
        assert exclude_lines(clone) == ["/.agents/skills/expertise-designer",
                                        "/.claude/skills/expertise-designer"]
        assert two.ok("sync", "--check", cwd=clone)

        lock = (clone / "acxfs.lock").read_bytes()
        two.ok("remove", "--project", clone)
        assert set(links_in(clone)) == {".claude/skills/my-own"}
        assert (clone / "acxfs.lock").read_bytes() == lock
        assert exclude_lines(clone) == []
        assert two.listing()["projects"] == []
        assert two.git("status", "--porcelain", cwd=clone) == "?? .claude/\n"
        assert not os.listdir(two.store)  # no scope names the bundles any more
