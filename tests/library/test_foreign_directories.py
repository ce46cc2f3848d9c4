"""Directories another local user controls, attacked by that user (uid 65534 through
`setpriv`-like dropping of every id), through the real `acxfs` command: the library's parent,
the state directory with its mount records, and the agents' skill directories.

The rule (acxfs/safe/ownership.py): acxfs writes only where the directory and every
directory above it belong to the user or root and nobody else can write them, unless
sticky; otherwise one line naming the path and the `chown`/`chmod` that fixes it, exit 2,
and nothing written.
"""

from __future__ import annotations

import grp
import hashlib
import json
import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from scripts.mounting import acxfs, canonical, mount_rows, mounted, wait_for
from tests.support.attacker import NOBODY, as_nobody, assert_secret_untouched, make_secret
from tests.support.library import agent_dirs, data_dir, listing, ok
from tests.support.library_attacks import (
    blocked_on_lock,
    held_lock,
    pack,
    reachable_home,
    start,
)

pytestmark = [pytest.mark.slow, pytest.mark.fuse]
NOBODY_GROUP = grp.getgrgid(NOBODY).gr_name


@pytest.fixture
def user_home(monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    with reachable_home(monkeypatch) as path:
        yield path


def refusal(path: Path, how: str) -> str:
    """The one line of the rule's refusal of `path`."""
    if how == "owner":
        return (f"acxfs: error: {path} is owned by uid {NOBODY}; acxfs will not write there: "
                f"chown root {path}\n")
    mode, who, flag = {"others": ("777", "others", "o"),
                       "group": ("775", f"group {NOBODY_GROUP}", "g")}[how]
    return (f"acxfs: error: {path} is writable by {who} (mode {mode}, no sticky bit); acxfs "
            f"will not write there: chmod {flag}-w {path}\n")


def make_foreign(path: Path, how: str) -> None:
    """Make the directory `path` another user's: owned by nobody, or writable by others or
    by nobody's group."""
    path.mkdir(parents=True, exist_ok=True)
    if how == "owner":
        os.chown(path, NOBODY, NOBODY)
        os.chmod(path, 0o755)
    elif how == "others":
        os.chmod(path, 0o777)
    else:
        os.chown(path, 0, NOBODY)
        os.chmod(path, 0o775)


def nothing_installed() -> None:
    for agent_dir in agent_dirs():
        assert not agent_dir.exists() or list(agent_dir.iterdir()) == []


# --- (a) the library's parent ------------------------------------------------------------


@pytest.mark.parametrize("how", ["owner", "others", "group"])
def test_a_library_whose_parent_another_user_controls_is_refused_before_any_write(
        user_home: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path, how: str) -> None:
    data = user_home / "data"
    make_foreign(data, how)
    monkeypatch.setenv("XDG_DATA_HOME", str(data))
    cart = pack(tmp_path, "alpha", artifact="pair")
    for command in (["add", cart], ["list"], ["up"], ["repair"]):
        result = acxfs(*command)
        assert (result.returncode, result.stdout) == (2, "")
        assert result.stderr == refusal(data, how)
    assert list(data.iterdir()) == []  # no library made there, no lock, no store copy
    nothing_installed()


def _install(tmp_path: Path, library: Path) -> Path:
    """A library with one bundle (skill alpha) linked for both default agents."""
    ok(acxfs("add", pack(tmp_path, "alpha", artifact="pair")))
    link = agent_dirs()[1] / "alpha"
    assert os.readlink(link).startswith(str(library / "mnt"))
    return link


def _swap_library(data: Path) -> Path:
    """As nobody: move the library aside and put an empty one of theirs in its place."""
    theirs = data / "acxfs"

    def swap() -> None:
        os.rename(theirs, data / "acxfs-moved")
        theirs.mkdir(mode=0o777)

    as_nobody(swap)
    return theirs


def _restore(data: Path) -> None:
    shutil.rmtree(data / "acxfs")
    os.rename(data / "acxfs-moved", data / "acxfs")
    os.chown(data, 0, 0)


def test_another_user_owning_the_librarys_parent_cannot_swap_it_during_the_lock_wait(
        user_home: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    data = user_home / "data"
    data.mkdir(mode=0o755)
    monkeypatch.setenv("XDG_DATA_HOME", str(data))
    library = data / "acxfs"
    link = _install(tmp_path, library)
    state = (library / "library.json").read_bytes()
    os.chown(data, NOBODY, NOBODY)  # the review's set-up: the parent is another user's
    with held_lock(library / "lock"):
        command = start("remove", "alpha")
        try:
            out, err = command.communicate(timeout=20)  # refused without waiting for the lock
        except subprocess.TimeoutExpired:
            _swap_library(data)  # what the other user does while the command waits
            raise
        finally:
            if command.poll() is None:
                command.kill()
    assert (command.returncode, out, err) == (2, "", refusal(data, "owner"))
    assert os.readlink(link).startswith(str(library / "mnt"))
    assert (library / "library.json").read_bytes() == state
    os.chown(data, 0, 0)


def test_a_library_swapped_while_a_command_waited_for_its_lock_is_refused_after_it(
        user_home: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    data = user_home / "data"
    data.mkdir(mode=0o755)
    monkeypatch.setenv("XDG_DATA_HOME", str(data))
    library = data / "acxfs"
    link = _install(tmp_path, library)
    state = (library / "library.json").read_bytes()
    with held_lock(library / "lock"):
        command = start("remove", "alpha")
        try:
            assert wait_for(lambda: blocked_on_lock(command.pid), 20), command.communicate()
            os.chown(data, NOBODY, NOBODY)  # the parent became another user's meanwhile
            theirs = _swap_library(data)
        except BaseException:
            command.kill()
            raise
    try:
        out, err = command.communicate(timeout=30)
        assert (command.returncode, out, err) == (2, "", refusal(data, "owner"))
        assert list(theirs.iterdir()) == []  # nothing written in the swapped-in directory
    finally:
        _restore(data)
    assert os.readlink(link).startswith(str(library / "mnt"))
    assert (library / "library.json").read_bytes() == state
    assert [b["identity"] for b in listing()["bundles"]] == ["io.github.tester/pair"]


# --- (b) the state directory and its mount records -----------------------------------------


def _record_name(mountpoint: Path) -> str:
    return hashlib.sha256(os.fsencode(canonical(mountpoint))).hexdigest()[:24]


@pytest.mark.parametrize("how", ["others", "sticky"])
def test_mount_records_in_a_state_directory_another_user_controls_are_refused(
        user_home: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path, how: str) -> None:
    secret = make_secret(tmp_path)
    os.chmod(tmp_path, 0o755)  # nobody reaches the secret's directory, not the secret
    shared = user_home / "shared-state"
    shared.mkdir(mode=0o755)
    os.chmod(shared, 0o777 if how == "others" else 0o1777)
    monkeypatch.setenv("XDG_STATE_HOME", str(shared))
    mountpoint = tmp_path / "mp"
    key = _record_name(mountpoint)

    def plant() -> None:  # nobody's records directory, with links where records are written
        records = shared / "acxfs" / "mounts"
        records.mkdir(parents=True)
        os.chmod(shared / "acxfs", 0o777)
        os.chmod(records, 0o777)
        for name in (f"{key}.tmp", f"{key}.json", "acxfs.log"):
            os.symlink(secret / "victim", (records if name != "acxfs.log"
                                           else shared / "acxfs") / name)

    as_nobody(plant)
    cart = pack(tmp_path, "alpha", artifact="pair")
    result = acxfs("mount", cart, mountpoint)
    assert (result.returncode, result.stdout) == (2, "")
    foreign = shared if how == "others" else shared / "acxfs"
    assert result.stderr == refusal(foreign, "others" if how == "others" else "owner")
    assert mount_rows(mountpoint) == []
    assert_secret_untouched(secret)


def test_a_link_planted_at_a_mount_records_name_is_never_written_through(
        tmp_path: Path, local_key: None) -> None:
    secret = make_secret(tmp_path)
    mountpoint = tmp_path / "mp"
    key = _record_name(mountpoint)
    records = Path(os.environ["XDG_STATE_HOME"]) / "acxfs" / "mounts"
    records.mkdir(parents=True)
    for name in (f"{key}.tmp", f"{key}.json"):
        (records / name).symlink_to(secret / "victim")
    (records.parent / "acxfs.log").symlink_to(secret / "victim")  # the log: never followed
    with mounted(pack(tmp_path, "alpha", artifact="pair"), mountpoint) as mount:
        record = records / f"{key}.json"
        assert not record.is_symlink()
        assert json.loads(record.read_text())["pid"] == mount.pid
        assert_secret_untouched(secret)
    assert_secret_untouched(secret)


# --- (c) the agents' skill directories -----------------------------------------------------


@pytest.mark.parametrize("how", ["owner", "others", "group", "parent"])
def test_an_agent_directory_another_user_controls_gets_no_link(
        user_home: Path, tmp_path: Path, how: str) -> None:
    claude = user_home / ".claude" / "skills"
    if how == "parent":
        make_foreign(claude.parent, "owner")
    else:
        make_foreign(claude, how)
    cart = pack(tmp_path, "alpha", artifact="pair")
    result = acxfs("add", cart)
    assert (result.returncode, result.stdout) == (2, "")
    assert result.stderr == refusal(claude.parent if how == "parent" else claude,
                                    "owner" if how == "parent" else how)
    nothing_installed()
    assert listing()["bundles"] == []
    assert list((data_dir() / "store").iterdir()) == []


def test_a_sticky_agent_directory_others_can_write_is_used(user_home: Path,
                                                          tmp_path: Path) -> None:
    claude = user_home / ".claude" / "skills"
    claude.mkdir(parents=True)
    os.chmod(claude, 0o1777)  # others may add entries, but cannot replace acxfs's links
    ok(acxfs("add", pack(tmp_path, "alpha", artifact="pair")))
    link = claude / "alpha"

    def replace_link() -> None:
        os.unlink(link)

    with pytest.raises(AssertionError, match="the attacker's move failed"):
        as_nobody(replace_link)
    assert (link / "SKILL.md").is_file()


def test_an_update_into_an_agent_directory_another_user_took_over_is_refused(
        user_home: Path, tmp_path: Path) -> None:
    ok(acxfs("add", pack(tmp_path, "alpha", artifact="pair")))
    claude = user_home / ".claude" / "skills"
    old = os.readlink(claude / "alpha")
    os.chown(claude, NOBODY, NOBODY)
    newer = pack(tmp_path, "alpha", artifact="pair", version="2.0.0")
    for command in (["update", newer], ["add", newer]):
        result = acxfs(*command)
        assert (result.returncode, result.stdout) == (2, "")
        assert result.stderr == refusal(claude, "owner")
    assert os.readlink(claude / "alpha") == old
    assert [b["version"] for b in listing()["bundles"]] == ["1.0.0"]
    # Removing still works: the link in their directory is left alone, and said so.
    result = acxfs("remove", "alpha")
    assert result.returncode == 0, result.stderr
    assert os.readlink(claude / "alpha") == old
    assert not (agent_dirs()[0] / "alpha").exists()


def test_a_service_unit_directory_another_user_controls_gets_no_unit(user_home: Path) -> None:
    units = user_home / ".config" / "systemd" / "user"
    make_foreign(units, "owner")  # its owner could replace the unit: code run as this user
    result = acxfs("service", "install", timeout=90)
    assert (result.returncode, result.stdout) == (2, "")
    assert result.stderr == refusal(units, "owner")
    assert list(units.iterdir()) == []
