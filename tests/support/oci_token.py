"""A loopback token server for the distribution registry's `auth: token` (Docker's token
authentication): `GET /token?service=S&scope=repository:NAME:ACTIONS` answers
`{"token": JWT, "access_token": JWT}`, the JWT ES256-signed by `openssl dgst -sha256 -sign`
(the DER signature converted to JWS's raw r||s) with `x5c` = [the signing certificate, issued by
the test CA the registry trusts as its `rootcertbundle`].

Invariant: it binds 127.0.0.1 only (HTTPS, the test CA's server certificate), signs with a key in
the test's own directory, grants an anonymous request at most `anonymous` actions, a user only with
their right password (a wrong one: 401, no token), and records every request in `requests`; it
stops when its context ends.
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import http.server
import json
import secrets
import ssl
import subprocess
import threading
import time
import urllib.parse
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from tests.support.servers import POLL, issue_cert

ISSUER = "acxfs-test-token-issuer"
SERVICE = "acxfs-test-registry"


@dataclass(frozen=True)
class TokenRequest:
    """One request the token server answered: its scopes, the user it authenticated (None:
    anonymous or refused), whether it carried an Authorization header, and its status."""

    scopes: tuple[str, ...]
    user: str | None
    authorization: bool
    status: int


def b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def der_to_raw(signature: bytes, size: int = 32) -> bytes:
    """An ECDSA DER signature (SEQUENCE { INTEGER r, INTEGER s }) as JWS's fixed-width r||s."""
    if signature[0] != 0x30:
        raise ValueError("not a DER sequence")
    at = 2 if signature[1] < 0x80 else 2 + (signature[1] & 0x7F)
    parts: list[bytes] = []
    for _ in range(2):
        if signature[at] != 0x02:
            raise ValueError("not a DER integer")
        length = signature[at + 1]
        number = signature[at + 2:at + 2 + length].lstrip(b"\0")
        parts.append(number.rjust(size, b"\0"))
        at += 2 + length
    return b"".join(parts)


def sign_es256(key: Path, signing_input: bytes) -> bytes:
    """The raw r||s ES256 signature of `signing_input` by the PEM key `key`, through openssl."""
    der = subprocess.run(["openssl", "dgst", "-sha256", "-sign", str(key)], input=signing_input,
                         capture_output=True, check=True).stdout
    return der_to_raw(der)


def pem_to_der_b64(cert: Path) -> str:
    """A PEM certificate's DER, standard base64 (what `x5c` holds)."""
    body = "".join(line for line in cert.read_text().splitlines() if "-----" not in line)
    return base64.b64encode(base64.b64decode(body)).decode()


@dataclass
class TokenServer:
    """Issues registry tokens. `users`: name -> password; `anonymous`: the actions anyone gets."""

    work: Path  # the directory holding the test CA (make_ca's)
    tls: tuple[Path, Path]  # the HTTPS server's cert, key
    users: dict[str, str]
    anonymous: frozenset[str] = frozenset({"pull"})
    lifetime: int = 300
    requests: list[TokenRequest] = field(default_factory=list)
    url: str = ""
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def __post_init__(self) -> None:
        self.cert, self.key = issue_cert(self.work, "token-signer", "acxfs test token signer",
                                         "basicConstraints=CA:FALSE\n"
                                         "keyUsage=critical,digitalSignature\n")

    def token(self, subject: str, access: list[dict[str, object]]) -> str:
        """A JWT the registry accepts: header alg ES256 with x5c, the claims it checks."""
        now = int(time.time())
        header = {"typ": "JWT", "alg": "ES256", "x5c": [pem_to_der_b64(self.cert)]}
        claims = {"iss": ISSUER, "sub": subject, "aud": SERVICE, "exp": now + self.lifetime,
                  "nbf": now - 10, "iat": now, "jti": secrets.token_hex(16), "access": access}
        signing_input = ".".join(b64url(json.dumps(part, separators=(",", ":")).encode())
                                 for part in (header, claims)).encode()
        return f"{signing_input.decode()}.{b64url(sign_es256(self.key, signing_input))}"

    def authenticate(self, header: str | None) -> tuple[bool, str | None]:
        """(acceptable, user) for an Authorization header: no header is anonymous."""
        if header is None:
            return True, None
        scheme, _, value = header.partition(" ")
        if scheme.lower() != "basic":
            return False, None
        try:
            user, _, password = base64.b64decode(value, validate=True).decode().partition(":")
        except (binascii.Error, UnicodeDecodeError):
            return False, None
        if user in self.users and secrets.compare_digest(self.users[user], password):
            return True, user
        return False, None

    def grant(self, scopes: list[str], user: str | None) -> list[dict[str, object]]:
        access: list[dict[str, object]] = []
        for scope in scopes:
            kind, _, rest = scope.partition(":")
            name, _, actions = rest.rpartition(":")
            if kind != "repository" or not name:
                continue
            wanted = [a for a in actions.split(",") if a]
            allowed = [a for a in wanted if user is not None or a in self.anonymous]
            access.append({"type": "repository", "name": name, "actions": allowed})
        return access

    def answer(self, path: str, authorization: str | None) -> tuple[int, bytes, dict[str, str]]:
        query = urllib.parse.parse_qs(urllib.parse.urlsplit(path).query)
        scopes = [s for value in query.get("scope", []) for s in value.split(" ") if s]
        acceptable, user = self.authenticate(authorization)
        status = 200 if acceptable else 401
        with self._lock:
            self.requests.append(TokenRequest(tuple(scopes), user, authorization is not None,
                                              status))
        if not acceptable:
            return 401, b'{"errors":[{"code":"UNAUTHORIZED","message":"bad credentials"}]}', {
                "WWW-Authenticate": 'Basic realm="acxfs test token server"'}
        token = self.token(user or "", self.grant(scopes, user))
        body = json.dumps({"token": token, "access_token": token, "expires_in": self.lifetime,
                           "issued_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())})
        return 200, body.encode(), {"Content-Type": "application/json"}

    @contextlib.contextmanager
    def running(self) -> Iterator[str]:
        """Serve on 127.0.0.1 (HTTPS); yields the realm, https://127.0.0.1:PORT/token."""
        outer = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: object) -> None:
                pass

            def do_GET(self) -> None:
                headers: dict[str, str] = {}
                if urllib.parse.urlsplit(self.path).path != "/token":
                    status, body = 404, b""
                else:
                    status, body, headers = outer.answer(self.path,
                                                         self.headers.get("Authorization"))
                self.send_response(status)
                for k, v in headers.items():
                    self.send_header(k, v)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                with contextlib.suppress(OSError):
                    self.wfile.write(body)

        server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        server.daemon_threads = True
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(str(self.tls[0]), str(self.tls[1]))
        server.socket = context.wrap_socket(server.socket, server_side=True)
        # polled every 50 ms, not 500: `shutdown` waits for the next poll
        thread = threading.Thread(target=server.serve_forever,
                                  kwargs={"poll_interval": POLL}, daemon=True)
        thread.start()
        self.url = f"https://127.0.0.1:{server.server_address[1]}/token"
        try:
            yield self.url
        finally:
            server.shutdown()
            server.server_close()
            thread.join(timeout=10)
