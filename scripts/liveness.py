"""What /proc says is live: whether a path is a mount point, which mounts lie under a directory,
whether a process is alive, which process serves a mount, and a process's memory figures.

Every script and test helper asks here. Invariant: mounts are read only through
`acxfs.mount.table` (the kernel's table read as bytes, its octal escapes undone, a mountpoint
compared in the form the kernel shows it), never parsed again; a process is alive while any of
its threads is neither a zombie nor dead.
"""

from __future__ import annotations

import os
from pathlib import Path

from acxfs.mount import table as mount_table


def is_mounted(path: Path | str) -> bool:
    """True when `path` is a mount point (of any file system)."""
    return mount_table.is_mounted(os.fspath(path))


def mounts_under(directory: Path | str, fstype_prefix: str = "fuse") -> list[str]:
    """Mountpoints at or below `directory` whose type starts with `fstype_prefix` (``fuse``: every
    FUSE mount; ``fuse.acxfs``: acxfs's), deepest first, so they can be unmounted in order."""
    base = os.path.realpath(directory)
    found = [point for _, point, kind, _ in mount_table.proc_mounts()
             if kind.startswith(fstype_prefix) and (point == base or point.startswith(base + "/"))]
    return sorted(found, key=lambda point: point.count("/"), reverse=True)


def pid_alive(pid: int) -> bool:
    """True while any thread of `pid` runs (a zombie counts as gone).

    Every thread is checked: a killed multithreaded daemon's main thread turns zombie while its
    worker threads are still exiting and still hold its files (the /dev/fuse connection)."""
    try:
        threads = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return False
    for tid in threads:
        try:
            with open(f"/proc/{pid}/task/{tid}/stat", encoding="ascii", errors="replace") as f:
                if f.read().rsplit(") ", 1)[1][:1] not in ("Z", "X"):
                    return True
        except (OSError, IndexError):
            continue
    return False


def other_pids() -> list[int]:
    """Every process in /proc but this one."""
    return [int(name) for name in os.listdir("/proc")
            if name.isdigit() and int(name) != os.getpid()]


def processes_with_env(name: str, value: Path | str) -> list[int]:
    """Pids of live processes (other than this one) started with `name`=`value` in their
    environment (a library daemon and its children carry the HOME they were started in)."""
    wanted = os.fsencode(name) + b"=" + os.fsencode(value)
    found = []
    for pid in other_pids():
        try:
            with open(f"/proc/{pid}/environ", "rb") as handle:
                if wanted not in handle.read().split(b"\0"):
                    continue
        except OSError:
            continue  # gone, or not ours to read
        if pid_alive(pid):
            found.append(pid)
    return found


def _argv(pid: int) -> list[bytes]:
    """The command line of `pid`, one item an argument (OSError when it is gone)."""
    with open(f"/proc/{pid}/cmdline", "rb") as handle:
        return handle.read().split(b"\0")


def processes_mentioning(text: str) -> list[int]:
    """Pids of live processes (other than this one) whose command line contains `text`."""
    found = []
    for pid in other_pids():
        try:
            cmdline = b" ".join(_argv(pid)).decode(errors="replace")
        except OSError:
            continue
        if text in cmdline and pid_alive(pid):
            found.append(pid)
    return found


def daemon_pid_from_argv(mountpoint: Path | str) -> int | None:
    """The live process with `mountpoint` as one of its arguments, the largest by RSS when
    several have it (a FUSE daemon rather than the command that started it): works for any FUSE
    daemon, where `scripts.mounting.daemon_pid` asks acxfs."""
    target = os.fsencode(mountpoint)
    best: tuple[int, int] | None = None
    for pid in other_pids():
        try:
            args = _argv(pid)
        except OSError:
            continue
        rss = status_kib(pid, "VmRSS")
        if target in args and rss is not None and (best is None or rss > best[1]):
            best = (pid, rss)
    return best[0] if best else None


def status_kib(pid: int, field_name: str) -> int | None:
    """A field of /proc/<pid>/status in KiB (``VmRSS``, ``VmHWM``), None when it is gone."""
    try:
        with open(f"/proc/{pid}/status", encoding="ascii") as handle:
            for line in handle:
                if line.startswith(field_name + ":"):
                    return int(line.split()[1])
    except OSError:
        return None
    return None
