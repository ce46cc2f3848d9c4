"""A loopback fake OCI registry for what the real one (distribution 2.8.2) will not do: a
manifest over 4 MiB, wrong bytes for a requested digest, a stall, a manifest answered with a 307
redirect, a tag list paginated by `Link: <...>; rel="next"`.

    fake = FakeRegistry(tls=(cert, key))            # servers.make_ca's; None: plain http
    digest = fake.add_blob(b"...")
    fake.add_manifest("acx/demo", body, tag="1.0.0")
    fake.lie[digest] = b"other bytes"               # served for that digest
    fake.stall.add(digest)                          # headers, then nothing (bounded)
    fake.redirect["1.0.0"] = "https://localhost:PORT/elsewhere"
    fake.page_size = 2                              # tags/list pages
    with fake.running() as base: ...                # https://127.0.0.1:PORT

It answers `/v2/` 200, manifests by tag or digest and blobs by digest on GET and HEAD (the
Scripted server of `servers`), recording every request in `fake.requests`.

Invariant: it binds 127.0.0.1 only, serves only what the test put in it, a stall waits at most
`servers.STALL` seconds (released when the context ends), and it stops when its context ends.
"""

from __future__ import annotations

import contextlib
import json
import re
import urllib.parse
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from tests.support.oci_client import OCI_MANIFEST, digest_of, image_manifest
from tests.support.servers import Reply, Scripted, Seen

MIB = 1024 * 1024
API = {"Docker-Distribution-Api-Version": "registry/2.0"}


def oversized_manifest(size: int = 4 * MIB + 1) -> bytes:
    """A well-formed OCI image manifest of at least `size` bytes (a padding annotation)."""
    manifest = image_manifest([], annotations={"pad": ""})
    return image_manifest([], annotations={"pad": "x" * max(0, size - len(manifest))})


def unknown(code: str) -> Reply:
    return Reply(404, json.dumps({"errors": [{"code": code, "message": "unknown"}]}).encode(),
                 {"Content-Type": "application/json", **API})


@dataclass
class FakeRegistry:
    tls: tuple[Path, Path] | None = None
    manifests: dict[tuple[str, str], tuple[bytes, str]] = field(default_factory=dict)
    blobs: dict[str, bytes] = field(default_factory=dict)  # digest -> bytes (any repository)
    lie: dict[str, bytes] = field(default_factory=dict)  # digest or tag -> bytes served instead
    stall: set[str] = field(default_factory=set)  # digests or tags that stall
    redirect: dict[str, str] = field(default_factory=dict)  # manifest ref, blob -> 307 to
    page_size: int | None = None  # tags/list page size (None: one page, unless ?n=)
    base: str = ""  # while running: https://127.0.0.1:PORT
    server: Scripted = field(init=False)

    def __post_init__(self) -> None:
        self.server = Scripted(self.route, tls=self.tls)

    @property
    def requests(self) -> list[Seen]:
        return self.server.requests

    def ref(self, repo: str, tag: str | None = None, digest: str | None = None) -> str:
        """oci://127.0.0.1:PORT/REPO[:TAG|@DIGEST] (oci+http:// without TLS), while running."""
        scheme = "oci" if self.tls else "oci+http"
        suffix = f":{tag}" if tag else f"@{digest}" if digest else ""
        return f"{scheme}://{self.base.split('://', 1)[1]}/{repo}{suffix}"

    def add_blob(self, data: bytes) -> str:
        digest = digest_of(data)
        self.blobs[digest] = data
        return digest

    def add_manifest(self, repo: str, data: bytes, tag: str | None = None,
                     media_type: str = OCI_MANIFEST) -> str:
        """Serve `data` by its digest (and `tag`) in `repo`; its digest."""
        digest = digest_of(data)
        self.manifests[repo, digest] = (data, media_type)
        if tag is not None:
            self.manifests[repo, tag] = (data, media_type)
        return digest

    def tags(self, repo: str) -> list[str]:
        return sorted(ref for name, ref in self.manifests if name == repo
                      and not ref.startswith("sha256:"))

    def route(self, path: str) -> Reply | None:
        split = urllib.parse.urlsplit(path)
        if split.path in ("/v2/", "/v2"):
            return Reply(200, b"{}", {"Content-Type": "application/json", **API})
        found = re.fullmatch(r"/v2/(.+)/(manifests|blobs)/([^/]+)", split.path)
        if found:
            repo, kind, ref = found.groups()
            return self.manifest(repo, ref) if kind == "manifests" else self.blob(ref)
        listing = re.fullmatch(r"/v2/(.+)/tags/list", split.path)
        if listing:
            return self.tag_page(listing.group(1), urllib.parse.parse_qs(split.query))
        return None

    def served(self, ref: str, data: bytes, headers: dict[str, str]) -> Reply:
        body = self.lie.get(ref, data)
        return Reply(200, body, {**headers, **API}, stall=ref in self.stall)

    def manifest(self, repo: str, ref: str) -> Reply:
        if ref in self.redirect:
            return Reply(307, headers={"Location": self.redirect[ref], **API})
        if (repo, ref) not in self.manifests:
            return unknown("MANIFEST_UNKNOWN")
        data, media_type = self.manifests[repo, ref]
        return self.served(ref, data, {"Content-Type": media_type,
                                       "Docker-Content-Digest": digest_of(data)})

    def blob(self, digest: str) -> Reply:
        if digest in self.redirect:
            return Reply(307, headers={"Location": self.redirect[digest], **API})
        if digest not in self.blobs:
            return unknown("BLOB_UNKNOWN")
        return self.served(digest, self.blobs[digest], {
            "Content-Type": "application/octet-stream", "Docker-Content-Digest": digest})

    def tag_page(self, repo: str, query: dict[str, list[str]]) -> Reply:
        tags = self.tags(repo)
        size = int(query["n"][0]) if "n" in query else self.page_size
        last = query.get("last", [""])[0]
        rest = [t for t in tags if t > last]
        page = rest if size is None else rest[:size]
        headers = {"Content-Type": "application/json", **API}
        if size is not None and len(rest) > size:
            next_query = urllib.parse.urlencode({"n": size, "last": page[-1]})
            headers["Link"] = f'</v2/{repo}/tags/list?{next_query}>; rel="next"'
        return Reply(200, json.dumps({"name": repo, "tags": page}).encode(), headers)

    @contextlib.contextmanager
    def running(self) -> Iterator[str]:
        """Serve; yields the base URL (https://127.0.0.1:PORT, or http:// without TLS)."""
        with self.server.running() as url:
            self.base = url.rstrip("/")
            try:
                yield self.base
            finally:
                self.base = ""
