"""The library's own files are untrusted input: a damaged `library.json` or `intent.json`, and
a `store`, `mnt` or `control` that is a link, through the real `acxfs` command.

Each damage is refused with one line naming the file, the field and the problem (exit 2), in
bounded time, with nothing changed: no traceback, no hang on a FIFO, no file deleted outside
the store, no mount on a link's target.
"""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from scripts.mounting import acxfs, acxfs_mounts_under, mount_rows
from tests.support.library import data_dir, home
from tests.support.library_attacks import dumps, hand_state, pack, write_library_file

IDENTITY = "io.github.tester/pair"
AT = f'installed["{IDENTITY}"]'
SEE = "; see docs/library.md (recovering the library)\n"


def damaged(file: Path, field: str, problem: str) -> str:
    return f"acxfs: error: {file} is damaged: {field}: {problem}{SEE}"


def _link_field(name: str, value: object) -> Callable[[dict[str, Any]], None]:
    def change(doc: dict[str, Any]) -> None:
        doc["installed"][IDENTITY]["links"][0][name] = value
    return change


def _current(name: str, value: object) -> Callable[[dict[str, Any]], None]:
    def change(doc: dict[str, Any]) -> None:
        doc["installed"][IDENTITY]["current"][name] = value
    return change


STATE_DAMAGE: dict[str, tuple[Callable[[dict[str, Any]], None], str, str]] = {
    "an integer link name": (_link_field("name", 7), f"{AT}.links[0].name",
                             "not a string (a number)"),
    "an integer link directory": (_link_field("directory", 0), f"{AT}.links[0].directory",
                                  "not a string (a number)"),
    "a link target that is a list": (_link_field("target", ["x"]), f"{AT}.links[0].target",
                                     "not a string (a list)"),
    "links that are a number": (lambda d: d["installed"][IDENTITY].__setitem__("links", 3),
                                f"{AT}.links", "not a list (a number)"),
    "a link outside every agent directory": (
        _link_field("directory", "/etc"), f"{AT}.links[0].directory",
        "not an agent directory of this home (docs/library.md, Agents)"),
    "skills that are a string": (_current("skills", "alpha"), f"{AT}.current.skills",
                                 "not an object (a string)"),
    "a missing version": (lambda d: d["installed"][IDENTITY]["current"].pop("version"),
                          f"{AT}.current.version", "missing"),
    "a boolean where a publisher is": (_current("publisher", True), f"{AT}.current.publisher",
                                       "not a string (true or false)"),
    "a refresh interval of a century": (
        lambda d: d.__setitem__("refreshEvery", 100 * 365 * 86400), "refreshEvery",
        "not between 1 and 2592000 seconds"),
}


@pytest.mark.parametrize("case", sorted(STATE_DAMAGE))
def test_a_state_field_of_the_wrong_type_is_one_line_naming_it(case: str) -> None:
    change, field, problem = STATE_DAMAGE[case]
    doc = hand_state()
    change(doc)
    state = write_library_file("library.json", dumps(doc))
    before = state.read_bytes()
    result = acxfs("list")
    assert (result.returncode, result.stdout) == (2, "")
    assert result.stderr == damaged(state, field, problem)
    assert state.read_bytes() == before


def test_a_link_aimed_outside_the_mountpoint_is_damage(tmp_path: Path) -> None:
    doc = hand_state()
    doc["installed"][IDENTITY]["links"][0]["target"] = str(tmp_path)
    state = write_library_file("library.json", dumps(doc))
    result = acxfs("list")
    assert result.returncode == 2
    assert result.stderr == damaged(
        state, f"{AT}.links[0].target",
        f"not a path inside the library's mountpoint {data_dir() / 'mnt'}")


@pytest.mark.parametrize("kind", ["state", "intent"])
def test_a_hundred_thousand_nested_brackets_are_one_line(kind: str) -> None:
    name = {"state": "library.json", "intent": "intent.json"}[kind]
    path = write_library_file(name, "[" * 100_000 + "]" * 100_000)
    result = acxfs("list", timeout=30)
    assert (result.returncode, result.stdout) == (2, "")
    depth = 16 if kind == "state" else 8
    assert result.stderr == damaged(path, "(the file)",
                                    f"not JSON acxfs wrote (nested deeper than {depth} levels)")


@pytest.mark.parametrize("kind", ["state", "intent"])
@pytest.mark.parametrize("command", [["list"], ["remove", "alpha"], ["revert", "alpha"],
                                     ["up"], ["add", "missing.acx"]])
def test_a_fifo_at_the_state_or_intent_never_hangs_a_command(kind: str,
                                                             command: list[str]) -> None:
    name = {"state": "library.json", "intent": "intent.json"}[kind]
    write_library_file("library.json", dumps(hand_state()))
    path = data_dir() / name
    path.unlink(missing_ok=True)
    os.mkfifo(path)
    try:
        result = acxfs(*command, timeout=20)
    except subprocess.TimeoutExpired:
        pytest.fail(f"acxfs {' '.join(command)} hung on the FIFO {path}")
    assert (result.returncode, result.stdout) == (2, "")
    assert result.stderr == damaged(path, "(the file)", "a FIFO, not a regular file")
    assert acxfs_mounts_under(home()) == []


@pytest.mark.parametrize("kind", ["state", "intent"])
def test_a_link_at_the_state_or_intent_is_not_followed(kind: str, tmp_path: Path) -> None:
    name = {"state": "library.json", "intent": "intent.json"}[kind]
    real = tmp_path / "real.json"
    real.write_text(dumps(hand_state()))
    write_library_file("library.json", dumps(hand_state()))
    path = data_dir() / name
    path.unlink(missing_ok=True)
    path.symlink_to(real)
    result = acxfs("list")
    assert result.returncode == 2
    assert result.stderr == damaged(path, "(the file)", "a symbolic link, not a regular file")


def test_a_state_larger_than_its_bound_is_refused_unread() -> None:
    state = write_library_file("library.json", dumps(hand_state()) + " " * (16 * 1024 * 1024))
    result = acxfs("list")
    assert result.returncode == 2
    assert result.stderr == damaged(state, "(the file)", "larger than 16777216 bytes")


def test_a_state_with_a_key_twice_or_not_utf8_is_damage() -> None:
    text = dumps(hand_state())
    state = write_library_file("library.json", text.replace('"floors"', '"schema": "x", "floors"'))
    result = acxfs("list")
    assert result.stderr == damaged(state, "(the file)",
                                    "not JSON acxfs wrote (duplicate key 'schema')")
    write_library_file("library.json", text.encode().replace(b"io.github.tester", b"\xff"))
    result = acxfs("list")
    assert result.returncode == 2
    assert result.stderr == damaged(state, "(the file)", "not UTF-8")


# --- names of files acxfs deletes --------------------------------------------------------


def _victim(tmp_path: Path) -> Path:
    victim = tmp_path / "victim"
    victim.write_text("not the library's\n")
    return victim


@pytest.mark.parametrize("how", ["relative", "absolute"])
def test_a_revision_file_outside_the_store_is_never_deleted(tmp_path: Path, how: str) -> None:
    victim = _victim(tmp_path)
    store = data_dir() / "store"
    name = os.path.relpath(victim, store) if how == "relative" else str(victim)
    state = write_library_file("library.json", dumps(hand_state(file=name)))
    store.mkdir(mode=0o700)
    result = acxfs("remove", IDENTITY)
    assert result.returncode == 2
    assert result.stderr == damaged(state, f"{AT}.current.file",
                                    "not a store file name (<64 hex digits>.<format>)")
    assert victim.read_text() == "not the library's\n"


@pytest.mark.parametrize("how", ["relative", "absolute"])
def test_an_intent_deleting_a_file_outside_the_store_is_refused(tmp_path: Path,
                                                                how: str) -> None:
    victim = _victim(tmp_path)
    store = data_dir() / "store"
    state = write_library_file("library.json", dumps(hand_state()))
    store.mkdir(mode=0o700)
    name = os.path.relpath(victim, store) if how == "relative" else str(victim)
    intent = write_library_file("intent.json", json.dumps({
        "op": "remove", "make": [], "repoint": [], "remove": [],
        "state": state.read_text(), "deleteFiles": [name]}))
    for command in (["list"], ["remove", IDENTITY]):
        result = acxfs(*command)
        assert (result.returncode, result.stdout) == (2, "")
        assert result.stderr == damaged(intent, "deleteFiles[0]",
                                        "not a store file name (<64 hex digits>.<format>)")
    assert victim.read_text() == "not the library's\n"
    assert intent.exists()


def test_an_intent_whose_state_is_damaged_takes_no_step(tmp_path: Path) -> None:
    doc = hand_state()
    doc["installed"][IDENTITY]["links"][0]["name"] = 1
    link = hand_state()["installed"][IDENTITY]["links"][0]
    claude = home() / ".claude" / "skills"
    intent = write_library_file("intent.json", json.dumps({
        "op": "add", "make": [link], "repoint": [], "remove": [], "state": dumps(doc),
        "deleteFiles": []}))
    result = acxfs("list")
    assert result.returncode == 2
    assert result.stderr == damaged(intent, f"state.{AT}.links[0].name",
                                    "not a string (a number)")
    assert not claude.exists()  # the link it would make was not made


def test_an_intent_link_of_the_wrong_type_is_one_line() -> None:
    intent = write_library_file("intent.json", json.dumps({
        "op": "add", "make": [{"directory": 1, "name": "x", "target": "y"}], "repoint": [],
        "remove": [], "state": "", "deleteFiles": []}))
    result = acxfs("list")
    assert result.returncode == 2
    assert result.stderr == damaged(intent, "make[0].directory", "not a string (a number)")


# --- the library's own directories are never links ---------------------------------------


def test_a_store_that_is_a_link_is_refused_and_its_target_left_alone(tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    victim = elsewhere / "notes.txt"
    victim.write_text("mine\n")
    data_dir().mkdir(parents=True, mode=0o700)
    (data_dir() / "store").symlink_to(elsewhere)
    for command in (["list"], ["up"], ["remove", "x"]):
        result = acxfs(*command)
        assert (result.returncode, result.stdout) == (2, "")
        store = data_dir() / "store"
        assert result.stderr == (
            f"acxfs: error: {store} is a symbolic link; acxfs makes the library's own "
            f"directories itself and follows no link there: remove it (rm {store})\n")
    assert victim.read_text() == "mine\n"


@pytest.mark.slow
@pytest.mark.fuse
@pytest.mark.usefixtures("library_stops")
@pytest.mark.parametrize("name", ["mnt", "control"])
def test_a_mountpoint_or_control_directory_that_is_a_link_is_refused(
        tmp_path: Path, local_key: None, name: str) -> None:
    cart = pack(tmp_path, "alpha", artifact="pair")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    data_dir().mkdir(parents=True, mode=0o700)
    link = data_dir() / name
    link.symlink_to(elsewhere)
    result = acxfs("add", cart, timeout=90)
    assert (result.returncode, result.stdout) == (2, "")
    assert result.stderr == (
        f"acxfs: error: {link} is a symbolic link; acxfs makes the library's own "
        f"directories itself and follows no link there: remove it (rm {link})\n")
    assert mount_rows(elsewhere) == [] and list(elsewhere.iterdir()) == []
    assert not (home() / ".claude" / "skills").exists()
