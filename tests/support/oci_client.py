"""A raw OCI distribution client for the tests (stdlib urllib), independent of acxfs: it plants
and inspects what acxfs itself would never write (lying manifests, stray tags, referrers).

Invariant: it talks only to the base URL it is given (loopback), verifies TLS against the test
CA it is given, and sends credentials only to that registry and its token realm, never across a
redirect (urllib drops "unredirected" headers when it follows one).
"""

from __future__ import annotations

import base64
import hashlib
import json
import re
import ssl
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass, field
from email.message import Message
from pathlib import Path

OCI_MANIFEST = "application/vnd.oci.image.manifest.v1+json"
OCI_INDEX = "application/vnd.oci.image.index.v1+json"
EMPTY_CONFIG = "application/vnd.oci.empty.v1+json"
EMPTY_DIGEST = "sha256:44136fa355b3678a1146ad16f7e8649e94fb4fc21fe77e8310c060f61caaff8a"
MANIFEST_ACCEPT = ", ".join((OCI_MANIFEST, OCI_INDEX,
                             "application/vnd.docker.distribution.manifest.v2+json"))


def digest_of(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


def descriptor(media_type: str, data: bytes, **extra: object) -> dict[str, object]:
    return {"mediaType": media_type, "digest": digest_of(data), "size": len(data), **extra}


def image_manifest(layers: list[dict[str, object]], artifact_type: str | None = None,
                   subject: dict[str, object] | None = None,
                   annotations: dict[str, str] | None = None) -> bytes:
    """An OCI image manifest with the empty config (push `{}` as its blob first)."""
    manifest: dict[str, object] = {
        "schemaVersion": 2, "mediaType": OCI_MANIFEST,
        "config": {"mediaType": EMPTY_CONFIG, "digest": EMPTY_DIGEST, "size": 2, "data": "e30="},
        "layers": layers}
    if artifact_type is not None:
        manifest["artifactType"] = artifact_type
    if subject is not None:
        manifest["subject"] = subject
    if annotations is not None:
        manifest["annotations"] = annotations
    return json.dumps(manifest, indent=2).encode()


@dataclass(frozen=True)
class Answer:
    status: int
    headers: Message
    body: bytes

    def header(self, name: str) -> str | None:
        return self.headers.get(name)


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args: object, **kwargs: object) -> None:
        return None


def parse_challenge(header: str) -> tuple[str, dict[str, str]]:
    """`Bearer realm="...",service="..."` as ("bearer", {realm:..., service:...})."""
    scheme, _, rest = header.partition(" ")
    return scheme.lower(), dict(re.findall(r'(\w+)="([^"]*)"', rest))


@dataclass
class Client:
    """`base`: https://127.0.0.1:PORT (or http://); `ca`: the CA file to trust; `user`:
    (name, password) for Basic, or for the token realm when the registry asks for Bearer."""

    base: str
    ca: Path | None = None
    user: tuple[str, str] | None = None
    tokens: dict[str, str] = field(default_factory=dict)  # scope -> bearer token
    basic_seen: bool = False  # the registry asked for Basic: send it from then on

    def _context(self) -> ssl.SSLContext | None:
        return ssl.create_default_context(cafile=str(self.ca)) if self.ca else None

    def _open(self, request: urllib.request.Request, follow: bool) -> Answer:
        handlers: list[urllib.request.BaseHandler] = [
            urllib.request.HTTPSHandler(context=self._context())]
        if not follow:
            handlers.append(_NoRedirect())
        opener = urllib.request.build_opener(*handlers)
        try:
            with opener.open(request, timeout=30) as response:
                return Answer(response.status, response.headers, response.read())
        except urllib.error.HTTPError as error:
            return Answer(error.code, error.headers, error.read())

    def _basic(self) -> str | None:
        if self.user is None:
            return None
        return "Basic " + base64.b64encode(":".join(self.user).encode()).decode()

    def bearer(self, challenge: dict[str, str], scope: str) -> str:
        """A token from the realm in `challenge` for `scope` (Basic credentials if any)."""
        query = urllib.parse.urlencode({"service": challenge.get("service", ""), "scope": scope})
        request = urllib.request.Request(f"{challenge['realm']}?{query}")
        if (basic := self._basic()) is not None:
            request.add_unredirected_header("Authorization", basic)
        answer = self._open(request, follow=False)
        if answer.status != 200:
            raise PermissionError(f"token realm answered {answer.status}: {answer.body!r}")
        parsed = json.loads(answer.body)
        return str(parsed.get("token") or parsed["access_token"])

    def request(self, method: str, path: str, body: bytes | None = None,
                headers: dict[str, str] | None = None, scope: str | None = None,
                follow: bool = True) -> Answer:
        """`method` on base + path, answering a 401 challenge once (Basic or Bearer for
        `scope`, default: pull,push on the path's repository for writes, pull for reads)."""
        url = path if path.startswith(("http://", "https://")) else self.base + path
        if scope is None:
            found = re.match(r"/v2/(.+)/(?:manifests|blobs|tags|referrers)/", path)
            actions = "pull" if method in ("GET", "HEAD") else "pull,push"
            scope = f"repository:{found.group(1)}:{actions}" if found else ""
        auth = f"Bearer {self.tokens[scope]}" if scope in self.tokens else (
            self._basic() if self.basic_seen else None)  # a body never races a 401 answer
        for attempt in range(2):
            request = urllib.request.Request(url, data=body, method=method,
                                             headers=dict(headers or {}))
            if auth is not None:
                request.add_unredirected_header("Authorization", auth)
            answer = self._open(request, follow)
            challenge = answer.header("WWW-Authenticate")
            if answer.status != 401 or challenge is None or attempt:
                return answer
            kind, params = parse_challenge(challenge)
            if kind == "basic":
                self.basic_seen = True
                auth = self._basic()
                if auth is None:
                    return answer
            else:
                self.tokens[scope] = self.bearer(params, scope)
                auth = f"Bearer {self.tokens[scope]}"
        raise AssertionError("unreachable")

    def put_blob(self, repo: str, data: bytes) -> str:
        """POST an upload, then PUT it whole with `?digest=`; the digest."""
        digest = digest_of(data)
        started = self.request("POST", f"/v2/{repo}/blobs/uploads/")
        location = started.header("Location")
        if started.status != 202 or location is None:
            raise OSError(f"upload not started: {started.status} {started.body!r}")
        location = urllib.parse.urljoin(self.base + "/", location)
        joiner = "&" if "?" in location else "?"
        done = self.request("PUT", f"{location}{joiner}digest={digest}", body=data,
                            headers={"Content-Type": "application/octet-stream"},
                            scope=f"repository:{repo}:pull,push")
        if done.status != 201:
            raise OSError(f"upload refused: {done.status} {done.body!r}")
        return digest

    def put_manifest(self, repo: str, ref: str, data: bytes,
                     media_type: str = OCI_MANIFEST) -> str:
        """PUT a manifest by tag or digest; the registry's Docker-Content-Digest."""
        answer = self.request("PUT", f"/v2/{repo}/manifests/{ref}", body=data,
                              headers={"Content-Type": media_type})
        if answer.status != 201:
            raise OSError(f"manifest refused: {answer.status} {answer.body!r}")
        return answer.header("Docker-Content-Digest") or digest_of(data)

    def get_manifest(self, repo: str, ref: str, accept: str = MANIFEST_ACCEPT) -> bytes:
        answer = self.request("GET", f"/v2/{repo}/manifests/{ref}", headers={"Accept": accept})
        if answer.status != 200:
            raise FileNotFoundError(f"manifest {repo}:{ref}: {answer.status} {answer.body!r}")
        return answer.body

    def get_blob(self, repo: str, digest: str) -> bytes:
        answer = self.request("GET", f"/v2/{repo}/blobs/{digest}")
        if answer.status != 200:
            raise FileNotFoundError(f"blob {repo}@{digest}: {answer.status} {answer.body!r}")
        return answer.body

    def tags(self, repo: str) -> list[str]:
        """Every tag, following `Link: <...>; rel="next"` pages."""
        found: list[str] = []
        path: str | None = f"/v2/{repo}/tags/list"
        while path is not None:
            answer = self.request("GET", path)
            if answer.status != 200:
                raise FileNotFoundError(f"tags of {repo}: {answer.status} {answer.body!r}")
            found.extend(json.loads(answer.body).get("tags") or [])
            link = re.match(r'\s*<([^>]+)>\s*;\s*rel="?next"?', answer.header("Link") or "")
            path = link.group(1) if link else None
        return found

    def referrers(self, repo: str, digest: str) -> list[dict[str, object]]:
        """The referrers of `digest`: the Referrers API when the registry has it, else the
        `sha256-<hex>` fallback tag's index (none when that tag is absent)."""
        answer = self.request("GET", f"/v2/{repo}/referrers/{digest}",
                              headers={"Accept": OCI_INDEX})
        content_type = (answer.header("Content-Type") or "").split(";")[0]
        if answer.status == 200 and content_type == OCI_INDEX:
            return list(json.loads(answer.body).get("manifests") or [])
        fallback = digest.replace(":", "-", 1)
        try:
            index = self.get_manifest(repo, fallback, accept=OCI_INDEX)
        except FileNotFoundError:
            return []
        return list(json.loads(index).get("manifests") or [])
