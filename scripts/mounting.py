"""Real mounts through the `acxfs` command, for tests and the robustness scripts: mount, check
it is live, always unmount.

`mounted()` runs `acxfs mount` as a subprocess (in the test's environment, so with its isolated
trust and state directories), checks that the mount is live the moment the command returns,
and on exit unmounts with `acxfs umount`, falling back to `fusermount -uz`, then waits for the
daemon to exit. Every step has a timeout. Whatever happens, nothing is left behind: a mount that
`acxfs umount` could not remove is detached, a daemon that outlives its mount is killed by its
pid, and the context manager then fails the test, because either is an acxfs bug.

`attempt_mount()` is for mounts that are expected to fail: it returns the finished command and
removes anything that was mounted after all.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from acxfs.mount import table as mount_table
from scripts.liveness import mounts_under
from scripts.liveness import pid_alive as pid_alive  # re-exported: tests ask here
from scripts.liveness import processes_mentioning as processes_mentioning

COMMAND_TIMEOUT = 30.0  # seconds for any one command
EXIT_TIMEOUT = 10.0  # seconds for a daemon to exit once its mount is gone


def acxfs_command() -> list[str]:
    """The installed `acxfs` console script, preferring the one beside this interpreter."""
    beside = Path(sys.executable).parent / "acxfs"
    if beside.exists():
        return [str(beside)]
    found = shutil.which("acxfs")
    if found is None:
        raise RuntimeError("the acxfs command is not installed (pip install -e .)")
    return [found]


def run(argv: Sequence[object], *, timeout: float = COMMAND_TIMEOUT, cwd: Path | None = None,
        env: Mapping[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """Run a real program (no stdin); the environment is the test's isolated os.environ."""
    return subprocess.run([str(a) for a in argv], capture_output=True, text=True,
                          timeout=timeout, cwd=cwd, env=env, stdin=subprocess.DEVNULL,
                          check=False)


def acxfs(*args: object, timeout: float = COMMAND_TIMEOUT, cwd: Path | None = None,
          env: Mapping[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """Run `acxfs ARGS...`."""
    return run([*acxfs_command(), *args], timeout=timeout, cwd=cwd, env=env)


# --- what the kernel and /proc say (through scripts.liveness and acxfs.mount.table) ---------


MountRow = tuple[str, str, str, str]  # source, mountpoint, type, options; fields unescaped


def canonical(mountpoint: Path | str) -> str:
    """The mountpoint as /proc/mounts shows it (its parents resolved)."""
    return mount_table.canonical(os.fspath(mountpoint))


def mount_rows(mountpoint: Path | str) -> list[MountRow]:
    """The /proc/mounts rows whose mountpoint is `mountpoint`."""
    target = canonical(mountpoint)
    return [row for row in mount_table.proc_mounts() if row[1] == target]


def acxfs_mounts_under(directory: Path | str) -> list[str]:
    """Mountpoints of fuse.acxfs mounts at or below `directory`, deepest first."""
    return mounts_under(directory, mount_table.FSTYPE)


def wait_for(predicate: object, timeout: float, step: float = 0.02) -> bool:
    """Poll `predicate()` until it is true or `timeout` seconds have passed."""
    assert callable(predicate)
    deadline = time.monotonic() + timeout
    while True:
        if predicate():
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(step)


# --- mounting and unmounting ----------------------------------------------------------------


def shown(text: str) -> str:
    """`text` as acxfs prints a name in a line (`acxfs.text.printable`'s rule, restated):
    each character Python does not call printable written as its escape."""
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)


def status_entry(mountpoint: Path | str) -> list[str]:
    """What `acxfs status` says about the mount at `mountpoint` alone: its line and the lines
    indented under it ([] when it does not list it). Every other acxfs mount on the machine,
    another test's or another user's, is left out."""
    lines = acxfs("status").stdout.splitlines()
    head = shown(canonical(mountpoint)) + "  "
    for index, line in enumerate(lines):
        if line.startswith(head):
            end = index + 1
            while end < len(lines) and lines[end].startswith("  "):
                end += 1
            return lines[index:end]
    return []


def status_line(mountpoint: Path | str) -> str:
    """The line `acxfs status` prints for the mount at `mountpoint` (fails the test when it
    lists no such mount)."""
    entry = status_entry(mountpoint)
    assert entry, f"acxfs status does not list {mountpoint}"
    return entry[0]


def daemon_pid(mountpoint: Path | str, announce: str = "") -> int | None:
    """The serving daemon's pid: from the mount's announcement, else from `acxfs status`."""
    found = re.search(r"\bpid (\d+)\b", announce)
    if found:
        return int(found.group(1))
    entry = status_entry(mountpoint)
    match = re.search(r"\bpid=(\d+)\b", entry[0]) if entry else None
    return int(match.group(1)) if match else None


def force_cleanup(mountpoint: Path | str, pid: int | None = None) -> list[str]:
    """Detach the mount at `mountpoint` and end its daemon without acxfs; what had to be done."""
    done: list[str] = []
    tool = shutil.which("fusermount") or shutil.which("fusermount3") or "fusermount"
    if mount_rows(mountpoint):
        with contextlib.suppress(subprocess.TimeoutExpired, OSError):
            run([tool, "-uz", mountpoint], timeout=COMMAND_TIMEOUT)
        if mount_rows(mountpoint) and os.geteuid() == 0:
            with contextlib.suppress(subprocess.TimeoutExpired, OSError):
                run(["umount", "-l", mountpoint], timeout=COMMAND_TIMEOUT)
        done.append(f"had to detach {mountpoint} with {tool} -uz")
    pids = {pid} if pid else set()
    pids.update(processes_mentioning(canonical(mountpoint)))
    for stray in sorted(p for p in pids if pid_alive(p)):
        if wait_for(lambda p=stray: not pid_alive(p), EXIT_TIMEOUT):
            continue
        done.append(f"had to kill the daemon {stray}")
        for sig in (signal.SIGTERM, signal.SIGKILL):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(stray, sig)
            if wait_for(lambda p=stray: not pid_alive(p), 3.0):
                break
    return done


def unmount(mountpoint: Path | str, pid: int | None) -> list[str]:
    """`acxfs umount`, then wait for the daemon; returns the problems (empty when clean)."""
    problems: list[str] = []
    if mount_rows(mountpoint):
        try:
            done = acxfs("umount", mountpoint)
            if done.returncode != 0:
                problems.append(f"acxfs umount exited {done.returncode}: {done.stderr.strip()}")
        except subprocess.TimeoutExpired:
            problems.append("acxfs umount timed out")
    if mount_rows(mountpoint):
        problems.append(f"{mountpoint} is still mounted after acxfs umount")
    if pid is not None and not wait_for(lambda: not pid_alive(pid), EXIT_TIMEOUT):
        problems.append(f"the daemon {pid} is still running after the unmount")
    problems += force_cleanup(mountpoint, pid)
    assert not mount_rows(mountpoint), f"{mountpoint} could not be unmounted"
    assert pid is None or not pid_alive(pid), f"the daemon {pid} could not be stopped"
    return problems


@dataclass
class Mount:
    """A live mount made by `mounted()`."""

    mountpoint: Path
    container: Path
    pid: int
    stdout: str
    stderr: str

    def proc_row(self) -> MountRow:
        rows = mount_rows(self.mountpoint)
        assert len(rows) == 1, rows
        return rows[0]


class MountFailed(AssertionError):
    """`acxfs mount` exited non-zero where the test expected a mount."""


@contextlib.contextmanager
def mounted(container: Path | str, mountpoint: Path | str, *options: object,
            timeout: float = COMMAND_TIMEOUT) -> Iterator[Mount]:
    """`acxfs mount CONTAINER MOUNTPOINT OPTIONS...`, live on entry, gone on exit."""
    mountpoint = Path(mountpoint)
    try:
        done = acxfs("mount", container, mountpoint, *options, timeout=timeout)
    except subprocess.TimeoutExpired:
        force_cleanup(mountpoint)
        raise
    live = os.path.ismount(mountpoint)  # checked first: the mount must be live on return
    if done.returncode != 0:
        force_cleanup(mountpoint)
        raise MountFailed(f"acxfs mount exited {done.returncode}: {done.stderr.strip()}")
    pid = daemon_pid(mountpoint, done.stderr)
    if not live or pid is None:
        force_cleanup(mountpoint, pid)
        raise MountFailed(f"acxfs mount returned 0 but live={live}, pid={pid}: {done.stderr}")
    ok = False
    try:
        yield Mount(mountpoint, Path(container), pid, done.stdout, done.stderr)
        ok = True
    finally:
        problems = unmount(mountpoint, pid)
        if problems:
            if ok:
                raise AssertionError("unclean unmount: " + "; ".join(problems))
            print("unclean unmount: " + "; ".join(problems), file=sys.stderr)


def attempt_mount(container: Path | str, mountpoint: Path | str, *options: object,
                  timeout: float = COMMAND_TIMEOUT) -> subprocess.CompletedProcess[str]:
    """Run `acxfs mount` expecting it to fail; if it mounted after all, unmount it again."""
    before = len(mount_rows(mountpoint))
    try:
        done = acxfs("mount", container, mountpoint, *options, timeout=timeout)
    except subprocess.TimeoutExpired:
        if len(mount_rows(mountpoint)) > before:
            force_cleanup(mountpoint)
        raise
    if len(mount_rows(mountpoint)) > before:  # it mounted after all (on top of any old mount)
        unmount(mountpoint, daemon_pid("", done.stderr) if "pid " in done.stderr else None)
    return done


def read_xattr(path: Path | str, name: str) -> str:
    """`getfattr -n NAME --only-values PATH` (fails the test if getfattr does)."""
    done = run(["getfattr", "--absolute-names", "-n", name, "--only-values", path])
    assert done.returncode == 0, done.stderr
    return done.stdout
