"""A library change whose link step an agent directory refuses is undone, not left half made.

Each test makes one agent directory read-only with a real bind mount in a private mount
namespace (`unshare -m`, then `mount -o remount,bind,ro`) and runs the real `acxfs` command
there; the library daemon was started outside, so it and every later command outside see the
same files.  Agents must see all-old, the error must name the directory and its cause, the
next command must work, and no temporary entry may stay in an agent directory, also when the
undoing itself is killed (`ACXFS_TEST_KILL_AT`).
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from acxfs.paths import library_paths
from scripts.mounting import acxfs, acxfs_command
from tests.support.bundles import agent_entries, assert_one_line_error, pack, temporaries
from tests.support.library import agent_dirs, data_dir, listing, ok

pytestmark = [pytest.mark.fuse, pytest.mark.slow, pytest.mark.usefixtures("library_stops")]

PUBLISHER = "io.github.tester"
IDENTITY = f"{PUBLISHER}/steps"
READ_ONLY = (r"acxfs: error: {dir}: Read-only file system; nothing was changed \(the change "
             r"was undone in every agent directory\)")


def in_read_only(directory: Path, *args: object,
                 env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """Run `acxfs ARGS` where `directory` is a read-only bind mount of itself (a private
    mount namespace: nothing outside sees it read-only)."""
    if os.geteuid() != 0 or shutil.which("unshare") is None:
        if os.environ.get("CI") == "true":
            pytest.fail("read-only bind mounts need root and unshare, and CI=true")
        pytest.skip("read-only bind mounts need root and unshare")
    script = ('mount --bind "$1" "$1" && mount -o remount,bind,ro "$1" && shift && '
              'exec "$@"')
    return subprocess.run(["unshare", "-m", "sh", "-c", script, "sh", str(directory),
                           *acxfs_command(), *(str(a) for a in args)],
                          capture_output=True, text=True, timeout=60, check=False,
                          env=env, stdin=subprocess.DEVNULL)


def two_versions(tmp_path: Path) -> tuple[Path, Path]:
    """1.0.0 offers kept and dropped, 2.0.0 kept and added: an update re-points, removes
    and makes links."""
    old = pack(tmp_path, PUBLISHER, "steps", "1.0.0", "step-kept", "step-dropped")
    new = pack(tmp_path, PUBLISHER, "steps", "2.0.0", "step-kept", "step-added")
    return old, new


def store_names() -> list[str]:
    return sorted(p.name for p in (data_dir() / "store").iterdir())


def digest_name(cart: Path) -> str:
    return f"{hashlib.sha256(cart.read_bytes()).hexdigest()}.acx"


def assert_library_as_before(entries: dict[str, str], state: bytes, version: str) -> None:
    """Agents see exactly the old links, the state is the old one, nothing is unfinished."""
    assert agent_entries() == entries
    assert not temporaries()
    assert library_paths().state.read_bytes() == state
    assert not library_paths().intent.exists()
    (bundle,) = listing()["bundles"]
    assert bundle["version"] == version and bundle["served"] is True
    assert all(link["state"] == "ok" for link in bundle["links"])


@pytest.mark.parametrize("read_only", [0, 1], ids=["agents-dir", "claude-dir"])
def test_update_into_a_read_only_agent_directory_is_undone_everywhere(
        tmp_path: Path, local_key: None, read_only: int) -> None:
    old, new = two_versions(tmp_path)
    ok(acxfs("add", old))
    entries, state = agent_entries(), library_paths().state.read_bytes()
    directory = agent_dirs()[read_only]  # the second: the first was already changed
    result = in_read_only(directory, "update", new)
    assert_one_line_error(result, READ_ONLY.format(dir=re.escape(str(directory))), code=2)
    assert_library_as_before(entries, state, "1.0.0")
    assert store_names() == [digest_name(old)]  # the new copy went with the change
    assert all("2.0.0" not in target for target in agent_entries().values())
    listed = in_read_only(directory, "list")  # still read-only: reading works
    assert listed.returncode == 0 and "Traceback" not in listed.stderr, listed.stderr
    ok(acxfs("update", new))  # writable again: the same update goes through
    assert all("@2.0.0-" in target for target in agent_entries().values())
    ok(acxfs("remove", IDENTITY))
    assert agent_entries() == {}


def test_remove_from_a_read_only_agent_directory_is_undone(tmp_path: Path,
                                                            local_key: None) -> None:
    old, _ = two_versions(tmp_path)
    ok(acxfs("add", old))
    entries, state = agent_entries(), library_paths().state.read_bytes()
    directory = agent_dirs()[1]
    result = in_read_only(directory, "remove", IDENTITY)
    assert_one_line_error(result, READ_ONLY.format(dir=re.escape(str(directory))), code=2)
    assert_library_as_before(entries, state, "1.0.0")  # the links of the first came back
    assert store_names() == [digest_name(old)]
    ok(acxfs("remove", IDENTITY))
    assert agent_entries() == {} and store_names() == []


def test_revert_into_a_read_only_agent_directory_is_undone(tmp_path: Path,
                                                            local_key: None) -> None:
    old, new = two_versions(tmp_path)
    ok(acxfs("add", old))
    ok(acxfs("update", new))
    entries, state = agent_entries(), library_paths().state.read_bytes()
    directory = agent_dirs()[1]
    result = in_read_only(directory, "revert", IDENTITY)
    assert_one_line_error(result, READ_ONLY.format(dir=re.escape(str(directory))), code=2)
    assert_library_as_before(entries, state, "2.0.0")
    assert store_names() == sorted([digest_name(old), digest_name(new)])  # both kept
    ok(acxfs("revert", IDENTITY))
    assert all("@1.0.0-" in target for target in agent_entries().values())


@pytest.mark.parametrize("step", ["add:undo-intent", "add:undo", "add:undone"])
def test_update_killed_while_it_is_undone_is_undone_by_the_next_command(
        tmp_path: Path, local_key: None, step: str) -> None:
    old, new = two_versions(tmp_path)
    ok(acxfs("add", old))
    entries, state = agent_entries(), library_paths().state.read_bytes()
    killed = in_read_only(agent_dirs()[1], "update", new,
                          env={**os.environ, "ACXFS_TEST_KILL_AT": step})
    assert killed.returncode == -9, (killed.stdout, killed.stderr)
    result = acxfs("list")  # the next command, outside: it finishes the undoing
    assert result.returncode == 0 and "Traceback" not in result.stderr, result.stderr
    assert "undid a library change an earlier command could not finish" in result.stderr
    assert "Read-only file system" in result.stderr
    assert_library_as_before(entries, state, "1.0.0")
    assert store_names() == [digest_name(old)]
    ok(acxfs("remove", IDENTITY))
    assert agent_entries() == {}
