"""Project locks whose bundles come from an OCI registry, through the real `acxfs push`, `add
--project`, `sync`, `git` and the real distribution registry: the lock records the repository,
the OCI manifest digest and the tag; HOMEs syncing a git clone from the TLS + htpasswd registry
get the same tree byte for byte through the links, also after the tag was re-pointed; a
`source.digest` naming another manifest is refused; `sync --check` uses no network; an
offline sync with an empty store is refused in one line.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
from pathlib import Path

import pytest

from scripts.bench_oci.registry import stop
from tests.support.oci_library import (
    OciMachine,
    fake_with,
    manifest_doc,
    oci_machines,
    plant,
    push,
)
from tests.support.projects import PUBLISHER, init_repo, one_line_error, pack
from tests.support.projects import tree_through_links as tree
from tests.support.registry import Registry, registry

pytestmark = [pytest.mark.fuse, pytest.mark.slow]

REPO = "acx/research"
NAME = f"{PUBLISHER}/research"


def entry_of(project: Path) -> dict[str, object]:
    (entry,) = json.loads((project / "acxfs.lock").read_text())["bundles"]
    assert isinstance(entry, dict)
    return entry


def test_add_project_records_the_repository_the_oci_manifest_and_the_tag(
        tmp_path: Path) -> None:
    with registry(tmp_path, tls=False) as reg, oci_machines(tmp_path, "one") as (one,):
        one.ok("keygen")
        cart = pack(one, tmp_path, "research", "1.1.0", "alpha")
        pushed = push(one, cart, reg.ref(REPO))
        by_tag = init_repo(one, tmp_path / "by-tag")
        one.ok("add", "--project", by_tag, reg.ref(REPO, tag="1.1.0"))
        entry = entry_of(by_tag)
        assert entry["source"] == {"oci": reg.ref(REPO), "digest": pushed.manifest,
                                   "tag": "1.1.0"}
        (project,) = one.listing()["projects"]
        (bundle,) = project["bundles"]
        layer = manifest_doc(reg.client(), REPO, "1.1.0")["layers"][0]["digest"]  # type: ignore
        sha256 = hashlib.sha256(cart.read_bytes()).hexdigest()
        assert entry["sha256"] == sha256 == str(layer)[7:]  # the file, the layer
        assert entry["manifest"] == bundle["manifest"] != pushed.manifest  # the signed one
        assert entry["bytes"] == cart.stat().st_size
        newest = init_repo(one, tmp_path / "newest")
        one.ok("add", "--project", newest, reg.ref(REPO))
        assert entry_of(newest)["source"] == entry["source"]
        by_digest = init_repo(one, tmp_path / "by-digest")
        one.ok("add", "--project", by_digest, reg.ref(REPO, digest=pushed.manifest))
        assert entry_of(by_digest)["source"] == {"oci": reg.ref(REPO),
                                                 "digest": pushed.manifest, "tag": None}


def same_through_links(one: Path, other: Path) -> None:
    """`diff -r` of each agent's skill directory, following the links into the daemons."""
    for agent in (".agents", ".claude"):
        result = subprocess.run(["diff", "-r", one / agent / "skills", other / agent / "skills"],
                                capture_output=True, text=True, timeout=60)
        assert result.returncode == 0, result.stdout + result.stderr
    assert tree(one) == tree(other) and len(tree(one)) == 4


def clone(machine: OciMachine, cart: Path, origin: Path, where: Path) -> Path:
    machine.ok("trust", "add", cart)
    machine.git("clone", "-q", origin, where, cwd=where.parent)
    return where


def repoint(reg: Registry, tag: str, cart: Path) -> str:
    """Point `tag` at another signed release (`cart`) with the raw client; the manifest."""
    client = reg.client(reg.user)
    doc = manifest_doc(client, REPO, tag)
    layer = client.put_blob(REPO, cart.read_bytes())
    return plant(client, REPO, tag, {**doc, "layers": [{
        **doc["layers"][0], "digest": layer, "size": cart.stat().st_size}]})  # type: ignore


def test_homes_sync_one_lock_from_a_tls_registry_with_credentials(tmp_path: Path) -> None:
    with registry(tmp_path, tls=True, auth="htpasswd") as reg:
        env = {**reg.env(), **reg.docker_config(tmp_path / "docker")}
        with oci_machines(tmp_path, "one", "two", "three", "four", "five", extra=env) as machines:
            one, two, three, four, five = machines
            one.ok("keygen")
            cart = pack(one, tmp_path, "research", "1.1.0", "alpha")
            pushed = push(one, cart, reg.ref(REPO))
            origin = init_repo(one, tmp_path / "origin")
            one.ok("add", "--project", origin, reg.ref(REPO, tag="1.1.0"))
            one.git("add", "-A", cwd=origin)
            one.git("commit", "-qm", "skills", cwd=origin)
            entry = entry_of(origin)

            copy = clone(two, cart, origin, tmp_path / "clone")
            check = two.acxfs("sync", "--check", cwd=copy)
            assert check.returncode == 1 and "bundle missing" in check.stdout, check
            assert "matches acxfs.lock (1 bundles, 1 skills)" in two.ok("sync", cwd=copy)
            same_through_links(origin, copy)

            other = pack(one, tmp_path / "other", "research", "1.1.0", "alpha", "gamma")
            moved = repoint(reg, "1.1.0", other)
            assert moved != pushed.manifest
            later = clone(three, cart, origin, tmp_path / "later")
            three.ok("sync", cwd=later)
            same_through_links(origin, later)  # the lock's bytes, not the tag's

            forged = tmp_path / "forged"
            shutil.copytree(later, forged, ignore=shutil.ignore_patterns(".agents", ".claude"))
            lock = json.loads((forged / "acxfs.lock").read_text())
            lock["bundles"][0]["source"]["digest"] = moved
            (forged / "acxfs.lock").write_text(json.dumps(lock, indent=2) + "\n")
            four.ok("trust", "add", cart)
            message = one_line_error(four.acxfs("sync", cwd=forged), 1)
            holds = manifest_doc(reg.client(reg.user), REPO, moved)["layers"][0]["digest"]  # type: ignore
            assert message == (
                f"acxfs: error: {forged}/acxfs.lock: {NAME}: sha256 differs (lock "
                f"{entry['sha256']}, {reg.ref(REPO, digest=moved)} holds "
                f"{str(holds)[7:]})")
            assert not (forged / ".claude").exists() and not four.store.exists()

            stop(reg.process)  # from here on, nothing can reach the registry
            assert two.ok("sync", "--check", cwd=copy).endswith("(1 bundles, 1 skills)\n")
            empty = clone(five, cart, origin, tmp_path / "empty")
            message = one_line_error(five.acxfs("sync", "--offline", cwd=empty), 2)
            assert message == (f"acxfs: error: {reg.ref(REPO, digest=pushed.manifest)} "
                               f"needs a download from {reg.host}; offline")
            assert not (empty / ".claude").exists() and not five.store.exists()


def test_sync_asks_each_from_repository_then_the_locks_own(tmp_path: Path) -> None:
    with registry(tmp_path / "a", tls=False) as origin_reg, \
            registry(tmp_path / "b", tls=False) as mirror_reg, \
            oci_machines(tmp_path, "one", "two", "three") as (one, two, three):
        one.ok("keygen")
        cart = pack(one, tmp_path, "research", "1.1.0", "alpha")
        pushed = push(one, cart, origin_reg.ref(REPO))
        origin = init_repo(one, tmp_path / "origin")
        one.ok("add", "--project", origin, origin_reg.ref(REPO, tag="1.1.0"))
        one.git("add", "-A", cwd=origin)
        one.git("commit", "-qm", "skills", cwd=origin)
        mirror = mirror_reg.ref(REPO)

        first = clone(two, cart, origin, tmp_path / "first")
        two.ok("sync", "--from", mirror, cwd=first)  # the mirror has none: the lock's origin
        same_through_links(origin, first)

        assert push(one, cart, mirror).manifest == pushed.manifest  # the same bytes
        stop(origin_reg.process)
        second = clone(three, cart, origin, tmp_path / "second")
        message = one_line_error(three.acxfs("sync", cwd=second), 2)
        assert message.startswith(f"acxfs: error: http://{origin_reg.host}/"), message
        three.ok("sync", "--from", mirror, cwd=second)
        same_through_links(origin, second)


def test_sync_from_a_repository_the_policy_does_not_allow_asks_nothing(tmp_path: Path) -> None:
    with oci_machines(tmp_path, "one", "two") as (one, two):
        one.ok("keygen")
        cart = pack(one, tmp_path, "research", "1.1.0", "alpha")
        fake = fake_with(cart, REPO, "1.1.0")
        with fake.running() as base:
            host = base.split("://", 1)[1]
            origin = init_repo(one, tmp_path / "origin")
            one.ok("add", "--project", origin, f"oci+http://{host}/{REPO}:1.1.0")
            one.git("add", "-A", cwd=origin)
            one.git("commit", "-qm", "skills", cwd=origin)
            asked = len(fake.requests)
            copy = clone(two, cart, origin, tmp_path / "copy")
            policy = two.root / "trust" / "policy.json"
            policy.write_text(json.dumps({"schemaVersion": "acxfs.policy/1",
                                          "sources": [f"oci+http://{host}/acx/research-x"]}))
            message = one_line_error(two.acxfs("sync", cwd=copy), 1)
            assert message == (f"acxfs: error: {policy}: source oci+http://{host}/{REPO} is "
                               "not allowed")
            assert len(fake.requests) == asked
            assert not (copy / ".claude").exists() and not two.store.exists()
