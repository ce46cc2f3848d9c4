"""The real OCI registry for the tests: the CNCF distribution registry (Debian's
`docker-registry`, 2.8.2) run as `docker-registry serve CONFIG` on a config written here.

    with registry(tmp_path, tls=True, auth="token", redirect=True) as reg:
        reg.client(reg.user).put_blob("acx/demo", data)       # raw client (oci_client.Client)
        acxfs("add", reg.ref("acx/demo", tag="1.0.0"), env=reg.env())
        reg.tokens.requests, reg.blob_host.requests          # what they were asked

Options: `tls` (a test CA, `make_ca`, whose server certificate covers IP:127.0.0.1 and
DNS:localhost; False: plain http), `auth` (None, "htpasswd": `htpasswd -Bbn`, or "token": a
loopback token server, `oci_token.TokenServer`), `users` (name -> password, default one user,
`USER`), `redirect` (the `redirect` storage middleware sends blob GETs and HEADs to a second
HTTPS server on `localhost`, `BlobHost`, which serves the storage directory's files, records each
request with its headers, and can lie or redirect further), `access_log` (the registry's
own line per request with its status code, in `registry.log`: `servers.logged_requests`).
Credentials for acxfs: `docker_config(dir)` (auths) and `credential_helper(bin_dir, name)`
(credHelpers).
Without the binary the test skips (fails under CI=true).

Invariant: everything binds 127.0.0.1, lives in the test's own directory, and is stopped when
the context ends: the registry by its pid (terminate, then kill) in a `finally`; nothing is left
running.
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
import shutil
import ssl
import stat
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
import yaml

from scripts.bench_oci.registry import config as plain_config
from scripts.bench_oci.registry import free_port, stop
from tests.support.oci_client import Client
from tests.support.oci_token import ISSUER, SERVICE, TokenServer
from tests.support.servers import Reply, Scripted, Seen, make_ca

BINARY = "docker-registry"
USER = ("ada", "correct horse battery staple")
READY = 10.0  # seconds the registry has to answer /v2/


def binary() -> str:
    """The registry's path; skips the test without it (fails it under CI=true)."""
    found = shutil.which(BINARY)
    if found is None:
        message = f"{BINARY} is not installed (scripts/setup.sh installs it)"
        if os.environ.get("CI") == "true":
            pytest.fail(message)
        pytest.skip(message)
    return found


@dataclass
class BlobHost:
    """The redirect middleware's target: serves `root`'s files at the paths it is sent
    (/docker/registry/v2/blobs/sha256/XX/HEX/data); `lie` serves those bytes instead, and
    `redirect_to` answers 307 to that URL instead."""

    root: Path
    tls: tuple[Path, Path]
    lie: bytes | None = None
    redirect_to: str | None = None
    server: Scripted = field(init=False)

    def __post_init__(self) -> None:
        self.server = Scripted(self.route, tls=self.tls)

    @property
    def requests(self) -> list[Seen]:
        return self.server.requests

    def route(self, path: str) -> Reply | None:
        if self.redirect_to is not None:
            return Reply(307, headers={"Location": self.redirect_to})
        rel = path.split("?", 1)[0].lstrip("/")
        target = (self.root / rel).resolve()
        if self.root.resolve() not in target.parents or not target.is_file():
            return None
        body = target.read_bytes() if self.lie is None else self.lie
        return Reply(200, body, {"Content-Type": "application/octet-stream"})


@dataclass
class Registry:
    """A running registry. `host`: 127.0.0.1:PORT; `root`: its storage directory."""

    work: Path
    host: str
    root: Path
    tls: bool
    ca: Path | None  # the test CA (the registry's with tls, the token server's with token auth)
    auth: str | None
    users: dict[str, str]
    process: subprocess.Popen[bytes]
    tokens: TokenServer | None = None
    blob_host: BlobHost | None = None
    blob_url: str | None = None  # https://localhost:PORT/

    @property
    def base(self) -> str:
        return f"{'https' if self.tls else 'http'}://{self.host}"

    @property
    def user(self) -> tuple[str, str]:
        """The first user (name, password)."""
        name = next(iter(self.users))
        return name, self.users[name]

    def ref(self, repo: str, tag: str | None = None, digest: str | None = None) -> str:
        """oci://127.0.0.1:PORT/REPO[:TAG|@DIGEST] (oci+http:// without TLS)."""
        scheme = "oci" if self.tls else "oci+http"
        suffix = f":{tag}" if tag else f"@{digest}" if digest else ""
        return f"{scheme}://{self.host}/{repo}{suffix}"

    def env(self) -> dict[str, str]:
        """What a process needs to trust this registry (and its token server, blob host):
        SSL_CERT_FILE = the test CA."""
        return {"SSL_CERT_FILE": str(self.ca)} if self.ca else {}

    def client(self, user: tuple[str, str] | None = None) -> Client:
        """A raw client of this registry (anonymous without `user`)."""
        return Client(self.base, self.ca, user)

    def docker_config(self, directory: Path, user: tuple[str, str] | None = None,
                      helper: str | None = None) -> dict[str, str]:
        """Write DIRECTORY/config.json: `auths` {host: base64 user:pass} (default: the first
        user), or `credHelpers` {host: helper} when `helper` names one; {"DOCKER_CONFIG": dir}."""
        directory.mkdir(parents=True, exist_ok=True)
        config: dict[str, object]
        if helper is not None:
            config = {"credHelpers": {self.host: helper}}
        else:
            name, password = user or self.user
            token = base64.b64encode(f"{name}:{password}".encode()).decode()
            config = {"auths": {self.host: {"auth": token}}}
        (directory / "config.json").write_text(json.dumps(config, indent=2))
        return {"DOCKER_CONFIG": str(directory)}

    def credential_helper(self, bin_dir: Path, name: str,
                          user: tuple[str, str] | None = None) -> Path:
        """An executable BIN_DIR/docker-credential-NAME: `get` with this registry's host on stdin
        prints {"ServerURL", "Username", "Secret"}; anything else fails as docker's helpers do.
        Each call is appended to BIN_DIR/docker-credential-NAME.log (action and stdin)."""
        bin_dir.mkdir(parents=True, exist_ok=True)
        helper = bin_dir / f"docker-credential-{name}"
        login, secret = user or self.user
        answer = json.dumps({"ServerURL": self.host, "Username": login, "Secret": secret})
        helper.write_text(
            f"#!{sys.executable}\n"
            "import json, sys\n"
            "action = sys.argv[1] if len(sys.argv) > 1 else ''\n"
            "server = sys.stdin.read().strip()\n"
            f"with open({str(helper) + '.log'!r}, 'a') as log:\n"
            "    log.write(json.dumps([action, server]) + '\\n')\n"
            f"if action == 'get' and server in ({self.host!r}, {self.base!r}):\n"
            f"    print({answer!r})\n"
            "    sys.exit(0)\n"
            "print('credentials not found in native keychain')\n"
            "sys.exit(1)\n")
        helper.chmod(helper.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
        return helper

    def stderr(self) -> str:
        return (self.work / "registry.log").read_text(errors="replace")


def htpasswd(path: Path, users: dict[str, str]) -> None:
    lines = [subprocess.run(["htpasswd", "-Bbn", name, password], check=True,
                            capture_output=True, text=True).stdout.strip()
             for name, password in users.items()]
    path.write_text("\n".join(lines) + "\n")


def config(work: Path, port: int, root: Path, tls: tuple[Path, Path] | None, auth: str | None,
           realm: str | None, ca: Path | None, blob_url: str | None,
           access_log: bool = False) -> dict[str, object]:
    """The registry's configuration (version 0.1), quiet and on 127.0.0.1:PORT: the
    benchmark's, with TLS, a login, the redirect middleware and an access log (a line per
    request with its status, in registry.log) as asked."""
    cfg = plain_config(port, root)
    if access_log:
        cfg["log"] = {"level": "error", "accesslog": {"disabled": False}}
    http = cfg["http"]
    assert isinstance(http, dict)
    http["headers"] = {"X-Content-Type-Options": ["nosniff"]}
    if tls is not None:
        http["tls"] = {"certificate": str(tls[0]), "key": str(tls[1])}
    if auth == "htpasswd":
        cfg["auth"] = {"htpasswd": {"realm": "acxfs-test", "path": str(work / "htpasswd")}}
    elif auth == "token":
        cfg["auth"] = {"token": {"realm": realm, "service": SERVICE, "issuer": ISSUER,
                                 "rootcertbundle": str(ca)}}
    if blob_url is not None:
        cfg["middleware"] = {"storage": [{"name": "redirect",
                                          "options": {"baseurl": blob_url}}]}
    return cfg


def wait_ready(reg: Registry, timeout: float = READY) -> None:
    """Until /v2/ answers 200 or 401; fails with the registry's stderr otherwise."""
    context = ssl.create_default_context(cafile=str(reg.ca)) if reg.ca else None
    deadline = time.monotonic() + timeout
    last = ""
    while time.monotonic() < deadline:
        if reg.process.poll() is not None:
            break
        try:
            with urllib.request.urlopen(f"{reg.base}/v2/", timeout=2, context=context):
                return
        except urllib.error.HTTPError as error:
            if error.code == 401:
                return
            last = f"HTTP {error.code}"
        except OSError as error:
            last = str(error)
        time.sleep(0.05)
    raise AssertionError(f"{BINARY} did not answer {reg.base}/v2/ ({last}; exit "
                         f"{reg.process.poll()}):\n{reg.stderr()}")


@contextlib.contextmanager
def registry(work: Path, *, tls: bool = True, auth: str | None = None,
             users: dict[str, str] | None = None, redirect: bool = False,
             access_log: bool = False) -> Iterator[Registry]:
    """A running registry in `work` (its storage, config, certificates and logs there)."""
    exe = binary()
    if auth not in (None, "htpasswd", "token"):
        raise ValueError(f"unknown auth {auth!r}")
    if redirect and not tls:
        raise ValueError("the blob host is HTTPS: redirect needs tls")
    work = work / "oci-registry"
    work.mkdir(parents=True)
    root = work / "storage"
    root.mkdir()
    users = dict(users or dict([USER]))
    ca = cert = key = None
    if tls or auth == "token":
        ca, cert, key = make_ca(work / "ca", ("DNS:localhost",))
    if auth == "htpasswd":
        htpasswd(work / "htpasswd", users)
    with contextlib.ExitStack() as stack:
        tokens = blob_host = None
        realm = blob_url = None
        if auth == "token":
            assert cert is not None and key is not None
            tokens = TokenServer(work / "ca", (cert, key), users)
            realm = stack.enter_context(tokens.running())
        if redirect:
            assert cert is not None and key is not None
            blob_host = BlobHost(root, (cert, key))
            served = stack.enter_context(blob_host.server.running())
            blob_url = served.replace("127.0.0.1", "localhost")
        tls_pair = (cert, key) if tls and cert and key else None
        port = free_port()
        (work / "config.yml").write_text(yaml.safe_dump(
            config(work, port, root, tls_pair, auth, realm, ca, blob_url, access_log),
            sort_keys=False))
        log = (work / "registry.log").open("wb")
        stack.callback(log.close)
        process = subprocess.Popen([exe, "serve", str(work / "config.yml")],
                                   stdin=subprocess.DEVNULL, stdout=log, stderr=log)
        try:
            reg = Registry(work, f"127.0.0.1:{port}", root, tls, ca, auth, users, process,
                           tokens, blob_host, blob_url)
            wait_ready(reg)
            yield reg
        finally:
            stop(process)
