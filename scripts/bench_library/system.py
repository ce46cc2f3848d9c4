"""The host around a library benchmark: running acxfs commands, timing, finding the FUSE daemons
a column started, their memory, waiting, isolated homes, and stopping and removing everything.

Invariant: a column's daemons are the processes with /dev/fuse open whose HOME lies under its
root; `stop_daemons` leaves no mount and no such process behind.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import time
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path

from scripts.bench.system import fusermount_u
from scripts.bench_library.config import BenchError
from scripts.liveness import mounts_under, other_pids, status_kib


def run(args: Sequence[str], env: dict[str, str], timeout: float) -> str:
    try:
        done = subprocess.run(list(args), env=env, capture_output=True, text=True, check=False,
                              timeout=timeout, stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired as exc:
        raise BenchError(f"acxfs {args[1]}: timeout > {timeout:.0f} s") from exc
    if done.returncode != 0:
        lines = (done.stderr or done.stdout).strip().splitlines()
        raise BenchError(f"acxfs {args[1]} exited {done.returncode}: "
                         f"{lines[-1] if lines else 'no output'}")
    return done.stdout


def timed(action: Callable[[], object]) -> float:
    start = time.perf_counter()
    action()
    return time.perf_counter() - start


def daemons(root: Path) -> list[int]:
    """Live processes with /dev/fuse open whose HOME lies under `root`: the FUSE daemons a
    column started (no other process of this machine has that HOME)."""
    prefix = f"HOME={root}/".encode()
    pids = []
    for pid in other_pids():
        try:
            environ = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
            if not any(item.startswith(prefix) for item in environ):
                continue
            fds = os.listdir(f"/proc/{pid}/fd")
            if any(os.readlink(f"/proc/{pid}/fd/{fd}") == "/dev/fuse" for fd in fds):
                pids.append(pid)
        except OSError:
            continue
    return pids


def rss_mib(pids: Iterable[int]) -> float:
    return sum(status_kib(pid, "VmRSS") or 0 for pid in pids) / 1024


def wait_until(ready: Callable[[], bool], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not ready():
        if time.monotonic() > deadline:
            raise BenchError(f"{what} after {timeout:.0f} s")
        time.sleep(0.002)


def stop_daemons(root: Path, timeout: float = 30.0) -> None:
    """Unmount everything under `root`, then end its daemons (SIGTERM, then SIGKILL)."""
    for path in mounts_under(root):
        fusermount_u(path)
    with contextlib.suppress(BenchError):
        wait_until(lambda: not daemons(root), timeout, "daemons still running")
    for sig in (signal.SIGTERM, signal.SIGKILL):
        for pid in daemons(root):
            with contextlib.suppress(OSError):
                os.kill(pid, sig)
        with contextlib.suppress(BenchError):
            wait_until(lambda: not daemons(root), 5, "daemons still running")


def remove_tree(path: Path) -> None:
    """rmtree that also removes read-only directories (the library's store is read-only)."""
    for dirpath, _dirs, _files in os.walk(path):
        with contextlib.suppress(OSError):
            os.chmod(dirpath, 0o700)
    shutil.rmtree(path, ignore_errors=True)


def isolated_env(root: Path, trust: Path) -> dict[str, str]:
    """This interpreter's environment, with HOME, XDG_* and the trust store under `root`."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ACXFS_", "XDG_"))}
    home = root / "home"
    dirs = {"HOME": home, "XDG_DATA_HOME": home / ".local" / "share",
            "XDG_STATE_HOME": home / ".local" / "state", "XDG_CONFIG_HOME": home / ".config",
            "XDG_CACHE_HOME": home / ".cache", "XDG_RUNTIME_DIR": root / "run"}
    for name, path in dirs.items():
        path.mkdir(parents=True, exist_ok=True, mode=0o700)
        env[name] = str(path)
    env["ACXFS_TRUST_DIR"] = str(trust)
    return env
