"""Every revision is served one name right below the library's mountpoint, and the links of
a library an earlier acxfs made, aimed at nested paths (`<identity>/<version>-<digest>`), are
re-pointed by the next `acxfs up`, each to the same skill at its served name."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from scripts.mounting import acxfs
from tests.support.library import data_dir, listing, ok
from tests.support.library_attacks import pack

pytestmark = [pytest.mark.slow, pytest.mark.fuse, pytest.mark.usefixtures("library_stops")]
PAIR = "io.github.tester/pair"


def aim_at_the_earlier_layout() -> None:
    """The library's links, on disk and in library.json, as an earlier acxfs made them."""
    state_file = data_dir() / "library.json"
    state = json.loads(state_file.read_text())
    current = state["installed"][PAIR]["current"]
    nested = data_dir() / "mnt" / PAIR / f"{current['version']}-{current['digest'][:12]}"
    for link in state["installed"][PAIR]["links"]:
        path = Path(link["directory"]) / link["name"]
        path.unlink()
        os.symlink(nested / link["name"], path)
        link["target"] = str(nested / link["name"])
    state_file.write_text(json.dumps(state))


def assert_linked_at_the_served_name() -> None:
    (bundle,) = listing()["bundles"]
    served = Path(bundle["path"])
    assert served.parent == data_dir() / "mnt" and bundle["served"] is True
    assert len(bundle["links"]) == 4 and {link["state"] for link in bundle["links"]} == {"ok"}
    for link in bundle["links"]:
        name = Path(link["path"]).name
        assert os.readlink(link["path"]) == link["target"] == str(served / name)
        assert f"name: {name}" in (Path(link["path"]) / "SKILL.md").read_text()
    recorded = json.loads((data_dir() / "library.json").read_text())["installed"][PAIR]["links"]
    assert {link["target"] for link in recorded} == {str(served / "alpha"), str(served / "beta")}


def test_up_repoints_the_links_of_an_earlier_layout(tmp_path: Path, local_key: None) -> None:
    ok(acxfs("add", pack(tmp_path, "alpha", "beta", artifact="pair")))
    ok(acxfs("down"))
    aim_at_the_earlier_layout()
    ok(acxfs("up"))
    assert_linked_at_the_served_name()


def test_repair_adopts_and_repoints_the_links_of_an_earlier_layout(
        tmp_path: Path, local_key: None) -> None:
    ok(acxfs("add", pack(tmp_path, "alpha", "beta", artifact="pair")))
    ok(acxfs("down"))
    aim_at_the_earlier_layout()
    (data_dir() / "library.json").unlink()
    result = acxfs("repair", timeout=60)
    assert result.returncode == 0 and f"{PAIR}: 1.0.0 (4 links)" in result.stdout, result.stderr
    ok(acxfs("up"))
    assert_linked_at_the_served_name()
