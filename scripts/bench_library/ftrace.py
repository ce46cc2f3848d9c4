"""The kernel's view of a FUSE mount while a profile runs: every request of one FUSE connection
(opcode, and the time from the kernel sending it to the daemon's answer) and every `pread64`
of the daemon's threads (SQLite's page reads), from a private ftrace instance.

Invariant: the instance is this run's own (`instances/acxfs-profile-<pid>`), so the global
trace buffer and anyone else's tracing are left alone, and `close` removes it. Needs root and
tracefs (mounted at /sys/kernel/tracing, or mounted there if absent); `FuseTrace.open` says why
not otherwise.
"""

from __future__ import annotations

import contextlib
import os
import re
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

TRACEFS = Path("/sys/kernel/tracing")
_LINE = re.compile(r"^\s*(?P<comm>.+?)-(?P<pid>\d+)\s+\[\d+\]\s+\S+\s+(?P<ts>[\d.]+): "
                   r"(?P<event>\w+)(?P<rest>[:( ].*)$")
_SEND = re.compile(r"req (\d+) opcode \d+ \((\w+)\)")
_END = re.compile(r"req (\d+) len \d+ error (-?\d+)")
_PREAD = re.compile(r"count: (0x[0-9a-f]+)")


@dataclass
class Trace:
    """What one traced stretch saw."""

    requests: dict[str, list[float]] = field(default_factory=dict)  # opcode -> round trips (s)
    preads: list[tuple[float, int]] = field(default_factory=list)  # (seconds, bytes asked)
    lost: int = 0  # requests sent but not answered within the stretch


class FuseTrace:
    """An ftrace instance for one FUSE connection and a set of daemon threads."""

    def __init__(self, root: Path) -> None:
        self.root = root

    @classmethod
    def open(cls) -> tuple[FuseTrace | None, str]:
        """A fresh instance, or (None, why not)."""
        if os.geteuid() != 0:
            return None, "not root: no kernel trace"
        if not (TRACEFS / "instances").is_dir():
            subprocess.run(["mount", "-t", "tracefs", "nodev", str(TRACEFS)],
                           capture_output=True, check=False)
        if not (TRACEFS / "events" / "fuse" / "fuse_request_send").is_dir():
            return None, "this kernel has no fuse trace events (or tracefs cannot be mounted)"
        root = TRACEFS / "instances" / f"acxfs-profile-{os.getpid()}"
        try:
            root.mkdir()
        except OSError as exc:
            return None, f"cannot make an ftrace instance ({exc.strerror})"
        trace = cls(root)
        trace._write("buffer_size_kb", "16384")
        return trace, ""

    def _write(self, name: str, value: str) -> None:
        (self.root / name).write_text(value + "\n", encoding="ascii")

    def arm(self, connection: int, pids: list[int]) -> None:
        """Record the requests of `connection` (the mount's device minor) and the preads of
        `pids` (their new threads too) from the next `start` on."""
        self._write("tracing_on", "0")
        self._write("set_event_pid", " ".join(map(str, pids)))
        self._write("options/event-fork", "1")
        for event in ("fuse/fuse_request_send", "fuse/fuse_request_end"):
            self._write(f"events/{event}/filter", f"connection == {connection}")
            self._write(f"events/{event}/enable", "1")
        for event in ("syscalls/sys_enter_pread64", "syscalls/sys_exit_pread64"):
            with contextlib.suppress(OSError):  # a kernel without syscall events: no preads
                self._write(f"events/{event}/enable", "1")

    def start(self) -> None:
        self._write("trace", "")  # empties the buffer
        self._write("tracing_on", "1")

    def stop(self, daemon_pids: set[int]) -> Trace:
        """Stop and read what was recorded (preads counted only for `daemon_pids`' threads)."""
        self._write("tracing_on", "0")
        text = (self.root / "trace").read_text(encoding="utf-8", errors="replace")
        return parse(text, daemon_pids)

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self._write("tracing_on", "0")
            for event in ("fuse", "syscalls"):
                self._write(f"events/{event}/enable", "0")
        with contextlib.suppress(OSError):
            self.root.rmdir()


def threads_of(pid: int) -> set[int]:
    try:
        return {int(tid) for tid in os.listdir(f"/proc/{pid}/task")}
    except OSError:
        return set()


def parse(text: str, daemon_pids: set[int]) -> Trace:
    """Pair each request's send with its end, and each pread's entry with its exit."""
    trace = Trace()
    sent: dict[str, tuple[str, float]] = {}
    entered: dict[int, tuple[float, int]] = {}
    for line in text.splitlines():
        match = _LINE.match(line)
        if match is None:
            continue
        event, rest, ts, pid = (match["event"], match["rest"], float(match["ts"]),
                                int(match["pid"]))
        if event == "fuse_request_send" and (found := _SEND.search(rest)):
            sent[found[1]] = (found[2].removeprefix("FUSE_"), ts)
        elif event == "fuse_request_end" and (found := _END.search(rest)):
            begun = sent.pop(found[1], None)
            if begun is not None:
                trace.requests.setdefault(begun[0], []).append(ts - begun[1])
        elif event == "sys_pread64" and rest.startswith("(") and pid in daemon_pids:
            asked = _PREAD.search(rest)  # the entry: sys_pread64(fd: ..., count: ..., ...)
            entered[pid] = (ts, int(asked[1], 16) if asked else 0)
        elif event == "sys_pread64" and rest.startswith(" ->") and pid in entered:
            start, size = entered.pop(pid)
            trace.preads.append((ts - start, size))
    trace.lost = sum(1 for op, _ in sent.values() if op not in ("FORGET", "BATCH_FORGET"))
    return trace
