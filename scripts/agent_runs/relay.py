"""The relay inside an agent's network namespace, and whether such a namespace can be made.

Run as a script (``python3 -I relay.py relay SOCKET TIMEOUT [--started FILE] -- ARGV...``,
inside ``unshare -n``), this file brings loopback up, relays one loopback port to the mock
server listening on the Unix socket SOCKET of the calling process (a Unix socket is reached by
path, so it crosses the namespace boundary; TCP cannot), runs the agent ARGV with ``@PORT@``
replaced by that port, and kills the agent's whole process group after TIMEOUT. That mode uses
the standard library only.

Invariant: the relayed port is the only one open in the namespace, and nothing outlives the
relay: on its exit, its timeout or SIGTERM the agent's process group is killed.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import select
import signal
import socket
import struct
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from pathlib import Path

PORT_TOKEN = "@PORT@"  # replaced by the relay with its loopback port, in argv and environment
_SIOCGIFFLAGS = 0x8913
_SIOCSIFFLAGS = 0x8914
_IFF_UP = 0x1


def loopback_up() -> None:
    """Bring ``lo`` up in this (new) network namespace, as ``ip link set lo up`` does."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        request = struct.pack("16sH14x", b"lo", 0)
        flags = struct.unpack("16sH14x", fcntl.ioctl(sock, _SIOCGIFFLAGS, request))[1]
        fcntl.ioctl(sock, _SIOCSIFFLAGS, struct.pack("16sH14x", b"lo", flags | _IFF_UP))


def _pump(a: socket.socket, b: socket.socket) -> None:
    try:
        while True:
            ready, _, _ = select.select([a, b], [], [], 1.0)
            for src in ready:
                data = src.recv(65536)
                if not data:
                    return
                (b if src is a else a).sendall(data)
    except OSError:
        pass
    finally:
        a.close()
        b.close()


def _relay(listener: socket.socket, target: str) -> None:
    while True:
        try:
            conn, _ = listener.accept()
        except OSError:
            return
        upstream = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            upstream.connect(target)
        except OSError:
            conn.close()
            upstream.close()
            continue
        threading.Thread(target=_pump, args=(conn, upstream), daemon=True).start()


def relay_main(argv: Sequence[str]) -> int:
    """``relay SOCKET TIMEOUT [--started FILE] -- ARGV...``: loopback up, 127.0.0.1:<port>
    relayed to SOCKET, then ARGV run (``@PORT@`` replaced) and its exit code returned (124
    after TIMEOUT). With ``--started``, FILE receives the CLOCK_MONOTONIC time (seconds, as
    ``time.monotonic()`` gives it in any process) at which ARGV was started."""
    started = ""
    if len(argv) >= 6 and argv[3] == "--started":
        started, argv = argv[4], [*argv[:3], *argv[5:]]
    if len(argv) < 4 or argv[0] != "relay" or argv[3] != "--":
        print("usage: relay.py relay SOCKET TIMEOUT [--started FILE] -- ARGV...",
              file=sys.stderr)
        return 2
    target, timeout, command = argv[1], float(argv[2]), list(argv[4:])
    loopback_up()
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.bind(("127.0.0.1", 0))
    listener.listen(64)
    port = str(listener.getsockname()[1])
    threading.Thread(target=_relay, args=(listener, target), daemon=True).start()
    env = {k: v.replace(PORT_TOKEN, port) for k, v in os.environ.items()}
    if started:
        with open(started, "w", encoding="ascii") as handle:
            handle.write(f"{time.monotonic()!r}\n")
    child = subprocess.Popen([a.replace(PORT_TOKEN, port) for a in command], env=env,
                             stdin=subprocess.DEVNULL, start_new_session=True)

    def end(signum: int, frame: object) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(child.pid, signal.SIGKILL)
        os._exit(128 + signum)

    signal.signal(signal.SIGTERM, end)
    try:
        return child.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        print(f"agents.py relay: the agent ran past {timeout:.0f} s: killed", file=sys.stderr)
        return 124
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(child.pid, signal.SIGKILL)  # the agent and whatever it left running


def namespace_problem() -> str:
    """Why an agent cannot be run in a loopback-only namespace here ('' when it can)."""
    probe = [sys.executable, "-I", "-c",
             "import sys; sys.path.insert(0, sys.argv[1]); import relay; relay.loopback_up();"
             "print(open('/proc/net/dev').read().count(':'))",
             str(Path(__file__).resolve().parent)]
    try:
        done = subprocess.run(["unshare", "-n", *probe], capture_output=True, text=True,
                              timeout=20, stdin=subprocess.DEVNULL, check=False)
    except (OSError, subprocess.TimeoutExpired) as e:
        return f"unshare -n failed: {e}"
    if done.returncode != 0:
        return f"unshare -n failed: {done.stderr.strip()[-300:]}"
    if done.stdout.strip() != "1":
        return f"the new namespace has {done.stdout.strip()} interfaces, not only lo"
    return ""


if __name__ == "__main__":
    sys.exit(relay_main(sys.argv[1:]))
