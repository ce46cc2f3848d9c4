"""How acxfs speaks to OCI registries, through the real `acxfs push` and `acxfs add`: TLS only
against a CA it trusts; blobs redirected (distribution's `redirect` middleware) followed to
HTTPS without `Authorization`, and refused to plain HTTP or with bytes that are not the
layer's; and a loopback fake for what the real registry will not do: a manifest over 4 MiB,
wrong bytes for a digest, a stall, a redirected manifest, a paginated tag list; unknown
manifests, plain HTTP to a host that is not loopback and malformed references refused.
Every refusal is one line and installs nothing.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from tests.support import oci_client as oc
from tests.support.library import listing
from tests.support.oci_bundles import (
    IDENTITY,
    acx_manifest,
    cartridge,
    ok,
    refused,
    run,
    sha256,
)
from tests.support.oci_fake import FakeRegistry, oversized_manifest
from tests.support.registry import Registry, registry
from tests.support.servers import Reply, Scripted

pytestmark = [pytest.mark.slow, pytest.mark.fuse,
              pytest.mark.usefixtures("local_key", "library_stops")]

REPO = "skills/foo"
SHAPE = "oci://HOST[:PORT]/REPO[:TAG|@sha256:DIGEST]"


def installed() -> list[object]:
    return list(listing()["bundles"])


def blob_path(reg: Registry, bundle: Path) -> str:
    """The blob host's URL of the bundle's layer."""
    hexa = sha256(bundle.read_bytes()).removeprefix("sha256:")
    assert reg.blob_url is not None
    return f"{reg.blob_url.rstrip('/')}/docker/registry/v2/blobs/sha256/{hexa[:2]}/{hexa}/data"


def test_tls_without_the_registrys_ca_is_refused(tmp_path: Path) -> None:
    bundle = cartridge(tmp_path)
    with registry(tmp_path) as reg:
        for args in (("push", bundle, reg.ref(REPO)), ("add", reg.ref(REPO, tag="1.1.0"))):
            result = run(*args, env={"SSL_CERT_FILE": ""})
            assert result.returncode == 2, result.stderr
            [line] = result.stderr.splitlines()
            assert line.startswith(f"acxfs: error: {reg.base}/v2/{REPO}/manifests/1.1.0: "
                                   "certificate verify failed ("), line
        with pytest.raises(FileNotFoundError):
            reg.client().tags(REPO)
    assert installed() == []


def test_a_redirected_blob_is_fetched_without_authorization(tmp_path: Path) -> None:
    bundle = cartridge(tmp_path)
    with registry(tmp_path, auth="htpasswd", redirect=True) as reg:
        assert reg.blob_host is not None
        login = {**reg.env(), **reg.docker_config(tmp_path / "docker")}
        ok(run("push", bundle, reg.ref(REPO), env=login))
        seen = len(reg.blob_host.requests)
        ok(run("add", reg.ref(REPO, tag="1.1.0"), env=login))
        asked = reg.blob_host.requests[seen:]
        layer = blob_path(reg, bundle).split("/", 3)[3]
        assert [r.method for r in asked if r.path == "/" + layer] == ["GET"]
        assert all("Authorization" not in r.headers for r in reg.blob_host.requests)
    [bundle_row] = installed()
    assert isinstance(bundle_row, dict) and bundle_row["identity"] == IDENTITY


def test_a_blob_redirected_to_plain_http_is_refused(tmp_path: Path) -> None:
    bundle = cartridge(tmp_path)
    with registry(tmp_path, redirect=True) as reg:
        assert reg.blob_host is not None
        ok(run("push", bundle, reg.ref(REPO), env=reg.env()))
        reg.blob_host.redirect_to = "http://blobs.example.invalid/data"
        refused(run("add", reg.ref(REPO, tag="1.1.0"), env=reg.env()), 2,
                f"{blob_path(reg, bundle)}: redirected to http://blobs.example.invalid/data, "
                "not HTTPS")
    assert installed() == []


def test_a_blob_server_sending_other_bytes_is_refused(tmp_path: Path) -> None:
    bundle = cartridge(tmp_path)
    data = bundle.read_bytes()
    with registry(tmp_path, redirect=True) as reg:
        assert reg.blob_host is not None
        ok(run("push", bundle, reg.ref(REPO), env=reg.env()))
        reg.blob_host.lie = data[:-1] + bytes([data[-1] ^ 1])
        refused(run("add", reg.ref(REPO, tag="1.1.0"), env=reg.env()), 1,
                f"{reg.ref(REPO, tag='1.1.0')}: the layer's sha256 is "
                f"{sha256(reg.blob_host.lie)[7:]}, not the manifest's {sha256(data)[7:]}")
        reg.blob_host.lie = data[:1000]
        refused(run("add", reg.ref(REPO, tag="1.1.0"), env=reg.env()), 1,
                f"{blob_path(reg, bundle)}: 1000 bytes, not {len(data)}")
    assert installed() == []


def test_an_unknown_manifest_is_manifest_unknown_exit_1(tmp_path: Path) -> None:
    bundle = cartridge(tmp_path)
    with registry(tmp_path) as reg:
        ok(run("push", bundle, reg.ref(REPO), env=reg.env()))
        for ref in (reg.ref(REPO, tag="9.9.9"), reg.ref(REPO, digest="sha256:" + "0" * 64)):
            refused(run("add", ref, env=reg.env()), 1, f"{ref}: MANIFEST_UNKNOWN: manifest "
                    "unknown")
    assert installed() == []


# --- the fake: what distribution 2.8.2 will not do -------------------------------------------


def _artifact(fake: FakeRegistry, bundle: Path, version: str, tag: str | None = None) -> str:
    """Serve the bundle and its manifest as acxfs pushes them; the manifest's digest."""
    fake.add_blob(bundle.read_bytes())
    return fake.add_manifest(REPO, acx_manifest(bundle, version), tag=tag or version)


def test_a_manifest_over_4_mib_is_refused(tmp_path: Path) -> None:
    fake = FakeRegistry()
    fake.add_manifest(REPO, oversized_manifest(), tag="1.1.0")
    with fake.running() as base:
        refused(run("add", fake.ref(REPO, tag="1.1.0")), 1,
                f"{base}/v2/{REPO}/manifests/1.1.0: over 4 MiB")
    assert installed() == []


def test_a_manifest_whose_bytes_are_not_its_digest_is_refused(tmp_path: Path) -> None:
    fake = FakeRegistry()
    digest = _artifact(fake, cartridge(tmp_path), "1.1.0")
    other = acx_manifest(cartridge(tmp_path, "1.2.0"), "1.2.0")
    fake.lie[digest] = other
    with fake.running():
        ref = fake.ref(REPO, digest=digest)
        refused(run("add", ref), 1,
                f"{ref}: the registry sent a manifest whose sha256 is {sha256(other)[7:]}")
    assert installed() == []


def test_a_stalled_registry_gives_up_after_the_timeout(tmp_path: Path) -> None:
    fake = FakeRegistry()
    _artifact(fake, cartridge(tmp_path), "1.1.0")
    fake.stall.add("1.1.0")
    with fake.running() as base:
        started = time.monotonic()
        refused(run("add", fake.ref(REPO, tag="1.1.0"), "--timeout", "3"), 2,
                f"{base}/v2/{REPO}/manifests/1.1.0: no answer in 3 s")
        assert time.monotonic() - started < 15
    assert installed() == []


def test_a_redirected_manifest_is_not_followed(tmp_path: Path) -> None:
    fake = FakeRegistry()
    _artifact(fake, cartridge(tmp_path), "1.1.0")
    with fake.running() as base:
        elsewhere = f"{base}/v2/{REPO}/manifests/{'0' * 8}"
        fake.redirect["1.1.0"] = elsewhere
        refused(run("add", fake.ref(REPO, tag="1.1.0")), 2,
                f"{base}/v2/{REPO}/manifests/1.1.0: redirected to {elsewhere}; acxfs follows "
                "no redirects")
        assert not any(r.path.endswith("0" * 8) for r in fake.requests)
    assert installed() == []


def test_the_newest_release_tag_is_found_across_tag_pages(tmp_path: Path) -> None:
    """Six tags, two a page: 2.0.0 is on the second page; the pre-release and `latest` on the
    third.  Every tag but 2.0.0 names a manifest acxfs would refuse, so only picking 2.0.0
    installs anything."""
    fake = FakeRegistry(page_size=2)
    _artifact(fake, cartridge(tmp_path, "2.0.0"), "2.0.0")
    junk = oc.image_manifest([], artifact_type="application/vnd.example.other")
    for tag in ("0.1.0", "0.2.0", "1.0.0", "3.0.0-rc.1", "latest"):
        fake.add_manifest(REPO, junk, tag=tag)
    with fake.running():
        ok(run("add", fake.ref(REPO)))
        assert sum("/tags/list" in r.path for r in fake.requests) == 3
    [row] = installed()
    assert isinstance(row, dict) and (row["identity"], row["version"]) == (IDENTITY, "2.0.0")


def test_plain_http_to_a_host_that_is_not_loopback_is_refused_before_connecting(
        tmp_path: Path) -> None:
    """`127.1` reaches the loopback server below, yet is not a loopback name: acxfs must
    refuse it by name, never connecting."""
    server = Scripted(lambda path: Reply(200, b"{}"))
    with server.running() as base:
        port = base.rsplit(":", 1)[1].rstrip("/")
        for args in (("add", f"oci+http://127.1:{port}/{REPO}:1.1.0"),
                     ("push", cartridge(tmp_path), f"oci+http://127.1:{port}/{REPO}")):
            refused(run(*args), 2, f"oci+http://127.1:{port}/{REPO}: plain HTTP only for "
                    "loopback")
        assert server.requests == []
    assert installed() == []


@pytest.mark.parametrize("ref", [
    "oci://registry.example.com",
    "oci://registry.example.com/",
    "oci://registry.example.com/Skills/foo",
    "oci://registry.example.com/skills/foo:bad:tag",
    "oci://registry.example.com/skills/foo@sha256:abc",
    "oci://registry.example.com/skills//foo",
    "oci://-bad-host/skills/foo",
])
def test_a_malformed_reference_is_refused(ref: str) -> None:
    refused(run("add", ref), 2, f"{ref}: not an OCI reference ({SHAPE})")
    assert installed() == []
