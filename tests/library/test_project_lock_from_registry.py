"""Project locks whose bundles come from a registry, through the real `acxfs` and `git`: the
lock records `{"registry": BASE, "path": PATH}`, a second HOME syncs a git clone of the
project from the recorded loopback registry (byte for byte the same tree through the links),
`sync --check` asks no server, and a mirror with other bytes at the path cannot substitute.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from tests.support import acx_registry as reg
from tests.support.projects import PUBLISHER, init_repo, machines, one_line_error, pack
from tests.support.projects import tree_through_links as tree
from tests.support.servers import Scripted, files_route

pytestmark = [pytest.mark.fuse, pytest.mark.slow]

NAME = f"{PUBLISHER}/research"
PATH = f"cartridges/{NAME}/1.1.0/cartridge.acx"


def test_two_homes_sync_one_lock_from_the_loopback_registry(tmp_path: Path) -> None:
    with machines(tmp_path, "one", "two", "three") as (one, two, three):
        one.ok("keygen")
        cart = pack(one, tmp_path, "research", "1.1.0", "expertise-designer")
        root = reg.build(tmp_path / "registry",
                         [reg.Packed(PUBLISHER, "research", "1.1.0", cart)], status=[])
        server = Scripted(files_route(root))
        with server.running() as base:
            origin = init_repo(one, tmp_path / "origin")
            one.ok("add", "--project", origin, NAME, "--from", base)
            (entry,) = json.loads((origin / "acxfs.lock").read_text())["bundles"]
            assert entry["source"] == {"registry": base, "path": PATH}
            one.git("add", "-A", cwd=origin)
            one.git("commit", "-qm", "skills", cwd=origin)

            two.ok("trust", "add", cart)
            clone = tmp_path / "clone"
            two.git("clone", "-q", origin, clone, cwd=tmp_path)
            asked = len(server.seen)
            check = two.acxfs("sync", "--check", cwd=clone)
            assert check.returncode == 1 and "bundle missing" in check.stdout, check
            assert len(server.seen) == asked  # --check uses no network
            assert "matches acxfs.lock (1 bundles, 1 skills)" in two.ok("sync", cwd=clone)
            assert server.seen[asked:] == [f"/{PATH}"]
            assert tree(clone) == tree(origin) and len(tree(clone)) == 4

            mirror = tmp_path / "mirror"
            shutil.copytree(root, mirror)
            other = pack(one, tmp_path / "other", "research", "1.1.0", "expertise-designer")
            (mirror / PATH).write_bytes(other.read_bytes())
            three.ok("trust", "add", cart)
            clone3 = tmp_path / "clone3"
            three.git("clone", "-q", origin, clone3, cwd=tmp_path)
            message = one_line_error(three.acxfs("sync", "--from", mirror, cwd=clone3), 1)
        assert message.startswith(f"acxfs: error: {mirror / PATH}: sha256 ")
        assert message.endswith(f"not the lock's {entry['sha256']}; a mirror cannot substitute")
        assert not (clone3 / ".claude").exists()


def test_a_lock_from_a_directory_registry_records_no_base(tmp_path: Path) -> None:
    with machines(tmp_path, "one") as (one,):
        one.ok("keygen")
        cart = pack(one, tmp_path, "research", "1.1.0", "expertise-designer")
        root = reg.build(tmp_path / "registry",
                         [reg.Packed(PUBLISHER, "research", "1.1.0", cart)], status=[])
        project = init_repo(one, tmp_path / "p")
        one.ok("add", "--project", project, NAME, "--from", root)
        (entry,) = json.loads((project / "acxfs.lock").read_text())["bundles"]
        assert entry["source"] == {"registry": None, "path": PATH}


@pytest.mark.parametrize(("source", "problem"), [
    ({"registry": "http://192.0.2.1/reg/", "path": PATH},
     "bundles[0].source: BASE: not an https:// URL ending in / (plain http:// only for "
     "loopback)"),
    ({"registry": None, "path": "cartridges/io.github.me/other/1.1.0/cartridge.acx"},
     "bundles[0].source.path: not cartridges/<publisher>/<id>/<version>/cartridge.acx of the "
     "entry"),
    ({"azphalt": "https://pkgs.example.com/", "id": NAME, "version": "2.0.0"},
     "bundles[0].source: id and version are not the entry's"),
])
def test_a_lock_source_that_is_not_its_entrys_is_refused(
        tmp_path: Path, source: dict[str, object], problem: str) -> None:
    with machines(tmp_path, "one") as (one,):
        one.ok("keygen")
        cart = pack(one, tmp_path, "research", "1.1.0", "expertise-designer")
        root = reg.build(tmp_path / "registry",
                         [reg.Packed(PUBLISHER, "research", "1.1.0", cart)], status=[])
        project = init_repo(one, tmp_path / "p")
        one.ok("add", "--project", project, NAME, "--from", root)
        lock = project / "acxfs.lock"
        doc = json.loads(lock.read_text())
        doc["bundles"][0]["source"] = source
        lock.write_text(json.dumps(doc))
        message = one_line_error(one.acxfs("sync", "--check", cwd=project), 2)
        assert message == f"acxfs: error: {lock}: {problem}"


def test_sync_obeys_policy_and_offline(tmp_path: Path) -> None:
    with machines(tmp_path, "one", "two") as (one, two):
        one.ok("keygen")
        cart = pack(one, tmp_path, "research", "1.1.0", "expertise-designer")
        root = reg.build(tmp_path / "registry",
                         [reg.Packed(PUBLISHER, "research", "1.1.0", cart)], status=[])
        with Scripted(files_route(root)).running() as base:
            origin = init_repo(one, tmp_path / "origin")
            one.ok("add", "--project", origin, NAME, "--from", base)
            one.git("add", "-A", cwd=origin)
            one.git("commit", "-qm", "skills", cwd=origin)
            two.ok("trust", "add", cart)
            clone = tmp_path / "clone"
            two.git("clone", "-q", origin, clone, cwd=tmp_path)
            offline = one_line_error(two.acxfs("sync", "--offline", cwd=clone), 2)
            assert offline == f"acxfs: error: {NAME} 1.1.0 needs a download from {base}" \
                f"{PATH}; offline"
            trust = two.root / "trust"
            (trust / "policy.json").write_text(json.dumps(
                {"schemaVersion": "acxfs.policy/1", "sources": [str(root)], "files": False}))
            barred = one_line_error(two.acxfs("sync", cwd=clone), 1)
            assert barred == f"acxfs: error: {trust}/policy.json: source {base} is not allowed"
            folder = tmp_path / "vendor"
            folder.mkdir()
            files = one_line_error(two.acxfs("sync", "--from", folder, cwd=clone), 1)
            assert files == f"acxfs: error: {trust}/policy.json: local files are not allowed"
            assert "matches acxfs.lock" in two.ok("sync", "--from", root, cwd=clone)
