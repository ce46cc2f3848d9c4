"""The daemon's control channel: one JSON request and one JSON answer per connection.

Invariant: only the daemon's owner can reach it: the socket lies in a directory of mode 0700
that the owner owns, and the daemon also checks each peer's credentials (SO_PEERCRED) and
closes a connection from any other user before reading it.  Requests are bounded in size and
time; the channel carries names of store files, never bundle bytes.
"""

from __future__ import annotations

import contextlib
import enum
import json
import os
import socket
import struct
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

from acxfs.errors import DaemonDown, EnvironmentProblem
from acxfs.safe import strict_json

MAX_MESSAGE = 1024 * 1024
TIMEOUT = 120.0  # a load checks a bundle; a big one takes a while

Handler = Callable[[dict[str, object]], dict[str, object]]


def _read_message(conn: socket.socket) -> dict[str, object]:
    data = b""
    while not data.endswith(b"\n"):
        piece = conn.recv(65536)
        if not piece:
            break
        data += piece
        if len(data) > MAX_MESSAGE:
            raise ValueError("message too large")
    doc = strict_json.loads(data.decode("utf-8"))
    if not isinstance(doc, dict):
        raise ValueError("not an object")
    return doc


def _send(conn: socket.socket, doc: dict[str, object]) -> None:
    conn.sendall(json.dumps(doc).encode() + b"\n")


@contextlib.contextmanager
def _short(sock_path: Path) -> Iterator[str]:
    """A name for `sock_path` that fits a socket address (108 bytes), however deep the
    library lies: the socket's directory through a descriptor of it."""
    try:
        fd = os.open(sock_path.parent, os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC)
    except (FileNotFoundError, NotADirectoryError) as exc:
        # No socket directory, so no daemon: said as such, however long the path would be.
        raise DaemonDown("the library daemon is not running (start it with: acxfs up)") from exc
    try:
        yield f"/proc/self/fd/{fd}/{sock_path.name}"
    finally:
        os.close(fd)


class Op(enum.StrEnum):
    """The operations of the control protocol: a request is `{"op": OP, ...}`."""

    PING = "ping"  # -> {"ok", "pid"}
    STATUS = "status"  # -> {"ok", "pid", "mountpoint", "served", "refused", "failures"}
    LOAD = "load"  # {"file"}: check and serve one store file -> {"ok", "path"}
    SYNC = "sync"  # serve exactly the library's revisions -> the status
    RELOAD = "reload"  # the same, re-checking every served one against the trust store
    SCHEDULE = "schedule"  # the check interval changed: the timer waits anew -> {"ok"}


class ControlClient:
    """The library daemon as its owner's commands reach it: one method per operation, each
    one connection (DaemonDown when no daemon answers on `socket`)."""

    def __init__(self, socket_path: Path) -> None:
        self.socket_path = socket_path

    def ping(self) -> dict[str, object]:
        return request(self.socket_path, {"op": Op.PING}, timeout=5)

    def status(self) -> dict[str, object]:
        return request(self.socket_path, {"op": Op.STATUS}, timeout=10)

    def load(self, file: str) -> dict[str, object]:
        return request(self.socket_path, {"op": Op.LOAD, "file": file})

    def sync(self) -> dict[str, object]:
        return request(self.socket_path, {"op": Op.SYNC})

    def reload(self) -> dict[str, object]:
        return request(self.socket_path, {"op": Op.RELOAD})

    def schedule(self) -> dict[str, object]:
        return request(self.socket_path, {"op": Op.SCHEDULE}, timeout=10)


def running(socket_path: Path) -> bool:
    """Whether a daemon answers on `socket_path` (a command asks this before it talks to
    one, and starts one only when none answers)."""
    try:
        return bool(ControlClient(socket_path).ping().get("ok"))
    except DaemonDown:
        return False


def request(sock_path: Path, doc: dict[str, object], timeout: float = TIMEOUT) -> dict[str, object]:
    """Send one request to the daemon and return its answer (DaemonDown when none runs)."""
    conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM | socket.SOCK_CLOEXEC)
    conn.settimeout(timeout)
    try:
        try:
            with _short(sock_path) as address:
                conn.connect(address)
        except (FileNotFoundError, ConnectionRefusedError) as exc:
            raise DaemonDown("the library daemon is not running (start it with: acxfs up)") from exc
        try:
            _send(conn, doc)
            return _read_message(conn)
        except ConnectionError as exc:  # it stopped while answering
            raise DaemonDown("the library daemon stopped (start it with: acxfs up)") from exc
        except (ValueError, UnicodeDecodeError) as exc:
            raise EnvironmentProblem(f"the library daemon gave no usable answer ({exc})") from exc
    except TimeoutError as exc:
        raise EnvironmentProblem("the library daemon did not answer in time") from exc
    finally:
        conn.close()


def peer_uid(conn: socket.socket) -> int:
    creds = conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
    return int(struct.unpack("3i", creds)[1])


class ControlServer:
    """Serves requests on `sock_path` on a thread of its own until `close`."""

    def __init__(self, sock_path: Path, handler: Handler) -> None:
        self._path = sock_path
        self._handler = handler
        self._lock = threading.Lock()  # one request at a time: changes of the tree serialise
        with contextlib.suppress(FileNotFoundError):
            os.unlink(sock_path)
        self._sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM | socket.SOCK_CLOEXEC)
        with _short(sock_path) as address:
            self._sock.bind(address)
        os.chmod(sock_path, 0o600)
        self._sock.listen(8)
        self._thread = threading.Thread(target=self._serve, name="acxfs-control", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self._sock.accept()
            except OSError:
                return  # closed
            threading.Thread(target=self._one, args=(conn,), daemon=True).start()

    def _one(self, conn: socket.socket) -> None:
        with conn:
            conn.settimeout(TIMEOUT)
            try:
                if peer_uid(conn) != os.geteuid():
                    return
                doc = _read_message(conn)
                with self._lock:
                    answer = self._handler(doc)
                _send(conn, answer)
            except (OSError, ValueError, UnicodeDecodeError):
                return

    def run(self, action: Callable[[], None]) -> None:
        """Run `action` between requests (the daemon's own timed re-checks)."""
        with self._lock:
            action()

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self._sock.shutdown(socket.SHUT_RDWR)
        self._sock.close()
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self._path)
