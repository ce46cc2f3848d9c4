"""A refresh round, and `acxfs update`, read their sources without holding the library's
lock: while one waits on a source that accepts the connection and never answers, `acxfs list`
and `acxfs add` of a local cartridge finish (each given 30 s by the harness; the stalled
command may wait 120 s), and the round, once the source hangs up, records the failure
without undoing the add.
"""

from __future__ import annotations

import contextlib
import socket
import subprocess
import threading
import urllib.parse
from collections.abc import Iterator
from pathlib import Path

import pytest

from scripts.mounting import acxfs, acxfs_command
from tests.support.freshness import NAME, bundle, publish, releases, wait_until
from tests.support.projects import PUBLISHER, Machine, machines, pack
from tests.support.servers import static_server

pytestmark = [pytest.mark.fuse, pytest.mark.slow]
Ended = subprocess.CompletedProcess[str]  # how the stalled command ended

T1 = "2026-11-20T00:00:00.000Z"
HARNESS = 30.0  # seconds the harness gives each command run during the stall
STALL = 120.0  # seconds the silent source holds a connection at most


class Silent:
    """A loopback listener on `port` that accepts every connection and sends nothing, until
    `hang_up` (or STALL seconds)."""

    def __init__(self, port: int) -> None:
        self.sock = socket.socket()
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind(("127.0.0.1", port))
        self.sock.listen(8)
        self.sock.settimeout(0.2)
        self.held: list[socket.socket] = []
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._accept, daemon=True)

    def _accept(self) -> None:
        while not self.stop.is_set():
            with contextlib.suppress(TimeoutError):
                conn, _ = self.sock.accept()
                self.held.append(conn)

    def hang_up(self) -> None:
        self.stop.set()
        self.thread.join(timeout=5)
        for conn in self.held:
            conn.close()
        self.sock.close()


@contextlib.contextmanager
def silent(port: int) -> Iterator[Silent]:
    server = Silent(port)
    server.thread.start()
    timer = threading.Timer(STALL, server.stop.set)
    timer.start()
    try:
        yield server
    finally:
        timer.cancel()
        server.hang_up()


@contextlib.contextmanager
def beside_a_silent_source(tmp_path: Path, *command: str) -> Iterator[tuple[Machine, Ended]]:
    """A library with one bundle from a registry, whose port then goes silent; `acxfs
    COMMAND --timeout STALL` run against it, and while it waits on the source, `list` and
    `add` of a local cartridge run and must finish. Yields the machine and how the command
    ended once the source hung up."""
    root = tmp_path / "registry"
    with machines(tmp_path, "one") as (one,):
        carts = releases(one, tmp_path, "1.0.0")
        notes = pack(one, tmp_path / "notes", "notes", "1.0.0", "notes-skill")
        publish(root, [carts["1.0.0"]], status=[], at=T1)
        with static_server(root) as base:
            one.ok("trust", "add", carts["1.0.0"].file)
            one.ok("add", NAME, "--from", base)  # the daemon's own timer: 1 h away
        port = int(urllib.parse.urlsplit(base).port or 0)
        with silent(port) as source:
            stalled = subprocess.Popen([*acxfs_command(), *command, "--timeout", str(STALL)],
                                       env=one.env, stdout=subprocess.PIPE,
                                       stderr=subprocess.PIPE, text=True)
            try:
                wait_until(f"acxfs {command[0]} asks the silent source",
                           lambda: bool(source.held))
                listed = acxfs("list", "--json", env=one.env, timeout=HARNESS)
                assert listed.returncode == 0, listed
                added = acxfs("add", notes, env=one.env, timeout=HARNESS)
                assert added.returncode == 0, added
                assert stalled.poll() is None, f"acxfs {command[0]} was to wait on the source"
            finally:
                source.hang_up()
                out, err = stalled.communicate(timeout=60)
        yield one, subprocess.CompletedProcess(stalled.args, stalled.returncode, out, err)


def test_list_and_add_finish_while_a_round_waits_on_a_silent_source(tmp_path: Path) -> None:
    with beside_a_silent_source(tmp_path, "refresh") as (one, stalled):
        assert stalled.returncode == 0, stalled
        assert "Traceback" not in stalled.stderr
        assert str(bundle(one)["checkError"]).startswith("unreachable:")
        assert bundle(one, f"{PUBLISHER}/notes")["version"] == "1.0.0"


@pytest.mark.parametrize("check", [["--check"], []], ids=["update --check", "update"])
def test_list_and_add_finish_while_an_update_waits_on_a_silent_source(
        tmp_path: Path, check: list[str]) -> None:
    with beside_a_silent_source(tmp_path, "update", *check) as (one, stalled):
        assert stalled.returncode == 2 and "Traceback" not in stalled.stderr, stalled
        err = stalled.stderr
        assert err.startswith("acxfs: error: ") and len(err.splitlines()) == 1, err
        assert bundle(one, f"{PUBLISHER}/notes")["version"] == "1.0.0"
        assert bundle(one)["version"] == "1.0.0" and bundle(one)["served"] is True
