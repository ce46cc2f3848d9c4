"""One repository of an OCI registry, spoken to by the distribution spec over `Http`.

Invariant: every call is one request (retried once with a login after a 401; credentials go
only to the registry's own origin, never to a URL it points elsewhere) bounded as the spec's
objects are: a manifest 4 MiB, a tag list 4 MiB a page and 100 pages, a blob exactly the size
its manifest names.  A manifest asked by digest must hash to it; a blob's bytes are
handed on unchecked, to a caller that hashes them; what the registry says is never trust.
Uploads are a monolithic POST-then-PUT (`?digest=`) and the digest the registry returns must
be the one sent.  Registry errors are one line: `REF: CODE: message`.
"""

from __future__ import annotations

import re
import urllib.parse
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import IO

from acxfs.errors import NetworkError, SourceError
from acxfs.safe import strict_json
from acxfs.sources.http import Answer, Http, retry_after_of, without_query
from acxfs.sources.oci.artifact import INDEX, JSON_DEPTH, MANIFEST, MANIFEST_BYTES, digest_of
from acxfs.sources.oci.login import Login
from acxfs.sources.oci.reference import OciRef

TAGS_PAGE_BYTES = 4 * 1024 * 1024
TAGS_PAGES = 100
BLOB_REDIRECTS = 3
_NEXT = re.compile(r'<([^>]+)>\s*;\s*rel="?next"?')


@dataclass
class Repository:
    """One repository, its login kept for this command."""

    ref: OciRef
    http: Http
    push: bool = False
    login: Login = field(init=False)

    def __post_init__(self) -> None:
        self.login = Login(self.ref, self.http)

    @property
    def scope(self) -> str:
        return f"repository:{self.ref.repo}:{'pull,push' if self.push else 'pull'}"

    def url(self, path: str) -> str:
        return f"{self.ref.api}{self.ref.repo}/{path}"

    def call(self, method: str, url: str, *, headers: Mapping[str, str] | None = None,
             data: bytes | IO[bytes] | None = None, limit: int | None = None,
             size: int | None = None, sink: Callable[[bytes], None] | None = None,
             follow: int = 0, rewind: Callable[[], None] | None = None,
             what: str | None = None, revalidate: bool = False) -> Answer:
        """`method url`, answered by a login after a 401 and asked once more.  A URL the
        registry points elsewhere (an upload's `Location`, a next page's `Link`, a blob's
        redirect) on another origin than its API gets no credentials, and a 401 from there
        is answered by no login: it is refused.  `what` names the request when offline
        (default: the repository)."""
        what = what or self.ref.text
        if self.http.offline:
            raise NetworkError(f"{what} needs a download from {self.ref.host}; offline")
        own = _origin(url) == _origin(self.ref.api)
        for attempt in (0, 1):
            sent = {**(headers or {}), **(self.login.header(self.scope) if own else {})}
            answer = self.http.request(method, url, headers=sent, data=data, limit=limit,
                                       size=size, sink=sink, what=what, follow=follow,
                                       revalidate=revalidate)
            if answer.status == 401 and not (own and _origin(answer.url) == _origin(url)):
                raise NetworkError(f"{without_query(answer.url)}: HTTP 401 (acxfs logs in "
                                   f"only to {self.ref.host} itself)")
            if answer.status != 401 or attempt:
                if answer.status == 401:
                    self.login.answer(answer.header("WWW-Authenticate"), self.scope)
                return answer
            self.login.answer(answer.header("WWW-Authenticate"), self.scope)
            if rewind is not None:
                rewind()
        raise AssertionError("unreachable")

    def refused(self, answer: Answer, what: str) -> Exception:
        """The one line for a registry's error answer: 404 is content (exit 1)."""
        code, message = _error_of(answer.body)
        text = f"{what}: {code}: {message}" if code else f"{what}: HTTP {answer.status}"
        return SourceError(text) if answer.status == 404 else \
            NetworkError(text, retry_after_of(answer))

    # --- reading -------------------------------------------------------------------------

    def manifest(self, reference: str, accept: str = f"{MANIFEST}, {INDEX}") -> bytes | None:
        """The manifest `reference` (a tag or a digest) names, None when the registry has
        none; by digest, only bytes that hash to it."""
        where = self._named(reference)
        answer = self.call("GET", self.url(f"manifests/{reference}"),
                           headers={"Accept": accept}, limit=MANIFEST_BYTES, what=where,
                           revalidate=True)
        if answer.status == 404:
            return None
        if answer.status != 200:
            raise self.refused(answer, where)
        if reference.startswith("sha256:") and digest_of(answer.body) != reference:
            raise SourceError(f"{where}: the registry sent a manifest whose sha256 is "
                              f"{digest_of(answer.body)[7:]}")
        return answer.body

    def require_manifest(self, reference: str) -> bytes:
        body = self.manifest(reference)
        if body is None:
            raise SourceError(f"{self._named(reference)}: MANIFEST_UNKNOWN: manifest unknown")
        return body

    def _named(self, reference: str) -> str:
        """REPO:TAG or REPO@DIGEST, as refusals name a manifest."""
        if reference.startswith("sha256:"):
            return self.ref.at_digest(reference).text
        return self.ref.at_tag(reference).text

    def tags(self) -> list[str]:
        """Every tag, page by page (`Link: rel="next"`), at most 100 pages of 4 MiB."""
        url = self.url("tags/list")
        found: list[str] = []
        for _ in range(TAGS_PAGES):
            answer = self.call("GET", url, limit=TAGS_PAGE_BYTES, revalidate=True)
            if answer.status == 404:
                return found
            if answer.status != 200:
                raise self.refused(answer, self.ref.key)
            try:
                page = strict_json.loads_object(answer.body, JSON_DEPTH).get("tags") or []
            except ValueError:
                raise SourceError(f"{without_query(url)}: not a tag list") from None
            if not isinstance(page, list) or not all(isinstance(t, str) for t in page):
                raise SourceError(f"{without_query(url)}: not a tag list")
            found += page
            link = _NEXT.search(answer.header("Link") or "")
            if link is None:
                return found
            url = urllib.parse.urljoin(url, link.group(1))
        raise SourceError(f"{self.ref.key}: more than {TAGS_PAGES} pages of tags")

    def blob(self, digest: str, size: int, sink: Callable[[bytes], None]) -> None:
        """The blob's bytes, exactly `size` of them, into `sink` (unchecked: hash them)."""
        answer = self.call("GET", self.url(f"blobs/{digest}"), size=size, sink=sink,
                           follow=BLOB_REDIRECTS)
        if answer.status != 200:
            raise self.refused(answer, f"{self.ref.key}@{digest}")

    def has_blob(self, digest: str) -> bool:
        answer = self.call("HEAD", self.url(f"blobs/{digest}"), follow=BLOB_REDIRECTS)
        if answer.status in (200, 204):
            return True
        if answer.status == 404:
            return False
        raise self.refused(answer, f"{self.ref.key}@{digest}")

    # --- writing -------------------------------------------------------------------------

    def upload(self, digest: str, size: int, open_body: Callable[[], IO[bytes] | bytes]) -> None:
        """Put a blob: POST an upload, then PUT its bytes with `?digest=`."""
        answer = self.call("POST", self.url("blobs/uploads/"), data=b"",
                           headers={"Content-Length": "0"})
        location = answer.header("Location")
        if answer.status != 202 or not location:
            raise self.refused(answer, self.ref.key)
        target = urllib.parse.urljoin(self.url("blobs/uploads/"), location)
        target += ("&" if "?" in target else "?") + urllib.parse.urlencode({"digest": digest})
        body = open_body()
        try:
            answer = self.call("PUT", target, data=body,
                               headers={"Content-Type": "application/octet-stream",
                                        "Content-Length": str(size)},
                               rewind=None if isinstance(body, bytes) else
                               lambda: _rewind(body))
        finally:
            if not isinstance(body, bytes):
                body.close()
        if answer.status != 201:
            raise self.refused(answer, self.ref.key)
        self._same_digest(answer, digest)

    def put_manifest(self, reference: str, body: bytes, media_type: str = MANIFEST) -> Answer:
        answer = self.call("PUT", self.url(f"manifests/{reference}"), data=body,
                           headers={"Content-Type": media_type,
                                    "Content-Length": str(len(body))})
        if answer.status != 201:
            raise self.refused(answer, self.ref.at_tag(reference).text
                               if not reference.startswith("sha256:") else self.ref.key)
        self._same_digest(answer, digest_of(body))
        return answer

    def _same_digest(self, answer: Answer, digest: str) -> None:
        said = answer.header("Docker-Content-Digest")
        if said is not None and said != digest:
            raise SourceError(f"{self.ref.key}: the registry stored {said}, not {digest}")


def _origin(url: str) -> tuple[str, str]:
    parts = urllib.parse.urlsplit(url)
    return parts.scheme.lower(), parts.netloc.lower()


def _rewind(body: IO[bytes] | bytes) -> None:
    if not isinstance(body, bytes):
        body.seek(0)


def _error_of(body: bytes) -> tuple[str, str]:
    """The first `{"errors": [{"code", "message"}]}` of a registry's answer."""
    try:
        first = strict_json.loads_object(body, JSON_DEPTH)["errors"][0]  # type: ignore[index]
        code, message = first.get("code"), first.get("message")
    except (ValueError, KeyError, IndexError, TypeError, AttributeError):
        return "", ""
    if not isinstance(code, str) or not code.isprintable():
        return "", ""
    return code, message if isinstance(message, str) and message.isprintable() else ""
