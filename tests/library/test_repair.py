"""`acxfs repair` through the real command: a library whose state or intent is damaged (or
whose state is gone) is rebuilt from its store and the links acxfs provably made, with the
damaged file kept beside it, and works again: served, listed, updated, reverted, removed.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest

from scripts.mounting import acxfs, acxfs_command
from tests.support.library import agent_dirs, data_dir, listing, ok
from tests.support.library_attacks import pack

pytestmark = [pytest.mark.slow, pytest.mark.fuse, pytest.mark.usefixtures("library_stops")]
PAIR = "io.github.tester/pair"
SOLO = "io.github.tester/solo"


def summary(doc: dict[str, Any]) -> dict[str, Any]:
    """What a user relies on in `acxfs list --json`: per bundle its version, previous
    version, skills, whether it is served, and each link with its target and state."""
    return {b["identity"]: (b["version"], b["previous"] and b["previous"]["version"],
                            b["skills"], b["served"],
                            sorted((link["path"], link["target"], link["state"])
                                   for link in b["links"]))
            for b in doc["bundles"]}


def _library(tmp_path: Path) -> tuple[Path, dict[str, Any]]:
    """pair 1.0.0 updated to 2.0.0 (two skills) and solo 1.0.0, all linked; the newer pair."""
    ok(acxfs("add", pack(tmp_path, "alpha", "beta", artifact="pair")))
    ok(acxfs("add", pack(tmp_path, "gamma", artifact="solo")))
    newer = pack(tmp_path, "alpha", "beta", artifact="pair", version="2.0.0")
    ok(acxfs("update", newer))
    return newer, summary(listing())


def _damage(how: str) -> bytes | None:
    """Damage library.json as `how` says; the damaged bytes (None for a FIFO or none)."""
    state = data_dir() / "library.json"
    if how == "deleted":
        state.unlink()
        return None
    if how == "fifo":
        state.unlink()
        os.mkfifo(state)
        return None
    doc = json.loads(state.read_text())
    for item in doc["installed"].values():
        for link in item["links"]:
            link["name"] = 0
    data = json.dumps(doc).encode()
    state.write_bytes(data)
    return data


def test_repair_of_a_sound_library_changes_nothing(tmp_path: Path, local_key: None) -> None:
    _, before = _library(tmp_path)
    state = (data_dir() / "library.json").read_bytes()
    result = acxfs("repair")
    assert (result.returncode, result.stdout) == (0, "the library is not damaged: nothing to "
                                                     "repair\n")
    assert (data_dir() / "library.json").read_bytes() == state
    assert summary(listing()) == before


@pytest.mark.parametrize("how", ["wrong types", "fifo", "deleted"])
def test_repair_rebuilds_a_library_whose_state_is_damaged(tmp_path: Path, local_key: None,
                                                          how: str) -> None:
    _, before = _library(tmp_path)
    damaged = _damage(how)
    if how != "deleted":
        refused = acxfs("list", timeout=20)
        assert refused.returncode == 2 and "is damaged" in refused.stderr
    result = acxfs("repair", timeout=60)
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == [
        f"{PAIR}: 2.0.0, previous 1.0.0 (4 links)", f"{SOLO}: 1.0.0 (2 links)",
        "repaired the library: 2 bundles (acxfs list shows them)"]
    copies = sorted(data_dir().glob("library.json.damaged-*"))
    if how == "deleted":
        assert copies == []
    else:
        (copy,) = copies
        assert f"kept the damaged library.json as {copy.name}" in result.stderr
        if damaged is not None:
            assert copy.read_bytes() == damaged
    assert summary(listing()) == before
    doc = listing()
    assert doc["floors"][PAIR]["version"] == "2.0.0"
    # It works again: revert, then remove both, leaving the agents' directories empty.
    ok(acxfs("revert", PAIR))
    assert [b["version"] for b in listing()["bundles"]] == ["1.0.0", "1.0.0"]
    ok(acxfs("remove", PAIR, SOLO))
    assert all(list(d.iterdir()) == [] for d in agent_dirs())
    assert list((data_dir() / "store").iterdir()) == []


def test_repair_gives_up_a_damaged_intent_and_finishes_the_update_from_its_links(
        tmp_path: Path, local_key: None) -> None:
    ok(acxfs("add", pack(tmp_path, "alpha", "beta", artifact="pair")))
    newer = pack(tmp_path, "alpha", "beta", artifact="pair", version="2.0.0")
    killed = subprocess.run([*acxfs_command(), "update", str(newer)],
                            env={**os.environ, "ACXFS_TEST_KILL_AT": "add:repoint"},
                            capture_output=True, text=True, timeout=60, check=False)
    assert killed.returncode == -9  # one link re-pointed to 2.0.0, three still at 1.0.0
    targets = {os.readlink(d / s) for d in agent_dirs() for s in ("alpha", "beta")}
    assert len({t.split("/")[-2] for t in targets}) == 2
    intent = data_dir() / "intent.json"
    intent.write_text('{"op": "add", "make": 1}')
    refused = acxfs("list")
    assert refused.returncode == 2
    assert refused.stderr.startswith(f"acxfs: error: {intent} is damaged: make: not a list")
    result = acxfs("repair", timeout=60)
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == [f"{PAIR}: 2.0.0, previous 1.0.0 (4 links)",
                                          "repaired the library: 1 bundles (acxfs list "
                                          "shows them)"]
    (copy,) = data_dir().glob("intent.json.damaged-*")
    assert copy.read_text() == '{"op": "add", "make": 1}'
    assert not intent.exists()
    (bundle,) = listing()["bundles"]
    assert (bundle["version"], bundle["previous"]["version"], bundle["served"]) == (
        "2.0.0", "1.0.0", True)
    assert {link["state"] for link in bundle["links"]} == {"ok"}
    for d in agent_dirs():
        for skill in ("alpha", "beta"):
            assert os.readlink(d / skill) == str(Path(bundle["path"]) / skill)
            assert Path(bundle["path"]).parent == data_dir() / "mnt"
            assert (d / skill / "SKILL.md").read_text().startswith("---\nname: ")


def test_a_lost_library_json_never_costs_the_store(tmp_path: Path, local_key: None) -> None:
    """`library.json` deleted by hand, then the command anyone runs first (`acxfs list`): the
    store is what repair rebuilds the library from, so it is kept and the command says the
    state is damaged; repair then brings every bundle back."""
    _, before = _library(tmp_path)
    store = sorted(p.name for p in (data_dir() / "store").iterdir())
    (data_dir() / "library.json").unlink()
    for command in (("list",), ("add", pack(tmp_path, "delta", artifact="other"))):
        refused = acxfs(*command, timeout=30)
        assert refused.returncode == 2, refused
        [line] = refused.stderr.splitlines()
        assert line == (f"acxfs: error: {data_dir() / 'library.json'} is damaged: (the file): "
                        f"missing, while {len(store)} store files are there and links of acxfs "
                        "point into the library; see docs/library.md (recovering the library)")
        assert sorted(p.name for p in (data_dir() / "store").iterdir()) == store
    ok(acxfs("repair", timeout=60))
    assert summary(listing()) == before
