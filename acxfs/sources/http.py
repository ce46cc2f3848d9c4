"""Reading from a source by HTTP(S): one request, answered or refused, never followed further.

Invariant: every request goes through `Http.request`, which (1) refuses before any connection
a plain `http://` URL whose host is not loopback and any request at all when offline, (2)
verifies TLS against the system CAs (`SSL_CERT_FILE` honoured) with no proxy, (3) follows no
redirect unless its caller allows some (an OCI blob: three at most, each to https:// or
loopback, never carrying `Authorization` to another scheme or host), (4) gives up after
`timeout` seconds without progress, per connect and per read, and (5) hands each chunk of the
body to its caller only while the body stays within its bound: at most `limit` bytes, or
exactly `size` bytes.  Only a GET its caller marks `revalidate` (an index, ledger, feed, tag
list or manifest) is asked conditionally from the `revalidator`'s cache; a token, a blob or
anything else is always asked as it is.  Nothing here decides what a body means; the clients
of an index, a repository or an OCI registry parse what it returns.
"""

from __future__ import annotations

import datetime as dt
import os
import urllib.parse
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import IO, TYPE_CHECKING

from acxfs.errors import NetworkError, SourceError
from acxfs.sources.revalidate import Cached, Revalidator

if TYPE_CHECKING:
    import urllib.request
    from email.message import Message

# The HTTP client's own modules (urllib.request, http.client, ssl, email) are imported by the
# first request, not with this module: every acxfs command imports it, few of them connect,
# and loading those modules is about a tenth of a short command's start-up.

DEFAULT_TIMEOUT = 30.0
MIB = 1024 * 1024
LOOPBACK = frozenset({"127.0.0.1", "::1", "localhost"})
CHUNK = 64 * 1024


def mib(limit: int) -> str:
    return f"{limit // MIB} MiB" if limit % MIB == 0 else f"{limit} bytes"


def check_url(url: str) -> urllib.parse.SplitResult:
    """The parts of `url`, if acxfs may ever ask it (https, or plain http to loopback)."""
    parts = urllib.parse.urlsplit(url)
    if parts.scheme == "https" and parts.hostname:
        return parts
    if parts.scheme == "http" and parts.hostname:
        if parts.hostname not in LOOPBACK:
            raise NetworkError(f"{url}: plain HTTP only for loopback")
        return parts
    raise NetworkError(f"{url}: not an https:// URL")


def _no_redirects() -> urllib.request.HTTPRedirectHandler:
    """A redirect handler that follows nothing (urllib then raises the 3xx as an HTTPError)."""
    import urllib.request

    class NoRedirects(urllib.request.HTTPRedirectHandler):
        def redirect_request(self, req: urllib.request.Request, fp: IO[bytes], code: int,
                             msg: str, headers: Message, newurl: str) -> None:
            return None

    return NoRedirects()


def _headers() -> Message:
    """An empty header block (`email.message.Message`, as urllib's responses carry)."""
    from email.message import Message

    return Message()


@dataclass(frozen=True)
class Answer:
    """A response acxfs read whole: its status, headers and (bounded) body, and the URL that
    answered (another than the one asked only after a followed redirect)."""

    status: int
    body: bytes
    headers: Message = field(default_factory=_headers)
    url: str = ""
    reason: str = ""  # the status line's reason phrase

    def header(self, name: str) -> str | None:
        value = self.headers.get(name)
        return None if value is None else str(value)


@dataclass
class Http:
    """The one way acxfs talks to a server; `offline` refuses every request."""

    timeout: float = DEFAULT_TIMEOUT
    offline: bool = False
    headers: Mapping[str, str] = field(default_factory=dict)
    revalidator: Revalidator | None = None  # conditional GETs of what was read before
    received: int = 0  # body bytes read so far (a check's cost)
    _built: urllib.request.OpenerDirector | None = field(default=None, init=False, repr=False,
                                                         compare=False)

    def _opener(self) -> urllib.request.OpenerDirector:
        """One opener per `Http` (loading the CAs costs more than a loopback request)."""
        if self._built is None:
            import ssl
            import urllib.request

            cafile = os.environ.get("SSL_CERT_FILE") or None
            context = ssl.create_default_context(cafile=cafile)
            self._built = urllib.request.build_opener(
                urllib.request.ProxyHandler({}), _no_redirects(),
                urllib.request.HTTPSHandler(context=context))
        return self._built

    def refuse_offline(self, what: str, url: str) -> None:
        if self.offline:
            raise NetworkError(f"{what} needs a download from {url}; offline")

    def fetch(self, url: str, *, limit: int | None = None, size: int | None = None,
              sink: Callable[[bytes], None] | None = None, what: str | None = None,
              errors_ok: bool = False, revalidate: bool = False) -> Answer:
        """GET `url`.  With `size`: the body must be exactly `size` bytes, each chunk given to
        `sink`; else the body (at most `limit` bytes) is returned.  A status other than 200
        is refused unless `errors_ok` (then its body, bounded by `limit`, is returned).
        `revalidate`: a document read again each round, asked conditionally (`request`)."""
        answer = self.request("GET", url, limit=limit, size=size, sink=sink, what=what,
                              revalidate=revalidate)
        if answer.status != 200 and not errors_ok:
            raise status_error(url, answer)
        return answer

    def request(self, method: str, url: str, *, headers: Mapping[str, str] | None = None,
                data: bytes | IO[bytes] | None = None, limit: int | None = None,
                size: int | None = None, sink: Callable[[bytes], None] | None = None,
                what: str | None = None, follow: int = 0, revalidate: bool = False) -> Answer:
        """One request and its answer, whatever its status.  A 2xx body is bounded as for
        `fetch` (another status's by `limit`, else 1 MiB); a 3xx is refused unless `follow`
        allows it: then up to `follow` redirects are taken, each to https:// (plain http only
        when the request began on loopback), without `Authorization` when the scheme or host
        changes.  `revalidate` (a GET of a whole body, no redirect allowed): asked with the
        validators of the body the `revalidator` kept for it (`_revalidated`); no other
        request ever is.  A redirect target is named in messages without its query (a
        pre-signed URL's signature is a credential)."""
        sent = dict(headers or {})
        if revalidate and method == "GET" and sink is None and size is None and not follow \
                and self.revalidator is not None:
            return self._revalidated(url, sent, limit, what)
        plain_start = urllib.parse.urlsplit(url).scheme == "http"
        label = url
        for hop in range(follow + 1):
            answer = self._once(method, url, sent, data, limit, size, sink, what, label)
            if not 300 <= answer.status < 400:
                return answer
            target = urllib.parse.urljoin(url, answer.header("Location") or "")
            shown = without_query(target)
            if hop == follow:
                break
            if urllib.parse.urlsplit(target).scheme != "https" and not (
                    plain_start and may_ask(target)):
                raise NetworkError(f"{label}: redirected to {shown}, not HTTPS")
            if urllib.parse.urlsplit(target)[:2] != urllib.parse.urlsplit(url)[:2]:
                sent = {k: v for k, v in sent.items() if k.lower() != "authorization"}
            url, label = target, shown
        if follow:
            raise NetworkError(f"{label}: more than {follow} redirects")
        raise NetworkError(f"{label}: redirected to {shown}; acxfs follows no redirects")

    def _revalidated(self, url: str, headers: dict[str, str], limit: int | None,
                     what: str | None) -> Answer:
        """A GET that asks with the validators of the body kept from last time: a `304`
        answers with that body (as a `200`), a new `200` with validators replaces it."""
        assert self.revalidator is not None
        bound = MIB if limit is None else limit
        accept = headers.get("Accept", "")
        credential = next((value for name, value in {**self.headers, **headers}.items()
                           if name.lower() == "authorization"), "")
        cached = self.revalidator.get(url, accept, bound, credential)
        asked = {**headers, **(cached.validators() if cached else {})}
        answer = self._once("GET", url, asked, None, bound, None, None, what, url)
        if answer.status == 304 and cached is not None:
            kept = _headers()
            if cached.content_type:
                kept["Content-Type"] = cached.content_type
            for name, value in answer.headers.items():
                if name.lower() != "content-type":
                    kept[name] = value
            return Answer(200, cached.body, kept, url, "OK (not modified)")
        if 300 <= answer.status < 400 and answer.status != 304:
            target = urllib.parse.urljoin(url, answer.header("Location") or "")
            raise NetworkError(f"{url}: redirected to {without_query(target)}; acxfs follows "
                               "no redirects")
        if answer.status == 200:
            self.revalidator.put(url, accept, Cached(
                answer.body, answer.header("ETag"), settled_modified(answer),
                answer.header("Content-Type")), credential)
        return answer

    def _once(self, method: str, url: str, headers: Mapping[str, str],
              data: bytes | IO[bytes] | None, limit: int | None, size: int | None,
              sink: Callable[[bytes], None] | None, what: str | None, label: str) -> Answer:
        import http.client
        import urllib.error
        import urllib.request

        check_url(url)
        self.refuse_offline(what or label, label)
        request = urllib.request.Request(
            url, data=data, method=method,
            headers={"Accept-Encoding": "identity", "User-Agent": "acxfs", **self.headers,
                     **headers})
        try:
            response = self._opener().open(request, timeout=self.timeout)
        except urllib.error.HTTPError as exc:
            try:
                body = b"" if 300 <= exc.code < 400 or method == "HEAD" else \
                    self._read(exc, label, MIB if limit is None else min(limit, MIB), None,
                               None)
            finally:
                exc.close()
            return Answer(exc.code, body, exc.headers, url, str(exc.reason or ""))
        except urllib.error.URLError as exc:
            raise self._failure(label, exc.reason) from None
        except (OSError, ValueError, http.client.HTTPException) as exc:
            raise self._failure(label, exc) from None
        with response:
            if method == "HEAD":
                return Answer(response.status, b"", response.headers, url, response.reason)
            if limit is None and size is None:
                limit = MIB
            return Answer(response.status, self._read(response, label, limit, size, sink),
                          response.headers, url, response.reason)

    def _failure(self, url: str, reason: object) -> NetworkError:
        import http.client
        import ssl

        if isinstance(reason, TimeoutError):
            return NetworkError(f"{url}: no answer in {self.timeout:g} s")
        if isinstance(reason, ssl.SSLCertVerificationError):
            return NetworkError(f"{url}: certificate verify failed ({reason.verify_message})")
        if isinstance(reason, ssl.SSLError):
            return NetworkError(f"{url}: TLS failed ({reason.reason or reason})")
        if isinstance(reason, OSError):
            return NetworkError(f"{url}: {reason.strerror or reason}")
        if isinstance(reason, http.client.HTTPException):
            return NetworkError(f"{url}: not an HTTP answer ({type(reason).__name__})")
        return NetworkError(f"{url}: {reason}")

    def _read(self, response: IO[bytes], url: str, limit: int | None, size: int | None,
              sink: Callable[[bytes], None] | None) -> bytes:
        import http.client

        bound = size if size is not None else limit
        assert bound is not None
        declared = _length(response)
        if declared is not None and declared > bound:
            raise self._too_long(url, bound, size)
        got = 0
        parts: list[bytes] = []
        try:
            while True:
                chunk = response.read(min(CHUNK, bound + 1 - got))
                if not chunk:
                    break
                got += len(chunk)
                self.received += len(chunk)
                if got > bound:
                    raise self._too_long(url, bound, size)
                if sink is not None:
                    sink(chunk)
                else:
                    parts.append(chunk)
        except TimeoutError:
            raise NetworkError(f"{url}: no answer in {self.timeout:g} s") from None
        except (OSError, http.client.HTTPException) as exc:
            raise self._failure(url, exc) from None
        if size is not None and got != size:
            raise SourceError(f"{url}: {got} bytes, not {size}")
        return b"".join(parts)

    @staticmethod
    def _too_long(url: str, bound: int, size: int | None) -> SourceError:
        if size is not None:
            return SourceError(f"{url}: more than {size} bytes, its stated size")
        return SourceError(f"{url}: over {mib(bound)}")


def retry_after_of(answer: Answer) -> float | None:
    """The seconds a `Retry-After` header asks to wait (delta-seconds or an HTTP date)."""
    value = (answer.header("Retry-After") or "").strip()
    if not value:
        return None
    if value.isascii() and value.isdigit():
        return min(float(value), 10.0 ** 9)
    import email.utils

    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        return None
    return max(0.0, (when - dt.datetime.now(dt.UTC)).total_seconds())


def settled_modified(answer: Answer) -> str | None:
    """The answer's `Last-Modified` when it can stand for this body: at least a second before
    its `Date` (RFC 9110 8.8.2.2).  A body changed again within the second it was sent would
    carry the same Last-Modified, so asking `If-Modified-Since` with it would keep the old
    body for good; such an answer gets no validator (the next GET asks unconditionally)."""
    modified, sent = answer.header("Last-Modified"), answer.header("Date")
    if modified is None or sent is None:
        return None
    import email.utils

    try:
        then, now = (email.utils.parsedate_to_datetime(v) for v in (modified, sent))
    except (TypeError, ValueError):
        return None
    if then.tzinfo is None or now.tzinfo is None:
        return None
    return modified if (now - then).total_seconds() >= 1 else None


def status_error(url: str, answer: Answer, said: str = "") -> NetworkError:
    """The line for an answer whose status the caller cannot use, carrying the server's
    `Retry-After` (`said`: what the server's error body said, else its reason phrase)."""
    tail = said or f" {answer.reason}".rstrip()
    return NetworkError(f"{url}: HTTP {answer.status}{tail}", retry_after_of(answer))


def may_ask(url: str) -> bool:
    """Whether `check_url` admits `url` (plain http: loopback only)."""
    try:
        check_url(url)
    except NetworkError:
        return False
    return True


def without_query(url: str) -> str:
    """`url` as messages name it: no query, no fragment, no user information."""
    parts = urllib.parse.urlsplit(url)
    netloc = parts.netloc.rpartition("@")[2]
    return urllib.parse.urlunsplit((parts.scheme, netloc, parts.path, "", ""))


def _length(response: IO[bytes]) -> int | None:
    headers = getattr(response, "headers", None)
    value = headers.get("Content-Length") if headers is not None else None
    try:
        return int(value) if value is not None else None
    except ValueError:
        return None
