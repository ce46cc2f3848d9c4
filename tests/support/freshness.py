"""What the tests of the library's freshness share: machines installed from one ACX registry
served over loopback, each daemon's timer shortened with `acxfs refresh --every 1s`, and
waiting with a deadline for what a machine shows.

Invariant: nothing here sleeps and then asserts: `wait_until` polls a condition until a
deadline and fails naming what did not happen; every helper runs the real `acxfs` command
of a `Machine`.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tests.support import acx_registry as reg
from tests.support.projects import PUBLISHER, Machine, pack

NAME = f"{PUBLISHER}/research"
SKILL = "expertise-designer"
DEADLINE = 60.0  # seconds: many 1 s intervals on a loaded machine


def wait_until(what: str, condition: Callable[[], bool], deadline: float = DEADLINE) -> None:
    end = time.monotonic() + deadline
    while time.monotonic() < end:
        if condition():
            return
        time.sleep(0.2)
    raise AssertionError(f"not within {deadline:g} s: {what}")


def bundle(machine: Machine, identity: str = NAME) -> dict[str, Any]:
    found = [b for b in machine.listing()["bundles"] if b["identity"] == identity]
    assert len(found) == 1, found
    one: dict[str, Any] = found[0]
    return one


def link_of(machine: Machine) -> Path:
    return machine.home / ".claude" / "skills" / SKILL


def daemon_log(machine: Machine) -> str:
    path = machine.home / ".local" / "share" / "acxfs" / "daemon.log"
    return path.read_text(errors="replace") if path.exists() else ""


def publish(root: Path, releases: list[reg.Packed], *, status: list[dict[str, Any]],
            at: str) -> None:
    """The registry as its builder writes it at time `at`."""
    reg.build(root, releases, status=status, generated=at, updated=at)


def releases(signer: Machine, work: Path, *versions: str) -> dict[str, reg.Packed]:
    """NAME at each of `versions`, packed and signed by `signer`'s local key (made now)."""
    signer.ok("keygen")
    return {v: reg.Packed(PUBLISHER, "research", v,
                          pack(signer, work / f"out-{v}", "research", v, SKILL))
            for v in versions}


def install(machine: Machine, signer_file: Path, base: str, *extra: object) -> None:
    machine.ok("trust", "add", signer_file)
    machine.ok("add", NAME, "--from", base, *extra)
    machine.ok("refresh", "--every", "1s")
