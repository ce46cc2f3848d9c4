"""Logging in to OCI registries through the real `acxfs push` and `acxfs add`: htpasswd over TLS
without, with wrong and with right credentials in `$DOCKER_CONFIG/config.json`, a credential
helper (`credHelpers`, `credsStore`), identity tokens and bad config files refused in one line,
credentials read only after a 401 and never sent over plain HTTP; a token server (anonymous
pull, push with credentials only) and a token realm that is not HTTPS.
"""

from __future__ import annotations

import base64
import json
import os
from pathlib import Path

import pytest

from tests.support.library import listing
from tests.support.oci_bundles import IDENTITY, cartridge, ok, refused, run
from tests.support.registry import Registry, registry
from tests.support.servers import Reply, Scripted, make_ca

pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("local_key")]

REPO = "skills/foo"
library = [pytest.mark.fuse, pytest.mark.usefixtures("library_stops")]


def config(tmp_path: Path, doc: object, name: str = "docker") -> dict[str, str]:
    """A DOCKER_CONFIG directory holding `doc` as config.json (text as it is)."""
    directory = tmp_path / name
    directory.mkdir()
    text = doc if isinstance(doc, str) else json.dumps(doc)
    (directory / "config.json").write_text(text)
    return {"DOCKER_CONFIG": str(directory)}


def no_login(tmp_path: Path) -> dict[str, str]:
    return {"DOCKER_CONFIG": str(tmp_path / "no-docker-config")}


def tags(reg: Registry) -> list[str]:
    try:
        return sorted(reg.client(reg.user).tags(REPO))
    except FileNotFoundError:
        return []


def test_htpasswd_without_credentials_asks_for_a_docker_login(tmp_path: Path) -> None:
    bundle = cartridge(tmp_path)
    with registry(tmp_path, auth="htpasswd") as reg:
        refused(run("push", bundle, reg.ref(REPO), env={**reg.env(), **no_login(tmp_path)}),
                2, f"{reg.host}: the registry asks for a login (401); docker login {reg.host}")
        assert tags(reg) == []


def test_htpasswd_with_a_wrong_password_is_refused(tmp_path: Path) -> None:
    bundle = cartridge(tmp_path)
    with registry(tmp_path, auth="htpasswd") as reg:
        wrong = reg.docker_config(tmp_path / "docker", user=(reg.user[0], "wrong"))
        refused(run("push", bundle, reg.ref(REPO), env={**reg.env(), **wrong}), 2,
                f"{reg.host}: the registry refused the credentials (401)")
        assert tags(reg) == []


@pytest.mark.fuse
@pytest.mark.usefixtures("library_stops")
def test_htpasswd_with_the_right_docker_config_pushes_and_adds(tmp_path: Path) -> None:
    bundle = cartridge(tmp_path)
    with registry(tmp_path, auth="htpasswd") as reg:
        login = {**reg.env(), **reg.docker_config(tmp_path / "docker")}
        out = ok(run("push", bundle, reg.ref(REPO), env=login))
        assert out.endswith(f" {IDENTITY} 1.1.0\n")
        assert "1.1.0" in tags(reg)
        ok(run("add", reg.ref(REPO, tag="1.1.0"), env=login))
    [installed] = listing()["bundles"]
    assert installed["identity"] == IDENTITY


def test_a_credential_helper_is_asked_for_the_registrys_host(tmp_path: Path) -> None:
    bundle = cartridge(tmp_path)
    with registry(tmp_path, auth="htpasswd") as reg:
        helper = reg.credential_helper(tmp_path / "bin", "acxtest")
        path = {"PATH": f"{helper.parent}{os.pathsep}{os.environ['PATH']}"}
        env = {**reg.env(), **path, **reg.docker_config(tmp_path / "docker", helper="acxtest")}
        ok(run("push", bundle, reg.ref(REPO), env=env))
        calls = [json.loads(line) for line in Path(f"{helper}.log").read_text().splitlines()]
        assert calls == [["get", reg.host]]
        store = {**reg.env(), **path, **config(tmp_path, {"credsStore": "acxtest"}, "store")}
        ok(run("push", cartridge(tmp_path, "1.2.0"), reg.ref(REPO), env=store))
        assert {"1.1.0", "1.2.0"} <= set(tags(reg))


def test_a_failing_credential_helper_is_one_line(tmp_path: Path) -> None:
    bundle = cartridge(tmp_path)
    with registry(tmp_path, auth="htpasswd") as reg:
        env = {**reg.env(), **config(tmp_path, {"credHelpers": {reg.host: "absent"}})}
        refused(run("push", bundle, reg.ref(REPO), env=env), 2,
                "docker-credential-absent: not found on PATH")
        assert tags(reg) == []


def test_an_identity_token_is_refused(tmp_path: Path) -> None:
    bundle = cartridge(tmp_path)
    with registry(tmp_path, auth="htpasswd") as reg:
        env = {**reg.env(), **config(tmp_path, {"auths": {reg.host: {
            "identitytoken": "eyJhbGciOi.refresh.token"}}})}
        refused(run("push", bundle, reg.ref(REPO), env=env), 2,
                f"{reg.host}: identity tokens are not supported")
        assert tags(reg) == []


def test_a_bad_config_json_is_one_line_naming_the_file(tmp_path: Path) -> None:
    bundle = cartridge(tmp_path)
    with registry(tmp_path, auth="htpasswd") as reg:
        env = {**reg.env(), **config(tmp_path, '{"auths": {')}
        result = run("push", bundle, reg.ref(REPO), env=env)
        assert result.returncode == 2, result.stderr
        [line] = result.stderr.splitlines()
        config_file = f"{env['DOCKER_CONFIG']}/config.json"
        assert line.startswith(f"acxfs: error: {config_file}: not strict JSON ("), line
        assert tags(reg) == []


def test_credentials_are_read_only_after_a_401(tmp_path: Path) -> None:
    """A registry that asks for none never makes acxfs open config.json: a broken one is no
    error there."""
    bundle = cartridge(tmp_path)
    with registry(tmp_path) as reg:
        env = {**reg.env(), **config(tmp_path, "not json at all")}
        ok(run("push", bundle, reg.ref(REPO), env=env))


def test_no_credentials_over_plain_http(tmp_path: Path) -> None:
    """A loopback plain-HTTP registry asking for Basic: acxfs refuses rather than send the
    password config.json holds for it."""
    def route(path: str) -> Reply:
        return Reply(401, b'{"errors":[{"code":"UNAUTHORIZED","message":"login"}]}',
                     {"WWW-Authenticate": 'Basic realm="plain"'})

    server = Scripted(route)
    with server.running() as base:
        host = base.split("://", 1)[1].rstrip("/")
        env = config(tmp_path, {"auths": {host: {"auth": "YWRhOnNlY3JldA=="}}})
        refused(run("add", f"oci+http://{host}/{REPO}:1.1.0", env=env), 2,
                f"{host}: the registry asks for a login (401); acxfs sends no credentials "
                "over plain HTTP")
    assert server.requests and all("Authorization" not in r.headers for r in server.requests)


@pytest.mark.fuse
@pytest.mark.usefixtures("library_stops")
def test_a_token_registry_lets_anyone_pull_and_only_a_login_push(tmp_path: Path) -> None:
    bundle = cartridge(tmp_path)
    with registry(tmp_path, auth="token") as reg:
        assert reg.tokens is not None
        refused(run("push", bundle, reg.ref(REPO), env={**reg.env(), **no_login(tmp_path)}),
                2, f"{reg.host}: the registry asks for a login (401); docker login {reg.host}")
        assert tags(reg) == []
        login = {**reg.env(), **reg.docker_config(tmp_path / "docker")}
        start = len(reg.tokens.requests)
        ok(run("push", bundle, reg.ref(REPO), env=login))
        granted = [r for r in reg.tokens.requests[start:] if r.user == reg.user[0]]
        assert granted and all(r.scopes == (f"repository:{REPO}:pull,push",) for r in granted)
        asked = len(reg.tokens.requests)
        ok(run("add", reg.ref(REPO), env={**reg.env(), **no_login(tmp_path)}))
        pulls = reg.tokens.requests[asked:]
        assert pulls and all(
            (r.scopes, r.user, r.authorization) == ((f"repository:{REPO}:pull",), None, False)
            for r in pulls)
    [installed] = listing()["bundles"]
    assert (installed["identity"], installed["version"]) == (IDENTITY, "1.1.0")


@pytest.mark.fuse
@pytest.mark.usefixtures("library_stops")
def test_a_token_realm_that_is_not_https_is_refused(tmp_path: Path) -> None:
    realm = "http://auth.example.invalid/token"

    def route(path: str) -> Reply:
        return Reply(401, b'{"errors":[{"code":"UNAUTHORIZED","message":"token"}]}',
                     {"WWW-Authenticate": f'Bearer realm="{realm}",service="registry"'})

    with Scripted(route).running() as base:
        host = base.split("://", 1)[1].rstrip("/")
        refused(run("add", f"oci+http://{host}/{REPO}:1.1.0"), 2,
                f"{realm}: token realm is not HTTPS")
    assert listing()["bundles"] == []


@pytest.mark.fuse
@pytest.mark.usefixtures("library_stops")
def test_credentials_stay_with_the_registry_when_a_tag_page_points_elsewhere(
        tmp_path: Path) -> None:
    """A TLS registry asking for Basic whose tag list's next page lies on another origin (a
    plain loopback server): that server is asked, but never given the password."""
    ca, cert, key = make_ca(tmp_path / "ca", ("DNS:localhost",))
    other = Scripted(lambda path: Reply(200, b'{"tags": []}',
                                        {"Content-Type": "application/json"}))
    where: dict[str, str] = {}

    def route(path: str) -> Reply | None:
        if "Authorization" not in server.requests[-1].headers:
            return Reply(401, b'{"errors":[{"code":"UNAUTHORIZED","message":"login"}]}',
                         {"WWW-Authenticate": 'Basic realm="r"'})
        if path.startswith(f"/v2/{REPO}/tags/list"):
            return Reply(200, b'{"tags": ["0.1.0"]}', {
                "Content-Type": "application/json",
                "Link": f'<{where["other"]}v2/{REPO}/tags/list?last=0.1.0>; rel="next"'})
        return None

    server = Scripted(route, tls=(cert, key))
    with other.running() as elsewhere, server.running() as base:
        where["other"] = elsewhere
        host = base.split("://", 1)[1].rstrip("/")
        secret = base64.b64encode(b"ada:secret").decode()
        env = {"SSL_CERT_FILE": str(ca), **config(tmp_path, {"auths": {host: {"auth": secret}}})}
        refused(run("add", f"oci://{host}/{REPO}", env=env), 1,
                f"oci://{host}/{REPO}:0.1.0: MANIFEST_UNKNOWN: manifest unknown")
    assert any(r.headers.get("Authorization") == f"Basic {secret}" for r in server.requests)
    assert other.requests
    assert all("Authorization" not in r.headers for r in other.requests)
