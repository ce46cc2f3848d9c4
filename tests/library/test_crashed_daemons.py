"""A library daemon killed with SIGKILL, or one whose control socket was deleted, is found by
its mount: `down` stops it and `up` (or an `add` that needs the daemon) replaces it.

Through the real `acxfs` command and a real `kill -9`; every test ends with the library
daemon stopped and no mount left under the test's HOME.
"""

from __future__ import annotations

import errno
import os
import signal
import time
from pathlib import Path

import pytest

from acxfs.paths import library_paths
from scripts.mounting import acxfs, acxfs_mounts_under
from tests.support.bundles import pack
from tests.support.library import agent_dirs, data_dir, home, listing, ok

pytestmark = [pytest.mark.fuse, pytest.mark.slow, pytest.mark.usefixtures("library_stops")]

PUBLISHER = "io.github.tester"


def daemon_pid() -> int:
    daemon = listing()["daemon"]
    assert isinstance(daemon, dict), "no library daemon answers"
    return int(daemon["pid"])


def gone(pid: int, timeout: float = 10.0) -> bool:
    """Whether process `pid` has exited (a zombie counts as exited) within `timeout`."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            with open(f"/proc/{pid}/stat", encoding="ascii") as handle:
                if handle.read().split(") ", 1)[1][:1] == "Z":
                    return True
        except FileNotFoundError:
            return True
        time.sleep(0.05)
    return False


def library_mounts() -> list[str]:
    return acxfs_mounts_under(home())


def assert_served(skill: str) -> None:
    """The skill reads through both agents' links from one live daemon."""
    for directory in agent_dirs():
        assert (directory / skill / "SKILL.md").read_text().startswith(f"---\nname: {skill}\n")
    assert library_mounts() == [os.path.realpath(data_dir() / "mnt")]


@pytest.mark.parametrize("then", ["up", "add", "down"])
def test_a_daemon_killed_with_sigkill_leaves_a_stale_mount_the_next_command_clears(
        tmp_path: Path, local_key: None, then: str) -> None:
    ok(acxfs("add", pack(tmp_path, PUBLISHER, "crashed", "1.0.0", "crashed-skill")))
    pid = daemon_pid()
    os.kill(pid, signal.SIGKILL)
    assert gone(pid)
    with pytest.raises(OSError) as stale:
        os.statvfs(data_dir() / "mnt")  # statfs always reaches the daemon; stat may be cached
    # The mount outlived its daemon (ECONNABORTED once the kernel aborted the connection).
    assert stale.value.errno in (errno.ENOTCONN, errno.ECONNABORTED)
    if then == "add":
        result = acxfs("add", pack(tmp_path, PUBLISHER, "later", "1.0.0", "later-skill"))
    else:
        result = acxfs(then)
    assert result.returncode == 0, result.stderr
    assert "Traceback" not in result.stderr
    said = result.stdout + result.stderr
    assert "the stale mount of a library daemon that had died" in said, said
    if then == "down":
        assert library_mounts() == []
        ok(acxfs("up"))
    assert daemon_pid() != pid
    assert_served("crashed-skill")
    if then == "add":
        assert_served("later-skill")


def test_down_stops_a_daemon_whose_control_socket_was_deleted(tmp_path: Path,
                                                             local_key: None) -> None:
    ok(acxfs("add", pack(tmp_path, PUBLISHER, "orphan", "1.0.0", "orphan-skill")))
    pid = daemon_pid()
    library_paths().socket.unlink()
    assert listing()["daemon"] is None  # no command reaches it any more ...
    assert_served("orphan-skill")  # ... while it still serves
    result = acxfs("down")
    assert result.returncode == 0, result.stderr
    assert f"stopped a library daemon (pid {pid}) that had lost its control socket" in \
        result.stdout
    assert gone(pid)
    assert library_mounts() == []
    ok(acxfs("up"))
    assert_served("orphan-skill")


def test_up_replaces_a_daemon_whose_control_socket_was_deleted(tmp_path: Path,
                                                              local_key: None) -> None:
    ok(acxfs("add", pack(tmp_path, PUBLISHER, "orphan", "1.0.0", "orphan-skill")))
    pid = daemon_pid()
    library_paths().socket.unlink()
    result = acxfs("up")
    assert result.returncode == 0, result.stderr
    assert "Traceback" not in result.stderr and "nonempty" not in result.stderr
    assert f"stopped a library daemon (pid {pid}) that had lost its control socket" in \
        result.stderr
    assert gone(pid)
    assert daemon_pid() != pid
    assert_served("orphan-skill")
    assert listing()["bundles"][0]["served"] is True
