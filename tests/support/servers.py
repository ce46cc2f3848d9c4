"""Loopback servers for the source tests: `python -m http.server` over a directory, and a
scripted server (plain or TLS with a CA the test makes; GET and HEAD, each request recorded with
its headers) for what a static server cannot do: redirects, stalls, bodies that lie about their
length, an azphalt Repository API.

Invariant: every server binds 127.0.0.1 on a port the kernel picks, and stops when its
context ends; a stall is bounded (it waits for the stop, at most `STALL` seconds).
"""

from __future__ import annotations

import contextlib
import http.server
import re
import ssl
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

STALL = 20.0  # seconds a stalled answer waits at most
POLL = 0.05  # seconds between the serving loop's checks for a stop


@contextlib.contextmanager
def static_server(directory: Path, log: Path | None = None,
                  port: int = 0) -> Iterator[str]:
    """`python -m http.server --bind 127.0.0.1` over `directory` (on `port`, 0: one the
    kernel picks), its request log (a line per request with its status code) into `log`;
    yields its base URL."""
    sink = open(log, "ab") if log is not None else subprocess.DEVNULL  # noqa: SIM115
    proc = subprocess.Popen(
        [sys.executable, "-u", "-m", "http.server", "--bind", "127.0.0.1", "--directory",
         str(directory), str(port)], stdout=subprocess.PIPE, stderr=sink, text=True)
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        found = re.search(r"port (\d+)", line)
        assert found, line
        yield f"http://127.0.0.1:{found.group(1)}/"
    finally:
        proc.kill()
        proc.wait(timeout=10)
        if log is not None:
            sink.close()  # type: ignore[union-attr]


REQUEST_LINE = re.compile(r'"(GET|HEAD) (\S+) HTTP/[\d.]+" (\d{3})')


def logged_requests(log: Path) -> list[tuple[str, int]]:
    """The (path, status) of each request a `static_server` logged, in order."""
    text = log.read_text(errors="replace") if log.exists() else ""
    return [(m.group(2), int(m.group(3))) for m in REQUEST_LINE.finditer(text)]


@dataclass(frozen=True)
class Reply:
    status: int = 200
    body: bytes = b""
    headers: dict[str, str] = field(default_factory=dict)
    length: int | None = None  # a Content-Length that differs from the body's (-1: none)
    stall: bool = False  # send the headers, then nothing


Route = Callable[[str], Reply | None]


@dataclass(frozen=True)
class Seen:
    """One request a scripted server received: its method, path with query, and headers."""

    method: str
    path: str
    headers: dict[str, str]


@dataclass
class Scripted:
    """A server answering each GET (and HEAD, without the body) by `route(path_with_query)`
    (None: 404)."""

    route: Route
    tls: tuple[Path, Path] | None = None  # cert, key
    stop: threading.Event = field(default_factory=threading.Event)
    seen: list[str] = field(default_factory=list)
    requests: list[Seen] = field(default_factory=list)

    @contextlib.contextmanager
    def running(self) -> Iterator[str]:
        outer = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: object) -> None:
                pass

            def do_HEAD(self) -> None:
                self.do_GET(body=False)

            def do_GET(self, body: bool = True) -> None:
                outer.seen.append(self.path)
                outer.requests.append(Seen(self.command, self.path, dict(self.headers.items())))
                reply = outer.route(self.path) or Reply(404, b'{"error":{"code":"not_found",'
                                                             b'"message":"no such thing"}}')
                self.send_response(reply.status)
                for k, v in reply.headers.items():
                    self.send_header(k, v)
                if reply.length != -1:
                    self.send_header("Content-Length", str(
                        len(reply.body) if reply.length is None else reply.length))
                self.end_headers()
                if reply.stall:
                    self.wfile.flush()
                    outer.stop.wait(STALL)
                    return
                if body:
                    with contextlib.suppress(OSError):
                        self.wfile.write(reply.body)

        server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        server.daemon_threads = True
        if self.tls is not None:
            context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            context.load_cert_chain(str(self.tls[0]), str(self.tls[1]))
            server.socket = context.wrap_socket(server.socket, server_side=True)
        # polled every 50 ms, not 500: `shutdown` waits for the next poll
        thread = threading.Thread(target=server.serve_forever,
                                  kwargs={"poll_interval": POLL}, daemon=True)
        thread.start()
        scheme = "https" if self.tls else "http"
        try:
            yield f"{scheme}://127.0.0.1:{server.server_address[1]}/"
        finally:
            self.stop.set()
            server.shutdown()
            server.server_close()


def files_route(root: Path) -> Route:
    """Serve the files below `root` (what a static registry host does)."""
    def route(path: str) -> Reply | None:
        rel = path.split("?", 1)[0].lstrip("/")
        target = (root / rel).resolve()
        if root.resolve() not in target.parents or not target.is_file():
            return None
        return Reply(200, target.read_bytes())
    return route


def make_ca(work: Path, extra_sans: tuple[str, ...] = ()) -> tuple[Path, Path, Path]:
    """A test CA and a server certificate for 127.0.0.1 signed by it: (ca, cert, key).

    `extra_sans` (e.g. "DNS:localhost") join IP:127.0.0.1 in the server certificate; the CA's
    key stays in `work` (ca.key) for `issue_cert`."""
    work.mkdir(parents=True, exist_ok=True)
    ca, ca_key = work / "ca.pem", work / "ca.key"
    _openssl("req", "-x509", *_EC, "-keyout", ca_key, "-out", ca, "-days", "2", "-subj",
             "/CN=acxfs test CA", "-addext", "basicConstraints=critical,CA:TRUE",
             "-addext", "keyUsage=critical,keyCertSign,cRLSign")
    sans = ",".join(("IP:127.0.0.1", *extra_sans))
    cert, key = issue_cert(work, "srv", "127.0.0.1",
                           f"subjectAltName={sans}\nbasicConstraints=CA:FALSE\n"
                           "extendedKeyUsage=serverAuth\n")
    return ca, cert, key


_EC = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]


def _openssl(*args: object) -> None:
    subprocess.run(["openssl", *map(str, args)], check=True, capture_output=True)


def issue_cert(work: Path, stem: str, common_name: str, extensions: str) -> tuple[Path, Path]:
    """A P-256 key and a certificate for it signed by the CA `make_ca` left in `work`, with
    the given extension lines: (work/STEM.pem, work/STEM.key)."""
    cert, key, csr, ext = (work / f"{stem}.pem", work / f"{stem}.key", work / f"{stem}.csr",
                           work / f"{stem}.ext")
    _openssl("req", *_EC, "-keyout", key, "-out", csr, "-subj", f"/CN={common_name}")
    ext.write_text(extensions)
    _openssl("x509", "-req", "-in", csr, "-CA", work / "ca.pem", "-CAkey", work / "ca.key",
             "-CAcreateserial", "-out", cert, "-days", "2", "-extfile", ext)
    return cert, key
