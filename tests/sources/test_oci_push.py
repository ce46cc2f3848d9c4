"""`acxfs push BUNDLE oci://HOST/REPO[:TAG]` against the real distribution registry: the one
manifest form per bundle (a packed cartridge, the real azphalt package), byte for byte; a second
push names the same digest and writes nothing; what `verify` refuses is never pushed; a version
tag is the signed version and never moves; an extra tag does; the DSSE envelope is attached as a
referrer through the `sha256-<hex>` fallback index (no duplicate, no other referrer dropped);
and stock `oras` reads what acxfs wrote.
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import oras.client
import pytest

from tests.support import oci_client as oc
from tests.support.oci_bundles import (
    AZP,
    AZP_ID,
    DSSE,
    EMPTY_DIGEST,
    IDENTITY,
    INDEX,
    MANIFEST,
    acx_manifest,
    azp_manifest,
    cartridge,
    envelope_of,
    ok,
    refused,
    run,
    sha256,
    verdict_line,
)
from tests.support.registry import Registry, registry

pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("local_key")]

REPO = "skills/foo"


def tags(reg: Registry, repo: str = REPO) -> list[str]:
    """The repository's tags ([] while it does not exist)."""
    try:
        return sorted(reg.client(reg.user if reg.auth else None).tags(repo))
    except FileNotFoundError:
        return []


def fallback(digest: str) -> str:
    return "sha256-" + digest.removeprefix("sha256:")


def test_push_writes_a_cartridge_as_the_issues_manifest_byte_for_byte(tmp_path: Path) -> None:
    bundle = cartridge(tmp_path)
    with registry(tmp_path) as reg:
        out = ok(run("push", bundle, reg.ref(REPO), env=reg.env()))
        expected = acx_manifest(bundle)
        digest = sha256(expected)
        assert out == f"oci://{reg.host}/{REPO}@{digest} {IDENTITY} 1.1.0\n"
        client = reg.client()
        assert client.get_manifest(REPO, "1.1.0", accept=MANIFEST) == expected
        assert client.get_manifest(REPO, digest, accept=MANIFEST) == expected
        assert client.get_blob(REPO, sha256(bundle.read_bytes())) == bundle.read_bytes()
        assert client.get_blob(REPO, EMPTY_DIGEST) == b"{}"
        assert tags(reg) == ["1.1.0", fallback(digest)]


def test_push_writes_the_azphalt_package_under_its_one_artifact_type(tmp_path: Path) -> None:
    ok(run("trust", "add", AZP))
    with registry(tmp_path) as reg:
        out = ok(run("push", AZP, reg.ref("skills/dev"), env=reg.env()))
        expected = azp_manifest()
        digest = sha256(expected)
        assert out == f"oci://{reg.host}/skills/dev@{digest} {AZP_ID} 1.0.0\n"
        assert reg.client().get_manifest("skills/dev", "1.0.0", accept=MANIFEST) == expected
        assert reg.client().get_blob("skills/dev", sha256(AZP.read_bytes())) == AZP.read_bytes()
        assert tags(reg, "skills/dev") == ["1.0.0"]  # an .azp signs inside: no referrer


def test_a_second_push_names_the_same_digest_and_writes_nothing(tmp_path: Path) -> None:
    """With a token registry: the first push logs in; the second has no credentials at all
    (anonymous tokens pull only), so any write it tried would be refused."""
    bundle = cartridge(tmp_path)
    with registry(tmp_path, auth="token") as reg:
        assert reg.tokens is not None
        login = reg.docker_config(tmp_path / "docker")
        first = ok(run("push", bundle, reg.ref(REPO), env={**reg.env(), **login}))
        before = tags(reg)
        asked = len(reg.tokens.requests)
        nobody = {**reg.env(), "DOCKER_CONFIG": str(tmp_path / "no-docker")}
        assert ok(run("push", bundle, reg.ref(REPO), env=nobody)) == first
        second = reg.tokens.requests[asked:]
        assert second and all(r.user is None and not r.authorization for r in second)
        assert tags(reg) == before


def _tamper(bundle: Path, out: Path) -> Path:
    out.write_bytes(bundle.read_bytes())
    with sqlite3.connect(out) as con:
        changed = con.execute("UPDATE sqlar SET data = CAST('# tampered' AS BLOB) "
                              "WHERE name LIKE 'rom/%SKILL.md'").rowcount
    assert changed
    return out


def test_a_tampered_cartridge_is_refused_with_its_verdict_and_nothing_is_pushed(
        tmp_path: Path) -> None:
    good = cartridge(tmp_path, "1.0.0")
    bad = _tamper(cartridge(tmp_path, "1.1.0"), tmp_path / "tampered.acx")
    code, line = verdict_line(bad)
    assert code == 5
    with registry(tmp_path) as reg:
        ok(run("push", good, reg.ref(REPO), env=reg.env()))
        before = tags(reg)
        refused(run("push", bad, reg.ref(REPO, tag="latest"), env=reg.env()), 5,
                f"{bad}: {line}; acxfs pushes only what verify accepts")
        assert tags(reg) == before


def test_an_untrusted_cartridge_is_refused_with_exit_4_and_nothing_is_pushed(
        tmp_path: Path) -> None:
    bundle = cartridge(tmp_path)
    stranger = {"ACXFS_TRUST_DIR": str(tmp_path / "empty-trust")}
    code, line = verdict_line(bundle, env=stranger)
    assert code == 4
    with registry(tmp_path) as reg:
        refused(run("push", bundle, reg.ref(REPO), env={**reg.env(), **stranger}), 4,
                f"{bundle}: {line}; acxfs pushes only what verify accepts")
        assert tags(reg) == []


def test_a_version_tag_other_than_the_signed_version_is_refused(tmp_path: Path) -> None:
    bundle = cartridge(tmp_path)
    with registry(tmp_path) as reg:
        wrong = reg.ref(REPO, tag="1.2.0")
        refused(run("push", bundle, wrong, env=reg.env()), 1,
                f"{wrong}: {bundle} is {IDENTITY} 1.1.0; a version tag is the signed version")
        assert tags(reg) == []
        ok(run("push", bundle, reg.ref(REPO, tag="1.1.0"), env=reg.env()))
        assert tags(reg)[0] == "1.1.0"


def test_a_version_tag_naming_another_manifest_is_immutable(tmp_path: Path) -> None:
    bundle = cartridge(tmp_path)
    with registry(tmp_path) as reg:
        client = reg.client()
        client.put_blob(REPO, b"{}")
        other = b"SQLite format 3\0 another cartridge"
        client.put_blob(REPO, other)
        planted = client.put_manifest(REPO, "1.1.0", oc.image_manifest(
            [oc.descriptor("application/vnd.acx.cartridge.layer.v1+sqlite", other)],
            artifact_type="application/vnd.acx.cartridge.v1"))
        ours = sha256(acx_manifest(bundle))
        refused(run("push", bundle, reg.ref(REPO, tag="latest"), env=reg.env()), 1,
                f"{reg.ref(REPO, tag='1.1.0')} already names {planted}, not {ours}; "
                "published versions are immutable")
        assert tags(reg) == ["1.1.0"]
        assert sha256(client.get_manifest(REPO, "1.1.0")) == planted


def test_an_extra_tag_moves_to_the_release_pushed_last(tmp_path: Path) -> None:
    old, new = cartridge(tmp_path, "1.0.0"), cartridge(tmp_path, "1.1.0")
    with registry(tmp_path) as reg:
        client = reg.client()
        ok(run("push", old, reg.ref(REPO, tag="latest"), env=reg.env()))
        assert client.get_manifest(REPO, "latest") == acx_manifest(old, "1.0.0")
        ok(run("push", new, reg.ref(REPO, tag="latest"), env=reg.env()))
        assert client.get_manifest(REPO, "latest") == acx_manifest(new, "1.1.0")
        assert client.get_manifest(REPO, "1.0.0") == acx_manifest(old, "1.0.0")
        assert {"1.0.0", "1.1.0", "latest"} <= set(tags(reg))


def test_the_dsse_envelope_is_a_referrer_in_the_fallback_tag_index(tmp_path: Path) -> None:
    bundle = cartridge(tmp_path)
    with registry(tmp_path) as reg:
        ok(run("push", bundle, reg.ref(REPO), env=reg.env()))
        client = reg.client()
        subject = acx_manifest(bundle)
        index = json.loads(client.get_manifest(REPO, fallback(sha256(subject)), accept=INDEX))
        assert index["mediaType"] == INDEX
        [entry] = index["manifests"]
        referrer = client.get_manifest(REPO, entry["digest"], accept=MANIFEST)
        assert entry == {"mediaType": MANIFEST, "digest": sha256(referrer),
                         "size": len(referrer), "artifactType": DSSE}
        doc = json.loads(referrer)
        envelope = envelope_of(bundle)
        assert doc["artifactType"] == DSSE
        assert doc["subject"] == {"mediaType": MANIFEST, "digest": sha256(subject),
                                  "size": len(subject)}
        assert doc["layers"] == [{"mediaType": DSSE, "digest": sha256(envelope),
                                  "size": len(envelope)}]
        assert client.get_blob(REPO, sha256(envelope)) == envelope
        assert client.referrers(REPO, sha256(subject)) == [entry]


def test_a_second_push_adds_no_duplicate_referrer(tmp_path: Path) -> None:
    bundle = cartridge(tmp_path)
    with registry(tmp_path) as reg:
        ok(run("push", bundle, reg.ref(REPO), env=reg.env()))
        where = fallback(sha256(acx_manifest(bundle)))
        once = reg.client().get_manifest(REPO, where, accept=INDEX)
        ok(run("push", bundle, reg.ref(REPO, tag="latest"), env=reg.env()))
        assert reg.client().get_manifest(REPO, where, accept=INDEX) == once
        assert len(json.loads(once)["manifests"]) == 1


def test_another_referrer_in_the_fallback_index_is_kept(tmp_path: Path) -> None:
    """The index a push finds holds only someone else's referrer (a cosign signature, with
    annotations acxfs knows nothing of): the push adds its own and keeps that one as it was."""
    bundle = cartridge(tmp_path)
    with registry(tmp_path) as reg:
        ok(run("push", bundle, reg.ref(REPO), env=reg.env()))
        client = reg.client()
        subject = acx_manifest(bundle)
        where = fallback(sha256(subject))
        ours = json.loads(client.get_manifest(REPO, where, accept=INDEX))["manifests"]
        signature = b'{"critical":{}}'
        client.put_blob(REPO, signature)
        theirs = oc.image_manifest(
            [oc.descriptor("application/vnd.dev.cosign.simplesigning.v1+json", signature)],
            artifact_type="application/vnd.dev.cosign.artifact.sig.v1+json",
            subject={"mediaType": MANIFEST, "digest": sha256(subject), "size": len(subject)})
        client.put_manifest(REPO, sha256(theirs), theirs)
        foreign = oc.descriptor(MANIFEST, theirs, artifactType=(
            "application/vnd.dev.cosign.artifact.sig.v1+json"),
            annotations={"dev.sigstore.cosign/note": "kept"})
        client.put_manifest(REPO, where, json.dumps({
            "schemaVersion": 2, "mediaType": INDEX, "manifests": [foreign],
            "annotations": {"org.example": "also kept"}}).encode(), INDEX)
        ok(run("push", bundle, reg.ref(REPO), env=reg.env()))
        index = json.loads(client.get_manifest(REPO, where, accept=INDEX))
        assert index["manifests"] == [foreign, *ours]
        assert index["annotations"] == {"org.example": "also kept"}


def test_oras_pulls_the_pushed_files_and_reads_the_referrer_tag(tmp_path: Path) -> None:
    bundle = cartridge(tmp_path)
    ok(run("trust", "add", AZP))
    with registry(tmp_path) as reg:
        ok(run("push", bundle, reg.ref(REPO), env=reg.env()))
        ok(run("push", AZP, reg.ref("skills/dev"), env=reg.env()))
        client = oras.client.OrasClient(hostname=reg.host, tls_verify=str(reg.ca))
        files = client.pull(target=f"{reg.host}/{REPO}:1.1.0", outdir=str(tmp_path / "o1"))
        assert files == [str(tmp_path / "o1" / "foo-1.1.0.acx")]
        assert Path(files[0]).read_bytes() == bundle.read_bytes()
        files = client.pull(target=f"{reg.host}/skills/dev:1.0.0", outdir=str(tmp_path / "o2"))
        assert files == [str(tmp_path / "o2" / f"{AZP_ID}-1.0.0.azp")]
        assert Path(files[0]).read_bytes() == AZP.read_bytes()
        subject = sha256(acx_manifest(bundle))
        index = client.get_manifest(f"{reg.host}/{REPO}:{fallback(subject)}",
                                    allowed_media_type=[INDEX])
        [entry] = index["manifests"]
        referrer = client.get_manifest(f"{reg.host}/{REPO}@{entry['digest']}")
        assert referrer["subject"]["digest"] == subject
        layer = referrer["layers"][0]["digest"]
        assert client.get_blob(f"{reg.host}/{REPO}", layer).content == envelope_of(bundle)
