"""A lock acxfs will not follow, refused with one line and nothing linked: an entry whose
sha256, manifest or keyid was changed, a duplicate key, an unknown field, merge conflict
markers, another schema, a signer this machine does not trust, a lower version added to the
project, and an agent a project has no directory for.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from tests.support.projects import (
    Machine,
    init_repo,
    links_in,
    machines,
    one_line_error,
    pack,
)

pytestmark = [pytest.mark.fuse, pytest.mark.slow]


def _locked_clone(tmp_path: Path, one: Machine, two: Machine) -> tuple[Path, Path, Path]:
    """A project with one bundle added by `one`, cloned for `two` (who trusts its signer),
    and the directory holding the bundle."""
    one.ok("keygen")
    cart = pack(one, tmp_path, "research", "1.1.0", "expertise-designer")
    origin = init_repo(one, tmp_path / "origin")
    one.ok("add", "--project", origin, cart)
    one.git("add", "-A", cwd=origin)
    one.git("commit", "-qm", "lock", cwd=origin)
    vendor = tmp_path / "vendor"
    vendor.mkdir()
    (vendor / cart.name).write_bytes(cart.read_bytes())
    two.ok("trust", "add", cart)
    clone = tmp_path / "clone"
    two.git("clone", "-q", origin, clone, cwd=tmp_path)
    return origin, clone, vendor


def _edit(lock: Path, old: str, new: str) -> None:
    text = lock.read_text()
    assert old in text
    lock.write_text(text.replace(old, new, 1))


@pytest.mark.parametrize("field", ["sha256", "manifest", "keyid"])
def test_sync_refuses_a_lock_entry_whose_field_was_changed(tmp_path: Path, field: str) -> None:
    with machines(tmp_path, "one", "two") as (one, two):
        _, clone, vendor = _locked_clone(tmp_path, one, two)
        lock = clone / "acxfs.lock"
        value = json.loads(lock.read_text())["bundles"][0][field]
        forged = value[:-4] + ("0000" if not value.endswith("0000") else "1111")
        _edit(lock, value, forged)
        line = one_line_error(two.acxfs("sync", "--project", clone, "--from", vendor), 1)
        assert re.fullmatch(rf"acxfs: error: {clone}/acxfs\.lock: io\.github\.me/research: "
                            rf"{field} differs \(lock {forged}, bundle \S+.*\)", line), line
        assert not links_in(clone)
        assert not two.store.exists() or not list(two.store.iterdir())


@pytest.mark.parametrize(("old", "new", "message"), [
    ('"bytes": ', '"bytes": 1, "bytes": ', "not strict JSON (duplicate key 'bytes')"),
    ('"bytes": ', '"signedBy": "me", "bytes": ', "bundles[0].signedBy: unknown field"),
    ('"acxfs.lock/1"', '"acxfs.lock/2"', "schema: not acxfs.lock/1"),
    ('"source": {', '"source": {"dir": "/home/me", ', "bundles[0].source: not "),
    ('"file": "', '"file": "../', "bundles[0].source.file: not a bare file name"),
])
def test_sync_refuses_a_malformed_lock(tmp_path: Path, old: str, new: str, message: str) -> None:
    with machines(tmp_path, "one", "two") as (one, two):
        _, clone, vendor = _locked_clone(tmp_path, one, two)
        _edit(clone / "acxfs.lock", old, new)
        for args in (("sync", "--from", vendor), ("sync", "--check")):
            line = one_line_error(two.acxfs(*args, cwd=clone), 2)
            assert line.startswith(f"acxfs: error: {clone}/acxfs.lock: {message}"), line
        assert not links_in(clone)


def test_sync_refuses_a_lock_with_merge_conflict_markers(tmp_path: Path) -> None:
    with machines(tmp_path, "one", "two") as (one, two):
        _, clone, vendor = _locked_clone(tmp_path, one, two)
        lock = clone / "acxfs.lock"
        text = lock.read_text()
        lock.write_text(f"<<<<<<< HEAD\n{text}=======\n{text}>>>>>>> other\n")
        line = one_line_error(two.acxfs("sync", "--from", vendor, cwd=clone), 2)
        assert line == (f"acxfs: error: {clone}/acxfs.lock has merge conflict markers; "
                        "resolve them (acxfs never merges a lock)")
        assert not links_in(clone)


def test_sync_on_a_machine_that_does_not_trust_the_signer_is_refused(tmp_path: Path) -> None:
    with machines(tmp_path, "one", "two", "three") as (one, two, three):
        _, _, vendor = _locked_clone(tmp_path, one, two)
        clone = tmp_path / "third-clone"
        three.git("clone", "-q", tmp_path / "origin", clone, cwd=tmp_path)
        line = one_line_error(three.acxfs("sync", "--from", vendor, cwd=clone), 4)
        assert "acxfs.lock confers no trust: pin the signer (acxfs trust add)" in line
        assert not links_in(clone)
        assert not three.store.exists() or not list(three.store.iterdir())
        check = three.acxfs("sync", "--check", cwd=clone)
        assert check.returncode == 1 and "bundle missing" in check.stdout


def test_add_project_refuses_a_lower_version_than_the_lock_names(tmp_path: Path) -> None:
    with machines(tmp_path, "one") as (one,):
        one.ok("keygen")
        old = pack(one, tmp_path, "research", "1.0.0", "expertise-designer")
        new = pack(one, tmp_path, "research", "1.1.0", "expertise-designer")
        repo = init_repo(one, tmp_path / "repo")
        one.ok("add", "--project", repo, new)
        lock = (repo / "acxfs.lock").read_bytes()
        links = links_in(repo)
        line = one_line_error(one.acxfs("add", "--project", repo, old), 1)
        assert line.startswith("acxfs: error: rollback refused: io.github.me/research 1.0.0 is "
                               f"older than 1.1.0 in {repo}/acxfs.lock"), line
        assert (repo / "acxfs.lock").read_bytes() == lock and links_in(repo) == links
        out = one.ok("add", "--project", repo, old, "--allow-downgrade")
        assert f"io.github.me/research: 1.1.0 -> 1.0.0 in {repo}/acxfs.lock" in out


def test_add_project_refuses_an_agent_without_a_project_directory(tmp_path: Path) -> None:
    with machines(tmp_path, "one") as (one,):
        one.ok("keygen")
        cart = pack(one, tmp_path, "research", "1.0.0", "expertise-designer")
        repo = init_repo(one, tmp_path / "repo")
        line = one_line_error(one.acxfs("add", "--project", repo, "--agent", "codex", cart), 2)
        assert line == "acxfs: error: --project links only for the agents and claude directories"
        assert not (repo / "acxfs.lock").exists() and not links_in(repo)


def test_add_project_refuses_while_the_project_does_not_match_its_lock(tmp_path: Path) -> None:
    with machines(tmp_path, "one", "two") as (one, two):
        _, clone, _ = _locked_clone(tmp_path, one, two)
        other = pack(one, tmp_path, "tools", "1.0.0", "lint-helper")
        before = (clone / "acxfs.lock").read_bytes()
        line = one_line_error(two.acxfs("add", "--project", clone, other), 1)
        assert line == (f"acxfs: error: {clone} does not match {clone}/acxfs.lock; run acxfs "
                        f"sync --project {clone} first")
        assert (clone / "acxfs.lock").read_bytes() == before and not links_in(clone)


def test_a_link_path_git_tracks_is_refused(tmp_path: Path) -> None:
    with machines(tmp_path, "one") as (one,):
        one.ok("keygen")
        cart = pack(one, tmp_path, "research", "1.0.0", "expertise-designer")
        repo = init_repo(one, tmp_path / "repo")
        tracked = repo / ".claude" / "skills" / "expertise-designer"
        tracked.mkdir(parents=True)
        (tracked / "SKILL.md").write_text("committed by hand\n")
        one.git("add", "-A", cwd=repo)
        one.git("commit", "-qm", "a committed skill", cwd=repo)
        (tracked / "SKILL.md").unlink()
        tracked.rmdir()  # gone from the work tree, still in git's index
        line = one_line_error(one.acxfs("add", "--project", repo, cart), 1)
        assert line.endswith(f"(tracked by git: git rm -r --cached {tracked})"), line
        assert not (repo / "acxfs.lock").exists() and not links_in(repo)
