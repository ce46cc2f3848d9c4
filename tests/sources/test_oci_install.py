"""`acxfs add` from an OCI registry, through the real `acxfs push`, `add`, `list` and the real
distribution registry (plain HTTP on loopback): by tag, by digest, the highest release tag;
what the registry may not make acxfs install (another signed version under a version tag,
another artifact type, a config that is not the empty descriptor, a lying layer size, another
identity, a re-pointed version tag, an untrusted signer), each refused in one line with the
library, store and links unchanged; the layer taken from the store; `--offline`; policy.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest

from tests.support import oci_client as oc
from tests.support.oci_library import (
    OciMachine,
    fake_with,
    holdings,
    link_targets,
    manifest_doc,
    oci_machines,
    plant,
    push,
    refused,
    retag,
)
from tests.support.projects import PUBLISHER, pack, skill_text
from tests.support.registry import Registry, registry

pytestmark = [pytest.mark.fuse, pytest.mark.slow]

REPO = "acx/research"
NAME = f"{PUBLISHER}/research"


def installed(machine: OciMachine) -> dict[str, dict[str, object]]:
    """`list --json`'s bundles by identity."""
    return {str(b["identity"]): b for b in machine.listing()["bundles"]}


def published(machine: OciMachine, tmp_path: Path, reg: Registry, *versions: str,
              skill: str = "alpha", artifact: str = "research",
              repo: str = REPO) -> dict[str, str]:
    """Each version of `artifact` packed and pushed by `machine`; version -> OCI manifest."""
    digests = {}
    for version in versions:
        cart = pack(machine, tmp_path / f"packs-{artifact}-{version}", artifact, version, skill)
        digests[version] = push(machine, cart, reg.ref(repo)).manifest
    return digests


def test_add_by_tag_links_into_the_daemon_and_lists_the_reference(tmp_path: Path) -> None:
    with registry(tmp_path, tls=False) as reg, oci_machines(tmp_path, "one") as (one,):
        one.ok("keygen")
        digests = published(one, tmp_path, reg, "1.1.0", "1.2.0")
        one.ok("add", reg.ref(REPO, tag="1.1.0"))
        bundle = installed(one)[NAME]
        assert (bundle["version"], bundle["source"]) == ("1.1.0", reg.ref(REPO))
        assert bundle["coordinate"] == f"1.1.0@{digests['1.1.0']}"
        assert bundle["reference"] == f"{reg.ref(REPO, tag='1.1.0')}@{digests['1.1.0']}"
        mnt = one.home / ".local" / "share" / "acxfs" / "mnt"
        for entry, target in link_targets(one).items():
            assert Path(target).parent.parent == mnt, (entry, target)
            assert Path(one.home / entry, "SKILL.md").read_text() == skill_text("alpha",
                                                                                "1.1.0")
        assert len(link_targets(one)) == 2
        assert bundle["reference"] in one.ok("list")


def test_add_by_digest_installs_that_manifest_and_lists_it_pinned(tmp_path: Path) -> None:
    with registry(tmp_path, tls=False) as reg, oci_machines(tmp_path, "one") as (one,):
        one.ok("keygen")
        digests = published(one, tmp_path, reg, "1.1.0", "1.2.0")
        one.ok("add", reg.ref(REPO, digest=digests["1.1.0"]))
        bundle = installed(one)[NAME]
        assert (bundle["version"], bundle["coordinate"]) == ("1.1.0", f"@{digests['1.1.0']}")
        assert bundle["reference"] == reg.ref(REPO, digest=digests["1.1.0"])
        assert (one.home / ".claude/skills/alpha/SKILL.md").read_text() == skill_text(
            "alpha", "1.1.0")


def test_add_without_a_tag_takes_the_highest_semver_release_tag(tmp_path: Path) -> None:
    with registry(tmp_path, tls=False) as reg, oci_machines(tmp_path, "one") as (one,):
        one.ok("keygen")
        published(one, tmp_path, reg, "1.9.0", "1.10.0", "1.2.0", "2.0.0-rc.1")
        tags = [t for t in reg.client().tags(REPO) if not t.startswith("sha256-")]
        assert sorted(tags) == ["1.10.0", "1.2.0", "1.9.0", "2.0.0-rc.1"]
        one.ok("add", reg.ref(REPO))
        assert installed(one)[NAME]["version"] == "1.10.0"  # SemVer, not the text order
        one.ok("add", reg.ref(REPO, tag="2.0.0-rc.1"))  # a pre-release when named
        assert installed(one)[NAME]["version"] == "2.0.0-rc.1"


def test_a_repository_without_a_release_tag_is_refused(tmp_path: Path) -> None:
    with registry(tmp_path, tls=False) as reg, oci_machines(tmp_path, "one") as (one,):
        one.ok("keygen")
        published(one, tmp_path, reg, "1.0.0")
        client = reg.client()
        body = client.get_manifest(REPO, "1.0.0", accept=oc.OCI_MANIFEST)
        layer = manifest_doc(client, REPO, "1.0.0")["layers"][0]["digest"]  # type: ignore
        client.put_blob("acx/none", b"{}")
        client.put_blob("acx/none", client.get_blob(REPO, str(layer)))
        for tag in ("main", "latest", "2.0.0-rc.1"):
            client.put_manifest("acx/none", tag, body)
        message = refused(one, "add", reg.ref("acx/none"))
    assert message == f"{reg.ref('acx/none')} has no release tag (tags: 2.0.0-rc.1, latest, main)"


def test_a_version_tag_naming_another_signed_version_is_refused(tmp_path: Path) -> None:
    with registry(tmp_path, tls=False) as reg, oci_machines(tmp_path, "one") as (one,):
        one.ok("keygen")
        published(one, tmp_path, reg, "1.1.0")
        retag(reg.client(), REPO, "1.1.0", "1.2.0")
        message = refused(one, "add", reg.ref(REPO, tag="1.2.0"))
        assert message == f"{reg.ref(REPO, tag='1.2.0')} is signed as {NAME} 1.1.0"
        assert link_targets(one) == {}


def planted_refusals(client: oc.Client, doc: dict[str, object]) -> dict[str, tuple[str, str]]:
    """Manifests acxfs must refuse, planted beside a real one (`doc`): tag -> (the message's
    text after REF, the reason)."""
    cases: dict[str, tuple[str, str]] = {}
    other = {**doc, "artifactType": "application/vnd.agent.skill.v1+json"}
    plant(client, REPO, "1.3.0", other)
    cases["1.3.0"] = ("not an acxfs artifact (artifactType "
                      "application/vnd.agent.skill.v1+json)", "artifactType")
    config = b'{"architecture":"amd64","os":"linux"}'
    client.put_blob(REPO, config)
    image = {**doc, "config": oc.descriptor("application/vnd.oci.image.config.v1+json", config)}
    plant(client, REPO, "1.4.0", image)
    cases["1.4.0"] = ("manifest config: not the empty descriptor", "an image config")
    braces = b'{"a":1}'
    client.put_blob(REPO, braces)
    plant(client, REPO, "1.5.0", {**doc, "config": oc.descriptor(oc.EMPTY_CONFIG, braces)})
    cases["1.5.0"] = ("manifest config: not the empty descriptor", "other bytes as empty")
    return cases


def test_manifests_that_are_not_acxfs_artifacts_are_refused(tmp_path: Path) -> None:
    with registry(tmp_path, tls=False) as reg, oci_machines(tmp_path, "one") as (one,):
        one.ok("keygen")
        published(one, tmp_path, reg, "1.1.0", skill="beta", artifact="other", repo="acx/o")
        one.ok("add", reg.ref("acx/o"))  # something installed, so "nothing changed" means so
        published(one, tmp_path, reg, "1.1.0")
        client = reg.client()
        cases = planted_refusals(client, manifest_doc(client, REPO, "1.1.0"))
        for tag, (text, why) in cases.items():
            message = refused(one, "add", reg.ref(REPO, tag=tag))
            assert message == f"{reg.ref(REPO, tag=tag)}: {text}", why
        assert list(installed(one)) == [f"{PUBLISHER}/other"]


@pytest.mark.parametrize("delta", [100, -100])
def test_a_lying_layer_size_is_refused(tmp_path: Path, delta: int) -> None:
    with registry(tmp_path, tls=False) as reg, oci_machines(tmp_path, "one") as (one,):
        one.ok("keygen")
        published(one, tmp_path, reg, "1.1.0")
        client = reg.client()
        doc = manifest_doc(client, REPO, "1.1.0")
        layer = dict(doc["layers"][0])  # type: ignore[index]
        size = int(layer["size"])
        plant(client, REPO, "lying", {**doc, "layers": [{**layer, "size": size + delta}]})
        message = refused(one, "add", reg.ref(REPO, tag="lying"))
    url = f"http://{reg.host}/v2/{REPO}/blobs/{layer['digest']}"
    if delta > 0:
        assert message == f"{url}: {size} bytes, not {size + delta}"
    else:
        assert message == f"{url}: more than {size + delta} bytes, its stated size"


def test_another_identity_in_a_remembered_repository_is_refused(tmp_path: Path) -> None:
    with registry(tmp_path, tls=False) as reg, oci_machines(tmp_path, "one") as (one,):
        one.ok("keygen")
        published(one, tmp_path, reg, "1.0.0")
        one.ok("add", reg.ref(REPO, tag="1.0.0"))
        published(one, tmp_path, reg, "2.0.0", artifact="bar", skill="beta")
        message = refused(one, "add", reg.ref(REPO, tag="2.0.0"))
        assert message == (f"{reg.ref(REPO, tag='2.0.0')} is signed as {PUBLISHER}/bar; "
                           f"{reg.ref(REPO)} carries {NAME}")
        assert list(installed(one)) == [NAME]


def test_a_repointed_version_tag_naming_another_signed_release_is_refused(
        tmp_path: Path) -> None:
    with registry(tmp_path, tls=False) as reg, oci_machines(tmp_path, "one") as (one,):
        one.ok("keygen")
        published(one, tmp_path, reg, "1.0.0")
        one.ok("add", reg.ref(REPO, tag="1.0.0"))
        signed = installed(one)[NAME]["manifest"]
        client = reg.client()
        doc = manifest_doc(client, REPO, "1.0.0")
        again = pack(one, tmp_path / "again", "research", "1.0.0", "alpha", "gamma")
        layer = client.put_blob(REPO, again.read_bytes())
        plant(client, REPO, "1.0.0", {**doc, "layers": [{
            **doc["layers"][0], "digest": layer,  # type: ignore[index]
            "size": again.stat().st_size}]})
        message = refused(one, "add", reg.ref(REPO, tag="1.0.0"))
        found = re.fullmatch(
            rf"{re.escape(reg.ref(REPO))} changed {NAME} 1\.0\.0 \(signed manifest "
            rf"{signed}, now (sha256:[0-9a-f]{{64}})\); published versions are immutable",
            message)
        assert found and found.group(1) != signed, message


def test_the_same_signed_release_pushed_again_under_its_tag_installs_with_a_note(
        tmp_path: Path) -> None:
    with registry(tmp_path, tls=False) as reg, oci_machines(tmp_path, "one") as (one,):
        one.ok("keygen")
        first = published(one, tmp_path, reg, "1.0.0")["1.0.0"]
        one.ok("add", reg.ref(REPO, tag="1.0.0"))
        one.ok("remove", NAME)
        client = reg.client()
        doc = manifest_doc(client, REPO, "1.0.0")
        now = plant(client, REPO, "1.0.0", {**doc, "annotations": {"rebuilt": "yes"}})
        result = one.acxfs("add", reg.ref(REPO, tag="1.0.0"))
    assert result.returncode == 0, result
    assert (f"acxfs: note: {reg.ref(REPO, tag='1.0.0')} was pushed again ({first} is now "
            f"{now}); the signed release is the same") in result.stderr
    assert installed(one)[NAME]["coordinate"] == f"1.0.0@{now}"


def test_a_bundle_signed_by_an_untrusted_key_is_refused(tmp_path: Path) -> None:
    with registry(tmp_path, tls=False) as reg, \
            oci_machines(tmp_path, "author", "user") as (author, user):
        author.ok("keygen")
        cart = pack(author, tmp_path, "research", "1.0.0", "alpha")
        push(author, cart, reg.ref(REPO))
        before = holdings(user)
        result = user.acxfs("add", reg.ref(REPO, tag="1.0.0"))
        assert result.returncode == 4, result
        assert result.stderr.startswith(f"acxfs: error: {reg.ref(REPO, tag='1.0.0')}: "), result
        assert len(result.stderr.splitlines()) == 1, result.stderr
        assert holdings(user) == before
        user.ok("trust", "add", cart)
        user.ok("add", reg.ref(REPO, tag="1.0.0"))


def blob_gets(reg: Registry, layer: str) -> int:
    assert reg.blob_host is not None
    return sum(1 for r in reg.blob_host.requests
               if r.method == "GET" and r.path.endswith(f"/{layer[7:]}/data"))


def test_a_layer_the_store_holds_is_not_downloaded_again(tmp_path: Path) -> None:
    with registry(tmp_path, tls=True, redirect=True) as reg, \
            oci_machines(tmp_path, "one", extra=reg.env()) as (one,):
        one.ok("keygen")
        published(one, tmp_path, reg, "1.1.0", "1.2.0")
        one.ok("add", reg.ref(REPO, tag="1.1.0"))
        layer = str(installed(one)[NAME]["digest"])
        assert blob_gets(reg, f"sha256:{layer}") == 1
        one.ok("update")  # 1.2.0; 1.1.0 stays in the store as the previous revision
        assert installed(one)[NAME]["version"] == "1.2.0"
        one.ok("add", "--allow-downgrade", reg.ref(REPO, tag="1.1.0"))
        assert installed(one)[NAME]["version"] == "1.1.0"
        assert blob_gets(reg, f"sha256:{layer}") == 1


def test_offline_a_digest_whose_layer_the_store_holds_installs(tmp_path: Path) -> None:
    with oci_machines(tmp_path, "one", "two") as (one, two):
        with registry(tmp_path, tls=False) as reg:
            one.ok("keygen")
            digests = published(one, tmp_path, reg, "1.1.0", "1.2.0")
            one.ok("add", reg.ref(REPO, tag="1.1.0"))
            one.ok("update")
        # the registry is stopped: nothing below can reach it
        one.ok("add", "--offline", "--allow-downgrade", reg.ref(REPO, digest=digests["1.1.0"]))
        bundle = installed(one)[NAME]
        assert (bundle["version"], bundle["coordinate"]) == ("1.1.0", f"@{digests['1.1.0']}")
        assert (one.home / ".claude/skills/alpha/SKILL.md").read_text() == skill_text(
            "alpha", "1.1.0")
        tag = reg.ref(REPO, tag="1.1.0")
        assert refused(one, "add", "--offline", tag, code=2) == (
            f"{tag} needs a download from {reg.host}; offline")
        pinned = reg.ref(REPO, digest=digests["1.2.0"])
        assert refused(two, "add", "--offline", pinned, code=2) == (
            f"{pinned} needs a download from {reg.host}; offline")


def test_policy_sources_allow_oci_prefixes_by_whole_segments_before_any_connection(
        tmp_path: Path) -> None:
    with oci_machines(tmp_path, "one") as (one,):
        one.ok("keygen")
        cart = pack(one, tmp_path, "research", "1.0.0", "alpha")
        fake = fake_with(cart, "team/x", "1.0.0")
        fake.add_manifest("teamx/x", fake.manifests["team/x", "1.0.0"][0], tag="1.0.0")
        with fake.running() as base:
            host = base.split("://", 1)[1]
            policy = one.root / "trust" / "policy.json"
            policy.write_text(json.dumps({"schemaVersion": "acxfs.policy/1",
                                          "sources": [f"oci+http://{host}/team"]}))
            os.chmod(policy, 0o644)
            for repo in ("teamx/x", "teamx"):
                ref = f"oci+http://{host}/{repo}:1.0.0"
                message = refused(one, "add", ref)
                assert message == f"{policy}: source oci+http://{host}/{repo} is not allowed"
            assert fake.requests == []
            one.ok("add", f"oci+http://{host}/team/x:1.0.0")
            assert fake.requests != []
        assert installed(one)[NAME]["source"] == f"oci+http://{host}/team/x"


def test_a_tag_in_from_names_the_release_and_may_not_contradict_the_version(
        tmp_path: Path) -> None:
    with registry(tmp_path, tls=False) as reg, oci_machines(tmp_path, "one") as (one,):
        one.ok("keygen")
        digests = published(one, tmp_path, reg, "1.0.0", "1.1.0", "1.2.0")
        one.ok("add", NAME, "--from", reg.ref(REPO, tag="1.0.0"))
        assert installed(one)[NAME]["coordinate"] == f"1.0.0@{digests['1.0.0']}"
        message = refused(one, "add", f"{NAME}@1.2.0", "--from", reg.ref(REPO, tag="1.1.0"),
                          code=2)
        assert message == (f"{NAME}@1.2.0 --from {reg.ref(REPO, tag='1.1.0')}: name the "
                           "version once (NAME@VERSION or REPO:TAG)")
        one.ok("add", NAME, "--from", reg.ref(REPO, digest=digests["1.1.0"]))
        assert installed(one)[NAME]["coordinate"] == f"@{digests['1.1.0']}"
        one.ok("add", reg.ref(REPO, tag="1.2.0"))
        assert installed(one)[NAME]["version"] == "1.2.0"
