"""Logging in to an OCI registry: anonymous first, then what its 401 asks for.

Invariant: credentials are read only after a registry answered 401, from docker's
`config.json` (`$DOCKER_CONFIG`, else `~/.docker/`): `credHelpers[HOST]`, else `credsStore`
(each through `docker-credential-NAME get`), else `auths[HOST]`; they are never written,
logged, or sent over plain HTTP (neither to a registry nor to a token realm).  A `Bearer`
challenge is answered by a token from its realm (https://, or loopback), bounded to 1 MiB,
kept for this command only.  Every failure is one line; none is retried.
"""

from __future__ import annotations

import base64
import binascii
import os
import subprocess
import urllib.parse
from dataclasses import dataclass, field
from pathlib import Path

from acxfs.errors import NetworkError
from acxfs.paths import home
from acxfs.safe import strict_json
from acxfs.sources.http import LOOPBACK, MIB, Http, check_url, without_query
from acxfs.sources.oci.artifact import JSON_DEPTH
from acxfs.sources.oci.reference import OciRef

CONFIG_BYTES = MIB
TOKEN_BYTES = MIB
_PARAM = r'([A-Za-z_]+)="([^"]*)"'


@dataclass(frozen=True)
class Credentials:
    username: str
    secret: str

    def basic(self) -> str:
        pair = f"{self.username}:{self.secret}".encode()
        return "Basic " + base64.b64encode(pair).decode()


@dataclass(frozen=True)
class Challenge:
    scheme: str  # "basic" or "bearer"
    params: dict[str, str]


def parse_challenge(header: str | None) -> Challenge | None:
    """`Basic realm="..."` or `Bearer realm="...",service="...",scope="..."`."""
    if not header:
        return None
    scheme, _, rest = header.strip().partition(" ")
    params: dict[str, str] = {}
    for part in _split_params(rest):
        name, eq, value = part.partition("=")
        if eq:
            params[name.strip().lower()] = value.strip().strip('"')
    return Challenge(scheme.lower(), params)


def _split_params(text: str) -> list[str]:
    parts, current, quoted = [], "", False
    for ch in text:
        if ch == '"':
            quoted = not quoted
        if ch == "," and not quoted:
            parts.append(current)
            current = ""
        else:
            current += ch
    return [*parts, current] if current.strip() else parts


def config_path() -> Path:
    directory = os.environ.get("DOCKER_CONFIG")
    return Path(directory) / "config.json" if directory else home() / ".docker" / "config.json"


def credentials_for(ref: OciRef, timeout: float) -> Credentials | None:
    """HOST's credentials from docker's config.json (None: it names none)."""
    path = config_path()
    doc = _read_config(path)
    if doc is None:
        return None
    host = ref.credential_host
    helpers = doc.get("credHelpers")
    if helpers is not None and not isinstance(helpers, dict):
        raise NetworkError(f"{path}: credHelpers is not an object")
    helper = (helpers or {}).get(host)
    store = doc.get("credsStore")
    for name in (helper, store):
        if name is not None:
            if not isinstance(name, str) or not name or "/" in name:
                raise NetworkError(f"{path}: {name!r} is not a credential helper name")
            return _from_helper(name, ref, timeout)
    auths = doc.get("auths")
    if auths is None:
        return None
    if not isinstance(auths, dict):
        raise NetworkError(f"{path}: auths is not an object")
    entry = next((v for k, v in auths.items() if _host_of(str(k)) == _host_of(host)), None)
    if entry is None:
        return None
    if not isinstance(entry, dict):
        raise NetworkError(f"{path}: auths[{host!r}] is not an object")
    if entry.get("identitytoken"):
        raise NetworkError(f"{ref.host}: identity tokens are not supported")
    return _from_entry(entry, path, host)


def _host_of(name: str) -> str:
    """`HOST`, `https://HOST` and `https://HOST/v1/` name one host in config.json."""
    if "://" in name:
        return urllib.parse.urlsplit(name).netloc.lower()
    return name.split("/", 1)[0].lower()


def _read_config(path: Path) -> dict[str, object] | None:
    try:
        with open(path, "rb") as f:
            data = f.read(CONFIG_BYTES + 1)
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise NetworkError(f"{path}: {exc.strerror or exc}") from None
    if len(data) > CONFIG_BYTES:
        raise NetworkError(f"{path}: over 1 MiB")
    try:
        return strict_json.loads_object(data, JSON_DEPTH)
    except ValueError as exc:
        raise NetworkError(f"{path}: {exc}") from None


def _from_entry(entry: dict[str, object], path: Path, host: str) -> Credentials | None:
    auth = entry.get("auth")
    if isinstance(auth, str) and auth:
        try:
            user, colon, secret = base64.b64decode(auth, validate=True).decode().partition(":")
        except (binascii.Error, UnicodeDecodeError):
            user, colon, secret = "", "", ""
        if not colon or not user:
            raise NetworkError(f"{path}: auths[{host!r}].auth is not base64 of USER:PASSWORD")
        return Credentials(user, secret)
    name, password = entry.get("username"), entry.get("password")
    if isinstance(name, str) and isinstance(password, str) and name:
        return Credentials(name, password)
    return None


def _from_helper(name: str, ref: OciRef, timeout: float) -> Credentials | None:
    program = f"docker-credential-{name}"
    try:
        done = subprocess.run([program, "get"], input=ref.credential_host.encode(),
                              capture_output=True, timeout=timeout, check=False)
    except FileNotFoundError:
        raise NetworkError(f"{program}: not found on PATH") from None
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise NetworkError(f"{program}: {exc}") from None
    out = done.stdout[:CONFIG_BYTES].decode("utf-8", "replace")
    if done.returncode != 0:
        if "credentials not found" in out.lower():
            return None
        reason = (out.strip() or done.stderr.decode("utf-8", "replace").strip())
        raise NetworkError(f"{program}: {reason.splitlines()[0] if reason else 'failed'} "
                           f"(exit {done.returncode})")
    try:
        doc = strict_json.loads_object(out.encode(), JSON_DEPTH)
        user, secret = doc["Username"], doc["Secret"]
    except (ValueError, KeyError):
        raise NetworkError(f"{program}: its answer is not {{Username, Secret}} JSON") from None
    if not isinstance(user, str) or not isinstance(secret, str):
        raise NetworkError(f"{program}: its answer is not {{Username, Secret}} JSON")
    if user == "<token>":
        raise NetworkError(f"{ref.host}: identity tokens are not supported")
    return Credentials(user, secret)


@dataclass
class Login:
    """The Authorization one command sends to one registry, per scope."""

    ref: OciRef
    http: Http
    tokens: dict[str, str] = field(default_factory=dict)  # scope -> Authorization value
    credentials: Credentials | None = None
    read: bool = False  # config.json asked already
    basic: str | None = None  # a Basic challenge answered: sent for every scope

    def header(self, scope: str) -> dict[str, str]:
        value = self.basic or self.tokens.get(scope)
        return {} if value is None else {"Authorization": value}

    def answer(self, www_authenticate: str | None, scope: str) -> None:
        """Prepare the Authorization for `scope` after a 401 (NetworkError when there is
        none to give, or the one given was refused)."""
        host = self.ref.host
        if self.basic is not None or scope in self.tokens:
            if self.credentials is not None:
                raise NetworkError(f"{host}: the registry refused the credentials (401)")
            raise self._login_needed()
        challenge = parse_challenge(www_authenticate)
        if challenge is None or challenge.scheme not in ("basic", "bearer"):
            raise NetworkError(f"{host}: the registry answered 401 without a Basic or Bearer "
                               "challenge")
        if challenge.scheme == "basic":
            creds = self._credentials()
            if creds is None:
                raise self._login_needed()
            self.basic = creds.basic()
            return
        realm = self._realm(challenge)  # refused before any credential is read
        self.tokens[scope] = "Bearer " + self._token(realm, challenge, scope,
                                                     self._credentials())

    def _login_needed(self) -> NetworkError:
        if self.ref.plain:
            return NetworkError(f"{self.ref.host}: the registry asks for a login (401); acxfs "
                                "sends no credentials over plain HTTP")
        return NetworkError(f"{self.ref.host}: the registry asks for a login (401); docker "
                            f"login {self.ref.host}")

    def _credentials(self) -> Credentials | None:
        if self.ref.plain:
            return None
        if not self.read:
            self.credentials = credentials_for(self.ref, self.http.timeout)
            self.read = True
        return self.credentials

    def _realm(self, challenge: Challenge) -> str:
        """The token realm: https://, or plain http only for a registry on loopback."""
        realm = challenge.params.get("realm", "")
        shown = without_query(realm) or "(no realm)"
        try:
            parts = check_url(realm)
        except NetworkError:
            raise NetworkError(f"{shown}: token realm is not HTTPS") from None
        if parts.scheme != "https" and self.ref.hostname not in LOOPBACK:
            raise NetworkError(f"{shown}: token realm is not HTTPS")
        return realm

    def _token(self, realm: str, challenge: Challenge, scope: str,
               creds: Credentials | None) -> str:
        parts = urllib.parse.urlsplit(realm)
        query = {"scope": scope}
        if "service" in challenge.params:
            query["service"] = challenge.params["service"]
        url = realm + ("&" if parts.query else "?") + urllib.parse.urlencode(query)
        headers = {} if creds is None or parts.scheme != "https" else \
            {"Authorization": creds.basic()}
        answer = self.http.request("GET", url, headers=headers, limit=TOKEN_BYTES)
        if answer.status == 401:
            if headers:
                raise NetworkError(f"{self.ref.host}: the registry refused the credentials "
                                   "(401)")
            raise self._login_needed()
        shown = without_query(realm)
        if answer.status != 200:
            raise NetworkError(f"{shown}: HTTP {answer.status}")
        try:
            doc: dict[str, object] | None = strict_json.loads_object(answer.body, JSON_DEPTH)
        except ValueError:
            doc = None
        token = doc.get("token") or doc.get("access_token") if doc is not None else None
        if not isinstance(token, str) or not token or not token.isprintable():
            raise NetworkError(f"{shown}: its answer holds no token")
        return token
