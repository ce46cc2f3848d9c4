"""The daemon's timer of source checks: every interval (±10 %, so that a fleet does not ask
its registry at once), one `acxfs refresh --scheduled` in a process of its own.

Invariant: a check never runs on a FUSE thread or holds the daemon's control lock, and
nothing a check does (a source that stalls, lies or crashes its parser) can stop or slow the
daemon: the check is a child process with a deadline, killed when it passes it, and its
output only ever becomes lines of the daemon's log.  The interval is read from the library's
state before every wait, so `acxfs refresh --every` (which wakes the timer) is in force at
once; with no interval (`off`) the timer waits until woken, sending nothing.  With
`ACXFS_OFFLINE=1` in the daemon's environment no check runs.  The clock, the random
source, the wait and the check are parameters, so tests run it in milliseconds.
"""

from __future__ import annotations

import os
import random
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

JITTER = 0.10  # each wait is the interval times a factor drawn from [0.9, 1.1]
CHECK_DEADLINE = 600.0  # seconds a scheduled check may take before it is killed
OUTPUT_LIMIT = 64 * 1024  # bytes of a check's output kept for the log
MAX_WAIT = 3600.0  # seconds: the timer looks at the interval again at least this often


def check_command() -> list[str]:
    """The check the timer runs: this interpreter's acxfs, in the daemon's environment."""
    return [sys.executable, "-m", "acxfs", "refresh", "--scheduled"]


def run_check(log: Callable[[str], None], command: list[str] | None = None,
              deadline: float = CHECK_DEADLINE) -> None:
    """One scheduled check as a child process; each line it prints becomes a log line."""
    try:
        done = subprocess.run(command or check_command(), stdin=subprocess.DEVNULL,
                              capture_output=True, timeout=deadline, check=False)
    except subprocess.TimeoutExpired:
        log(f"refresh: the check took more than {deadline:g} s and was stopped")
        return
    except OSError as exc:
        log(f"refresh: the check could not start ({exc.strerror or exc})")
        return
    output = (done.stdout + done.stderr)[:OUTPUT_LIMIT].decode("utf-8", "replace")
    for line in output.splitlines():
        if line.strip():
            log(f"refresh: {line.strip()}")
    if done.returncode not in (0, 1):
        log(f"refresh: the check exited with status {done.returncode}")


@dataclass
class Schedule:
    """The timer: `interval()` (seconds, None: off) and `last()` (when the last check ran,
    as `clock` counts, None: never) are asked before each wait; `check()` runs a check."""

    interval: Callable[[], float | None]
    check: Callable[[], None]
    last: Callable[[], float | None] = lambda: None
    clock: Callable[[], float] = time.time
    rng: random.Random = field(default_factory=random.Random)
    offline: bool = field(default_factory=lambda: os.environ.get("ACXFS_OFFLINE") == "1")
    _woken: threading.Event = field(default_factory=threading.Event)
    _stopped: bool = False
    _ran: float | None = None  # when this timer last ran a check
    _thread: threading.Thread | None = None

    def delay(self) -> float | None:
        """Seconds until the next check (None: none until woken): a jittered interval after
        the last one (a library never checked counts from now)."""
        every = self.interval()
        if every is None or every <= 0 or self.offline:
            return None
        jittered = every * self.rng.uniform(1 - JITTER, 1 + JITTER)
        recorded = self.last()
        now = self.clock()
        last = max((min(t, now) for t in (recorded, self._ran) if t is not None), default=None)
        if last is None:
            return jittered
        return max(0.0, last + jittered - now)

    def wake(self) -> None:
        """The interval changed: wait again from now with the new one."""
        self._woken.set()

    def stop(self) -> None:
        self._stopped = True
        self._woken.set()

    def run(self) -> None:
        """Wait, check, wait... until `stop`; a wake restarts the wait without a check."""
        while not self._stopped:
            try:
                delay = self.delay()
            except Exception:  # a state that cannot be read: wait one default interval
                delay = MAX_WAIT
            woken = self._woken.wait(None if delay is None else min(delay, MAX_WAIT))
            self._woken.clear()
            if self._stopped:
                return
            if woken:
                continue
            self._ran = self.clock()
            try:
                self.check()
            except Exception:  # a check never ends the timer (run_check logs its own)
                continue

    def start(self) -> None:
        self._thread = threading.Thread(target=self.run, name="acxfs-refresh", daemon=True)
        self._thread.start()
