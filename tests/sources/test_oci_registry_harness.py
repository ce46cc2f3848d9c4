"""The OCI harness itself, against the real distribution registry (Debian's docker-registry):
every configuration starts and answers /v2/ as documented, the raw client pushes and reads an
ACX artifact, token and htpasswd auth behave as a real deployment, the redirect middleware's blob
host sees no credentials, oras-py pulls through it, the fake registry's knobs do what they say,
and stopping leaves no process.
"""

from __future__ import annotations

import json
import os
import socket
import ssl
import subprocess
import time
import urllib.error
import urllib.request
from pathlib import Path

import oras.client
import pytest

from tests.support import oci_client as oc
from tests.support.oci_fake import MIB, FakeRegistry, oversized_manifest
from tests.support.registry import Registry, binary, registry
from tests.support.servers import make_ca

pytestmark = [pytest.mark.slow]

REPO = "acx/demo"
LAYER = "application/vnd.acx.cartridge.layer.v1+sqlite"
ARTIFACT = "application/vnd.acx.cartridge.v1"
DSSE = "application/vnd.dsse.envelope.v1+json"
CARTRIDGE = b"SQLite format 3\0" + bytes(range(256)) * 8


def push_cartridge(client: oc.Client, tag: str = "1.0.0") -> tuple[str, bytes]:
    """Push the empty config, a cartridge layer and its manifest; (digest, manifest bytes)."""
    assert client.put_blob(REPO, b"{}") == oc.EMPTY_DIGEST
    client.put_blob(REPO, CARTRIDGE)
    manifest = oc.image_manifest(
        [oc.descriptor(LAYER, CARTRIDGE, annotations={
            "org.opencontainers.image.title": "cartridge.acx", "vnd.acx.spec-version": "0.1"})],
        artifact_type=ARTIFACT)
    return client.put_manifest(REPO, tag, manifest), manifest


def _raw(reg: Registry, path: str) -> tuple[int, str | None]:
    """A bare GET (no auth handling): its status and WWW-Authenticate."""
    context = ssl.create_default_context(cafile=str(reg.ca)) if reg.ca else None
    try:
        with urllib.request.urlopen(reg.base + path, timeout=10, context=context) as response:
            return response.status, response.headers.get("WWW-Authenticate")
    except urllib.error.HTTPError as error:
        return error.code, error.headers.get("WWW-Authenticate")


def test_plain_registry_stores_the_exact_manifest_bytes(tmp_path: Path) -> None:
    with registry(tmp_path, tls=False) as reg:
        assert reg.ref(REPO, tag="1.0.0").startswith(f"oci+http://{reg.host}/")
        assert _raw(reg, "/v2/") == (200, None)
        client = reg.client()
        digest, manifest = push_cartridge(client)
        assert digest == oc.digest_of(manifest)
        answer = client.request("GET", f"/v2/{REPO}/manifests/1.0.0",
                                headers={"Accept": oc.OCI_MANIFEST})
        assert answer.body == manifest
        assert answer.header("Docker-Content-Digest") == digest
        assert answer.header("Content-Type") == oc.OCI_MANIFEST
        assert client.get_blob(REPO, oc.digest_of(CARTRIDGE)) == CARTRIDGE
        assert client.tags(REPO) == ["1.0.0"]


def test_tls_registry_keeps_an_artifact_with_its_referrer_by_the_fallback_tag(
        tmp_path: Path) -> None:
    with registry(tmp_path, tls=True) as reg:
        assert reg.ref(REPO, digest="sha256:00") == f"oci://{reg.host}/{REPO}@sha256:00"
        assert reg.env() == {"SSL_CERT_FILE": str(reg.ca)}
        with pytest.raises(urllib.error.URLError, match="CERTIFICATE_VERIFY_FAILED"):
            urllib.request.urlopen(reg.base + "/v2/", timeout=10)
        client = reg.client()
        digest, manifest = push_cartridge(client)
        envelope = b'{"payloadType":"application/vnd.in-toto+json","payload":"","signatures":[]}'
        client.put_blob(REPO, envelope)
        referrer = oc.image_manifest(
            [oc.descriptor(DSSE, envelope)], artifact_type=DSSE,
            subject={"mediaType": oc.OCI_MANIFEST, "digest": digest, "size": len(manifest)})
        referrer_digest = client.put_manifest(REPO, oc.digest_of(referrer), referrer)
        assert json.loads(client.get_manifest(REPO, referrer_digest))["subject"]["digest"] \
            == digest
        assert client.referrers(REPO, digest) == []  # 2.8.2: no Referrers API, no tag yet
        index = json.dumps({"schemaVersion": 2, "mediaType": oc.OCI_INDEX, "manifests": [
            oc.descriptor(oc.OCI_MANIFEST, referrer, artifactType=DSSE)]}).encode()
        client.put_manifest(REPO, digest.replace(":", "-"), index, oc.OCI_INDEX)
        assert [m["digest"] for m in client.referrers(REPO, digest)] == [referrer_digest]
        assert client.get_manifest(REPO, "1.0.0", accept=oc.OCI_MANIFEST) == manifest


def test_htpasswd_registry_challenges_with_basic_and_admits_its_user(tmp_path: Path) -> None:
    users = {"ada": "lovelace", "bob": "builder"}
    with registry(tmp_path, auth="htpasswd", users=users) as reg:
        assert _raw(reg, "/v2/") == (401, 'Basic realm="acxfs-test"')
        assert reg.client(("ada", "wrong")).request("GET", "/v2/").status == 401
        assert reg.client(("bob", "builder")).request("GET", "/v2/").status == 200
        digest, manifest = push_cartridge(reg.client(reg.user))
        assert reg.client(reg.user).get_manifest(REPO, digest) == manifest
        with pytest.raises(FileNotFoundError, match="401"):
            reg.client().get_manifest(REPO, "1.0.0")


def test_token_registry_challenges_with_bearer_and_a_token_admits_a_pull(
        tmp_path: Path) -> None:
    with registry(tmp_path, auth="token") as reg:
        assert reg.tokens is not None
        realm = reg.tokens.url
        assert _raw(reg, "/v2/") == (
            401, f'Bearer realm="{realm}",service="acxfs-test-registry"')
        assert _raw(reg, f"/v2/{REPO}/manifests/1.0.0") == (
            401, f'Bearer realm="{realm}",service="acxfs-test-registry",'
                 f'scope="repository:{REPO}:pull"')
        with pytest.raises(OSError, match="401"):
            push_cartridge(reg.client())  # anonymous: a token without push
        with pytest.raises(PermissionError, match="401"):
            push_cartridge(reg.client(("ada", "wrong")))
        _, manifest = push_cartridge(reg.client(reg.user))
        anonymous = reg.client()
        assert anonymous.get_manifest(REPO, "1.0.0", accept=oc.OCI_MANIFEST) == manifest
        seen = [(r.scopes, r.user, r.authorization, r.status) for r in reg.tokens.requests]
        assert seen[0] == ((f"repository:{REPO}:pull,push",), None, False, 200)
        assert seen[1] == ((f"repository:{REPO}:pull,push",), None, True, 401)
        assert ((f"repository:{REPO}:pull,push",), "ada", True, 200) in seen
        assert seen[-1] == ((f"repository:{REPO}:pull",), None, False, 200)


def test_redirected_blob_reaches_the_blob_host_without_authorization(tmp_path: Path) -> None:
    with registry(tmp_path, auth="htpasswd", redirect=True) as reg:
        assert reg.blob_host is not None and reg.blob_url is not None
        assert reg.blob_url.startswith("https://localhost:")
        client = reg.client(reg.user)
        push_cartridge(client)
        digest = oc.digest_of(CARTRIDGE)
        hexa = digest.removeprefix("sha256:")
        path = f"/docker/registry/v2/blobs/sha256/{hexa[:2]}/{hexa}/data"
        for method in ("GET", "HEAD"):
            answer = client.request(method, f"/v2/{REPO}/blobs/{digest}", follow=False)
            assert (answer.status, answer.header("Location")) == (
                307, reg.blob_url.rstrip("/") + path)
        assert client.get_blob(REPO, digest) == CARTRIDGE  # followed: credentials stay behind
        got = reg.blob_host.requests[-1]
        assert (got.method, got.path) == ("GET", path)
        assert "Authorization" not in got.headers
        direct = oc.Client(reg.blob_url.rstrip("/"), reg.ca)
        direct.request("GET", path, headers={"Authorization": "Basic c3B5"})
        assert reg.blob_host.requests[-1].headers.get("Authorization") == "Basic c3B5"
        reg.blob_host.lie = b"other bytes"
        assert client.get_blob(REPO, digest) == b"other bytes"
        reg.blob_host.redirect_to = "http://blobs.example.invalid/data"
        answer = direct.request("GET", path, follow=False)
        assert (answer.status, answer.header("Location")) == (307, reg.blob_host.redirect_to)


def test_oras_pulls_through_tls_basic_auth_and_a_token_server(tmp_path: Path) -> None:
    with registry(tmp_path / "basic", auth="htpasswd") as reg:
        push_cartridge(reg.client(reg.user))
        config = reg.docker_config(tmp_path / "docker")["DOCKER_CONFIG"] + "/config.json"
        client = oras.client.OrasClient(hostname=reg.host, tls_verify=str(reg.ca),
                                        auth_backend="basic")
        files = client.pull(target=f"{reg.host}/{REPO}:1.0.0", config_path=config,
                            outdir=str(tmp_path / "out"))
        assert [Path(f).read_bytes() for f in files] == [CARTRIDGE]
    with registry(tmp_path / "token", auth="token") as reg:
        digest, _ = push_cartridge(reg.client(reg.user))
        client = oras.client.OrasClient(hostname=reg.host, tls_verify=str(reg.ca))
        client.login(username=reg.user[0], password=reg.user[1], hostname=reg.host,
                     config_path=str(tmp_path / "login.json"))
        files = client.pull(target=f"{reg.host}/{REPO}@{digest}", outdir=str(tmp_path / "o2"))
        assert [Path(f).read_bytes() for f in files] == [CARTRIDGE]
        assert reg.tokens is not None and reg.tokens.requests[-1].user == "ada"


def test_credential_helper_answers_only_its_registry(tmp_path: Path, monkeypatch) -> None:
    with registry(tmp_path, auth="htpasswd") as reg:
        push_cartridge(reg.client(reg.user))
        helper = reg.credential_helper(tmp_path / "bin", "acxtest")
        env = reg.docker_config(tmp_path / "docker", helper="acxtest")
        config = json.loads((Path(env["DOCKER_CONFIG"]) / "config.json").read_text())
        assert config == {"credHelpers": {reg.host: "acxtest"}}
        got = subprocess.run([helper, "get"], input=reg.host, capture_output=True, text=True)
        assert json.loads(got.stdout) == {"ServerURL": reg.host, "Username": reg.user[0],
                                          "Secret": reg.user[1]}
        other = subprocess.run([helper, "get"], input="127.0.0.1:1", capture_output=True,
                               text=True)
        assert other.returncode == 1
        monkeypatch.setenv("PATH", f"{helper.parent}{os.pathsep}{os.environ['PATH']}")
        client = oras.client.OrasClient(hostname=reg.host, tls_verify=str(reg.ca),
                                        auth_backend="basic")
        files = client.pull(target=f"{reg.host}/{REPO}:1.0.0", outdir=str(tmp_path / "out"),
                            config_path=env["DOCKER_CONFIG"] + "/config.json")
        assert [Path(f).read_bytes() for f in files] == [CARTRIDGE]
        calls = [json.loads(line) for line in
                 Path(f"{helper}.log").read_text().splitlines()]
        assert calls == [["get", reg.host], ["get", "127.0.0.1:1"], ["get", reg.host]]


def test_stopping_leaves_no_process(tmp_path: Path) -> None:
    with registry(tmp_path, auth="token", redirect=True) as reg:
        pid, config = reg.process.pid, str(reg.work / "config.yml")
        port = int(reg.host.rsplit(":", 1)[1])
        assert Path(f"/proc/{pid}").exists()
    assert reg.process.poll() is not None
    assert not Path(f"/proc/{pid}").exists() or "zombie" in Path(
        f"/proc/{pid}/status").read_text()
    for proc in Path("/proc").iterdir():
        with_config = proc.name.isdigit() and _cmdline(proc).count(config)
        assert not with_config, proc
    with pytest.raises(OSError), socket.create_connection(("127.0.0.1", port), timeout=2):
        pass


def _cmdline(proc: Path) -> str:
    try:
        return (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def test_a_missing_registry_binary_skips_or_fails_under_ci(monkeypatch) -> None:
    monkeypatch.setenv("PATH", "/nonexistent")
    monkeypatch.delenv("CI", raising=False)
    with pytest.raises(pytest.skip.Exception):
        binary()
    monkeypatch.setenv("CI", "true")
    with pytest.raises(pytest.fail.Exception):
        binary()


def test_fake_registry_serves_lies_stalls_redirects_and_pages(tmp_path: Path) -> None:
    _, cert, key = make_ca(tmp_path / "ca", ("DNS:localhost",))
    ca = tmp_path / "ca" / "ca.pem"
    fake = FakeRegistry(tls=(cert, key), page_size=2)
    layer = fake.add_blob(CARTRIDGE)
    manifest = oc.image_manifest([oc.descriptor(LAYER, CARTRIDGE)], artifact_type=ARTIFACT)
    digest = fake.add_manifest(REPO, manifest, tag="1.0.0")
    for tag in ("0.1.0", "0.2.0", "0.3.0", "2.0.0"):
        fake.add_manifest(REPO, manifest, tag=tag)
    big = oversized_manifest()
    assert len(big) > 4 * MIB
    fake.add_manifest(REPO, big, tag="big")
    with fake.running() as base:
        assert fake.ref(REPO, tag="1.0.0") == f"oci://{base.split('://')[1]}/{REPO}:1.0.0"
        client = oc.Client(base, ca)
        assert client.request("GET", "/v2/").status == 200
        assert client.get_manifest(REPO, "1.0.0") == manifest
        assert client.get_manifest(REPO, digest) == manifest
        head = client.request("HEAD", f"/v2/{REPO}/blobs/{layer}")
        assert (head.status, head.body, head.header("Content-Length")) == (
            200, b"", str(len(CARTRIDGE)))
        assert client.get_manifest(REPO, "big") == big
        assert client.tags(REPO) == ["0.1.0", "0.2.0", "0.3.0", "1.0.0", "2.0.0", "big"]
        assert sum("/tags/list" in r.path for r in fake.requests) == 3
        fake.lie[layer] = b"not the cartridge"
        assert client.get_blob(REPO, layer) == b"not the cartridge"
        fake.redirect["1.0.0"] = "https://localhost:1/elsewhere"
        moved = client.request("GET", f"/v2/{REPO}/manifests/1.0.0", follow=False)
        assert (moved.status, moved.header("Location")) == (307, fake.redirect["1.0.0"])
        fake.stall.add(digest)
        started = time.monotonic()
        context = ssl.create_default_context(cafile=str(ca))
        with pytest.raises(TimeoutError), urllib.request.urlopen(
                f"{base}/v2/{REPO}/manifests/{digest}", timeout=1, context=context) as stalled:
            stalled.read()
        assert time.monotonic() - started < 10
