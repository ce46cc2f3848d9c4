"""The host around a run: dropping the page cache, running and timing commands, mounting state
(waiting for a mount, unmounting, the mounts to remove at exit), daemons' memory, installing.

Invariant: every mountpoint a run mounts is in `ACTIVE_MOUNTS` until it is unmounted, so
`cleanup_mounts` at exit leaves none behind.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path

from scripts.bench.context import BenchError, Context, OpTimeout
from scripts.liveness import is_mounted, pid_alive, status_kib

ACTIVE_MOUNTS: set[str] = set()


def try_drop_caches() -> tuple[bool, str]:
    """Flush and drop the page cache; (False, reason) where that is not allowed."""
    try:
        os.sync()
        with open("/proc/sys/vm/drop_caches", "w", encoding="ascii") as handle:
            handle.write("3\n")
        return True, "page cache dropped before every cold run"
    except OSError as exc:
        return False, f"page cache NOT dropped (/proc/sys/vm/drop_caches: {exc.strerror})"


def wait_ready(path: Path, timeout: float, proc: subprocess.Popen[bytes] | None = None) -> None:
    """Until `path` is a mount whose root can be listed."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if is_mounted(path):
            with contextlib.suppress(OSError):
                os.listdir(path)
                return
        if proc is not None and proc.poll() is not None:
            raise BenchError(f"the daemon exited with {proc.returncode} before mounting")
        time.sleep(0.002)
    raise BenchError(f"{path} not mounted after {timeout:.0f} s")


def peak_rss_mib(pid: int | None) -> float | None:
    if pid is None:
        return None
    kib = status_kib(pid, "VmHWM")
    return None if kib is None else kib / 1024


def fusermount_u(path: Path | str) -> None:
    """Unmount a FUSE mount; lazily when a plain unmount is refused."""
    for args in (["fusermount", "-u", str(path)], ["fusermount", "-uz", str(path)]):
        if not is_mounted(path):
            return
        subprocess.run(args, capture_output=True, check=False, timeout=60)
        deadline = time.monotonic() + 5
        while is_mounted(path) and time.monotonic() < deadline:
            time.sleep(0.01)


def wait_gone(pid: int | None, timeout: float = 30.0) -> None:
    if pid is None:
        return
    deadline = time.monotonic() + timeout
    while pid_alive(pid) and time.monotonic() < deadline:
        time.sleep(0.01)
    if pid_alive(pid):
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGKILL)


def cleanup_mounts() -> None:
    """Last resort (atexit): never leave a mount behind."""
    for path in list(ACTIVE_MOUNTS):
        fusermount_u(Path(path))
        ACTIVE_MOUNTS.discard(path)


def run_checked(args: Sequence[str], env: dict[str, str] | None = None,
                cwd: Path | None = None, timeout: float = 3600) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(list(args), env=env, cwd=cwd, capture_output=True, text=True,
                          check=False, timeout=timeout)
    if done.returncode != 0:
        detail = (done.stderr or done.stdout).strip().splitlines()
        raise BenchError(f"{Path(args[0]).name} exited {done.returncode}: "
                         f"{detail[-1] if detail else ''}")
    return done


def tool(name: str) -> str:
    """The executable beside this interpreter when there is one (skips pyenv's shims)."""
    beside = Path(sys.executable).parent / name
    if beside.is_file() and os.access(beside, os.X_OK):
        return str(beside)
    return shutil.which(name) or name


def timed_command(ctx: Context, args: Sequence[str], cwd: Path | None = None) -> float:
    start = time.perf_counter()
    try:
        done = subprocess.run(list(args), cwd=cwd, stdout=subprocess.DEVNULL,
                              stderr=subprocess.PIPE, check=False, timeout=ctx.cfg.timeout,
                              env=ctx.env)
    except subprocess.TimeoutExpired as exc:
        raise OpTimeout(f"timeout > {ctx.cfg.timeout:.0f} s") from exc
    elapsed = time.perf_counter() - start
    if done.returncode != 0:
        raise BenchError(f"{args[0]} exited {done.returncode}: "
                         f"{done.stderr.decode(errors='replace').strip()[-200:]}")
    return elapsed


def install_apt(ctx: Context, package: str) -> None:
    ctx.log(f"installing {package} (apt-get) ...")
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    subprocess.run(["apt-get", "update", "-qq"], capture_output=True, check=False, env=env)
    subprocess.run(["apt-get", "install", "-y", "-qq", package], capture_output=True,
                   check=False, env=env)
