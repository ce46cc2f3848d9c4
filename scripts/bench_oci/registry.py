"""A `docker-registry serve` of its own for one benchmark run: plain http on 127.0.0.1, storage,
config and log in the run's directory.

Invariant: the registry is stopped by its pid (terminate, then kill) when `running` exits, by
whatever path; it binds loopback only.
"""

from __future__ import annotations

import contextlib
import shutil
import socket
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import yaml

from scripts.bench_library.config import BenchError

BINARY = "docker-registry"
READY = 10.0  # seconds the registry has to answer /v2/


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def config(port: int, root: Path) -> dict[str, object]:
    """Quiet, loopback, no auth, no upload purging (nothing runs behind the benchmark)."""
    return {
        "version": 0.1,
        "log": {"level": "error", "accesslog": {"disabled": True}},
        "storage": {"filesystem": {"rootdirectory": str(root)}, "delete": {"enabled": True},
                    "maintenance": {"uploadpurging": {"enabled": False}}},
        "http": {"addr": f"127.0.0.1:{port}", "secret": "acxfs-bench-secret"},
    }


def wait_ready(host: str, process: subprocess.Popen[bytes], log: Path) -> None:
    deadline = time.monotonic() + READY
    while time.monotonic() < deadline and process.poll() is None:
        with contextlib.suppress(OSError, urllib.error.URLError), \
                urllib.request.urlopen(f"http://{host}/v2/", timeout=2):
            return
        time.sleep(0.05)
    raise BenchError(f"{BINARY} did not answer http://{host}/v2/ (exit {process.poll()}): "
                     f"{log.read_text(errors='replace')[-500:]}")


def stop(process: subprocess.Popen[bytes]) -> None:
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=10)


@contextlib.contextmanager
def running(work: Path) -> Iterator[str]:
    """A registry serving from `work`; yields its host, 127.0.0.1:PORT."""
    exe = shutil.which(BINARY)
    if exe is None:
        raise BenchError(f"{BINARY} is not installed (scripts/setup.sh installs it)")
    work.mkdir(parents=True)
    (work / "storage").mkdir()
    port = free_port()
    (work / "config.yml").write_text(yaml.safe_dump(config(port, work / "storage")))
    log = work / "registry.log"
    with log.open("wb") as out:
        process = subprocess.Popen([exe, "serve", str(work / "config.yml")],
                                   stdin=subprocess.DEVNULL, stdout=out, stderr=out)
        try:
            host = f"127.0.0.1:{port}"
            wait_ready(host, process, log)
            yield host
        finally:
            stop(process)
