"""Registries and the servers they point at, turned against the user: a blob's redirect target
that asks for a login (the registry's credentials must not follow), answers that are not HTTP,
JSON nested to exhaust the parser, a pre-signed redirect URL whose signature must not reach
an error line, a token realm that is not HTTPS (refused before any credential is read), a
remote registry redirecting to plain HTTP on loopback, and a manifest whose artifactType
names another format than its layer.  Each is one line, exit 1 or 2, and installs nothing.
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
import socket
import stat
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.library import listing
from tests.support.oci_bundles import (
    EMPTY_DIGEST,
    MANIFEST,
    acx_manifest,
    canonical,
    cartridge,
    ok,
    refused,
    run,
    sha256,
)
from tests.support.oci_fake import FakeRegistry
from tests.support.registry import registry
from tests.support.servers import Reply, Scripted, make_ca

pytestmark = [pytest.mark.slow, pytest.mark.fuse,
              pytest.mark.usefixtures("local_key", "library_stops")]

REPO = "skills/foo"
DEEP = b"[" * 100_000 + b"]" * 100_000


def installed() -> list[object]:
    return list(listing()["bundles"])


def docker_config(tmp_path: Path, doc: dict[str, object]) -> dict[str, str]:
    directory = tmp_path / "docker"
    directory.mkdir(exist_ok=True)
    (directory / "config.json").write_text(json.dumps(doc))
    return {"DOCKER_CONFIG": str(directory)}


def test_a_login_asked_by_a_blob_redirect_target_gets_no_credentials(tmp_path: Path) -> None:
    """An anonymous TLS registry redirects the blob to another host, which answers 401 with a
    Bearer realm: acxfs must not read and send the registry's credentials to that realm."""
    ca, cert, key = make_ca(tmp_path / "ca", ("DNS:localhost",))
    token = Scripted(lambda path: Reply(200, b'{"token": "t"}'), tls=(cert, key))
    bundle = cartridge(tmp_path)
    fake = FakeRegistry(tls=(cert, key))
    layer = fake.add_blob(bundle.read_bytes())
    fake.add_manifest(REPO, acx_manifest(bundle), tag="1.1.0")
    with token.running() as realm_base:
        realm = realm_base.replace("127.0.0.1", "localhost") + "token"
        other = Scripted(lambda path: Reply(401, b"", {
            "WWW-Authenticate": f'Bearer realm="{realm}",service="elsewhere"'}), tls=(cert, key))
        with other.running() as other_base, fake.running() as base:
            target = other_base.replace("127.0.0.1", "localhost") + "blob"
            fake.redirect[layer] = target
            host = base.split("://", 1)[1]
            secret = base64.b64encode(b"ada:hunter2").decode()
            env = {"SSL_CERT_FILE": str(ca),
                   **docker_config(tmp_path, {"auths": {host: {"auth": secret}}})}
            refused(run("add", fake.ref(REPO, tag="1.1.0"), env=env), 2,
                    f"{target}: HTTP 401 (acxfs logs in only to {host} itself)")
    assert token.requests == []
    assert all("Authorization" not in r.headers for r in other.requests)
    assert installed() == []


@contextlib.contextmanager
def raw_server(answer: bytes) -> Iterator[int]:
    """A loopback TCP server answering every connection with `answer`, then closing."""
    listener = socket.create_server(("127.0.0.1", 0))
    listener.settimeout(0.2)
    stop = threading.Event()

    def serve() -> None:
        while not stop.is_set():
            try:
                conn, _ = listener.accept()
            except TimeoutError:
                continue
            with conn:
                conn.settimeout(5)
                with contextlib.suppress(OSError):
                    conn.recv(65536)
                    conn.sendall(answer)

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield listener.getsockname()[1]
    finally:
        stop.set()
        thread.join(5)
        listener.close()


@pytest.mark.parametrize("answer", [
    b"garbage\r\n\r\n",
    b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n10\r\nabc",
    b"HTTP/1.1 200 OK\r\n" + b"".join(b"X-%d: y\r\n" % i for i in range(150)) + b"\r\n",
], ids=["bad-status-line", "cut-chunked-body", "too-many-headers"])
def test_an_answer_that_is_not_http_is_one_line(answer: bytes) -> None:
    with raw_server(answer) as port:
        result = run("add", f"oci+http://127.0.0.1:{port}/{REPO}:1.1.0", timeout=60)
    assert result.returncode == 2, result.stderr
    [line] = result.stderr.splitlines()
    assert line.startswith(f"acxfs: error: http://127.0.0.1:{port}/v2/{REPO}/manifests/"
                           "1.1.0: "), line
    assert installed() == []


def test_json_nested_to_exhaust_the_parser_is_one_line() -> None:
    fake = FakeRegistry()
    fake.add_manifest(REPO, DEEP, tag="1.1.0")
    fake.add_manifest("skills/deeptags", DEEP, tag="x")
    original = fake.tag_page
    fake.tag_page = lambda repo, query: (  # type: ignore[method-assign]
        Reply(200, DEEP, {"Content-Type": "application/json"}) if repo == "skills/deeptags"
        else original(repo, query))
    with fake.running() as base:
        result = run("add", fake.ref(REPO, tag="1.1.0"))
        assert result.returncode == 1, result.stderr
        [line] = result.stderr.splitlines()
        assert line.startswith(f"acxfs: error: {fake.ref(REPO, tag='1.1.0')}: the manifest is "
                               "not strict JSON ("), line
        refused(run("add", fake.ref("skills/deeptags")), 1,
                f"{base}/v2/skills/deeptags/tags/list: not a tag list")
    assert installed() == []


def test_a_presigned_redirect_never_shows_its_signature(tmp_path: Path) -> None:
    bundle = cartridge(tmp_path)
    with registry(tmp_path, redirect=True) as reg:
        assert reg.blob_host is not None and reg.blob_url is not None
        ok(run("push", bundle, reg.ref(REPO), env=reg.env()))
        signed = f"{reg.blob_url}data?X-Amz-Signature=SECRETSIG&X-Amz-Credential=AKIA"
        reg.blob_host.redirect_to = signed  # redirects again and again
        result = run("add", reg.ref(REPO, tag="1.1.0"), env=reg.env())
        assert result.returncode == 2, result.stderr
        assert "SECRETSIG" not in result.stderr and "AKIA" not in result.stderr
        refused(result, 2, f"{reg.blob_url}data: more than 3 redirects")
    assert installed() == []


def test_a_remote_registry_cannot_redirect_a_blob_to_plain_http_on_loopback(
        tmp_path: Path) -> None:
    """Plain HTTP to loopback is for a registry on loopback asked so, never a place a TLS
    registry may send acxfs to (a service of this machine)."""
    bundle = cartridge(tmp_path)
    with registry(tmp_path, redirect=True) as reg:
        assert reg.blob_host is not None
        ok(run("push", bundle, reg.ref(REPO), env=reg.env()))
        reg.blob_host.redirect_to = "http://127.0.0.1:9/local-service"
        result = run("add", reg.ref(REPO, tag="1.1.0"), env=reg.env())
        assert result.returncode == 2, result.stderr
        [line] = result.stderr.splitlines()
        assert line.endswith(": redirected to http://127.0.0.1:9/local-service, not HTTPS"), line
    assert installed() == []


def test_a_token_realm_that_is_not_https_is_refused_before_any_credential_is_read(
        tmp_path: Path) -> None:
    ca, cert, key = make_ca(tmp_path / "ca")
    realm = "http://10.0.0.1/token"
    server = Scripted(lambda path: Reply(401, b"", {
        "WWW-Authenticate": f'Bearer realm="{realm}",service="registry"'}), tls=(cert, key))
    helpers = tmp_path / "bin"
    helpers.mkdir()
    asked = tmp_path / "asked"
    helper = helpers / "docker-credential-spy"
    helper.write_text(f"#!/bin/sh\ntouch {asked}\nexit 1\n")
    helper.chmod(helper.stat().st_mode | stat.S_IXUSR)
    with server.running() as base:
        host = base.split("://", 1)[1].rstrip("/")
        env = {"SSL_CERT_FILE": str(ca), "PATH": f"{helpers}:{os.environ['PATH']}",
               **docker_config(tmp_path, {"credsStore": "spy"})}
        refused(run("add", f"oci://{host}/{REPO}:1.1.0", env=env), 2,
                f"{realm}: token realm is not HTTPS")
    assert not asked.exists()
    assert installed() == []


def test_a_manifest_naming_another_format_than_its_layer_is_refused(tmp_path: Path) -> None:
    """An azphalt artifactType over a cartridge layer: the bundle checks, but it is not what
    the manifest says it is."""
    bundle = cartridge(tmp_path)
    data = bundle.read_bytes()
    fake = FakeRegistry()
    fake.add_blob(data)
    fake.add_manifest(REPO, canonical({
        "schemaVersion": 2, "mediaType": MANIFEST,
        "artifactType": "application/vnd.azphalt.package",
        "config": {"mediaType": "application/vnd.oci.empty.v1+json", "digest": EMPTY_DIGEST,
                   "size": 2},
        "layers": [{"mediaType": "application/vnd.azphalt.package", "digest": sha256(data),
                    "size": len(data)}]}), tag="1.1.0")
    before = sorted(p.name for p in Path(os.environ["HOME"]).rglob("store/*"))
    with fake.running():
        refused(run("add", fake.ref(REPO, tag="1.1.0")), 1,
                f"{fake.ref(REPO, tag='1.1.0')}: the layer is not the azp bundle its "
                "manifest's artifactType names")
    assert installed() == []
    assert sorted(p.name for p in Path(os.environ["HOME"]).rglob("store/*")) == before
