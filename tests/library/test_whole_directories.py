"""An agent directory served whole (`acxfs layout whole`) is one link to a view of the
daemon, and still shows exactly the library: every install, update, revert and remove is
seen through it at once; a skill whose signer is no longer trusted is gone from it; a view
a change superseded is served on for the agents told a path in it (the newest few, never
showing a removed skill); repair keeps it; it can be turned back into a directory of links;
and a directory holding anything acxfs did not make is refused, left as it was.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

import pytest

from acxfs.library.serving.daemon import KEPT_VIEWS
from scripts.mounting import acxfs
from tests.support import FIXTURES
from tests.support.library import agent_dirs, data_dir

pytestmark = [pytest.mark.fuse, pytest.mark.usefixtures("library_stops")]

PUBLISHER = "io.github.tester"
REAL = FIXTURES / "real"
REX_KEY = "ed25519:fa825aaee84b8847f5e0ee8c8f924a1433db80676da431e037683f7e812c157a"


def pack(tmp_path: Path, ident: str, version: str, skill: str) -> Path:
    src = tmp_path / f"src-{ident}-{version}" / skill
    src.mkdir(parents=True)
    (src / "SKILL.md").write_text(f"---\nname: {skill}\ndescription: {ident} at {version}.\n---\n")
    out = tmp_path / f"{ident}-{version}.acx"
    made = acxfs("pack", src, "-o", out, "--publisher", PUBLISHER, "--id", ident,
                 "--version", version)
    assert made.returncode == 0, made.stderr
    return out


def run(*args: object) -> str:
    done = acxfs(*args)
    assert done.returncode == 0, (args, done.stdout, done.stderr)
    return done.stdout


def served_at(ident: str, version: str, cart: Path) -> Path:
    digest = hashlib.sha256(cart.read_bytes()).hexdigest()
    return data_dir() / "mnt" / f"{PUBLISHER}+{ident}@{version}-{digest[:12]}"


def views() -> list[str]:
    return sorted(name for name in os.listdir(data_dir() / "mnt") if name.startswith("@"))


def description(directory: Path, skill: str) -> str:
    return (directory / skill / "SKILL.md").read_text().split("description: ")[1].split("\n")[0]


def test_a_whole_directory_follows_every_change_at_once(tmp_path: Path, local_key: None) -> None:
    shared, claude = agent_dirs()
    v1, v2 = pack(tmp_path, "tool", "1.0.0", "alpha"), pack(tmp_path, "tool", "2.0.0", "alpha")
    other = pack(tmp_path, "other", "1.0.0", "beta")
    out = run("layout", "whole")
    assert f"{shared}: served whole -> " in out and f"{claude}: served whole -> " in out
    run("add", v1)
    for directory in (shared, claude):
        assert directory.is_symlink()
        assert os.path.dirname(os.readlink(directory)) == str(data_dir() / "mnt")
        assert os.listdir(directory) == ["alpha"]
        assert not (directory / "alpha").is_symlink()  # a real directory of the mount
        assert description(directory, "alpha") == "tool at 1.0.0."
    first = os.readlink(shared)
    assert views() == [os.path.basename(first)]
    run("add", other)
    assert sorted(os.listdir(shared)) == ["alpha", "beta"]
    run("update", v2)
    assert description(shared, "alpha") == "tool at 2.0.0."
    assert description(claude, "alpha") == "tool at 2.0.0."
    # The view the directory first linked to is served on, for an agent told a path in it:
    # what it named and is still served (1.0.0, now the previous revision), nothing else.
    assert os.path.basename(first) in views() and os.readlink(shared) != first
    assert os.listdir(first) == ["alpha"] and description(Path(first), "alpha") == "tool at 1.0.0."
    run("revert", "alpha")
    assert description(shared, "alpha") == "tool at 1.0.0."
    run("remove", "alpha")
    assert os.listdir(shared) == ["beta"]
    (bundle,) = json.loads(run("list", "--json"))["bundles"]
    assert [link["state"] for link in bundle["links"]] == ["ok", "ok"]
    run("remove", "beta")
    assert os.listdir(shared) == [] and shared.is_symlink()


def test_links_become_a_whole_directory_and_back(tmp_path: Path, local_key: None) -> None:
    shared, claude = agent_dirs()
    cart = pack(tmp_path, "tool", "1.0.0", "alpha")
    run("add", cart)
    target = str(served_at("tool", "1.0.0", cart) / "alpha")
    assert os.readlink(shared / "alpha") == target
    run("layout", "whole", "--agent", "agents")
    assert shared.is_symlink() and not claude.is_symlink()
    assert description(shared, "alpha") == "tool at 1.0.0."
    assert os.readlink(claude / "alpha") == target  # the other directory is as it was
    assert "served whole" in run("layout", "--agent", "agents")
    run("layout", "links", "--agent", "agents")
    assert not shared.is_symlink() and shared.is_dir()
    assert os.readlink(shared / "alpha") == target
    assert len(views()) == 1  # the view no directory links to any more is served on


def test_a_directory_with_a_file_of_the_user_is_not_served_whole(
        tmp_path: Path, local_key: None) -> None:
    shared, _ = agent_dirs()
    cart = pack(tmp_path, "tool", "1.0.0", "alpha")
    run("add", cart)
    mine = shared / "mine"
    mine.mkdir()
    (mine / "SKILL.md").write_text("---\nname: mine\ndescription: the user's.\n---\n")
    refused = acxfs("layout", "whole", "--agent", "agents")
    assert refused.returncode != 0
    lines = refused.stderr.strip().splitlines()
    assert len(lines) == 1 and "mine" in lines[0] and "Traceback" not in refused.stderr
    assert not shared.is_symlink()
    assert sorted(os.listdir(shared)) == ["alpha", "mine"]
    assert (shared / "alpha").is_symlink()
    assert "a directory of links" in run("layout", "--agent", "agents")


def test_a_skill_whose_signer_is_no_longer_trusted_leaves_the_view(local_key: None) -> None:
    shared, _ = agent_dirs()
    cart = REAL / "rex-calder-1.0.0.acx"
    run("trust", "add", cart, "--publisher", "io.github.calder-sec")
    run("layout", "whole", "--agent", "agents")
    run("add", cart, "--agent", "agents")
    skill_md = shared / "expertise-security-expert" / "SKILL.md"
    assert skill_md.read_bytes()  # looked up and read: the kernel may keep all of it
    run("trust", "remove", REX_KEY)
    assert os.listdir(shared) == []
    with pytest.raises(FileNotFoundError):
        skill_md.read_bytes()



def links_by_bundle(doc: dict[str, object]) -> list[tuple[str, list[tuple[str, str]]]]:
    bundles = doc["bundles"]
    assert isinstance(bundles, list)
    return [(b["identity"], sorted((x["path"], x["state"]) for x in b["links"]))
            for b in bundles]


@pytest.mark.slow
def test_repair_keeps_a_directory_served_whole(tmp_path: Path, local_key: None) -> None:
    """library.json lost with the daemon up: repair proves what the directory served whole
    showed from the daemon's listing of its view (the name hashes to it) and keeps it so;
    the other directory's links are kept too."""
    shared, claude = agent_dirs()
    run("layout", "whole", "--agent", "agents")
    run("add", pack(tmp_path, "tool", "1.0.0", "alpha"))
    run("add", pack(tmp_path, "other", "1.0.0", "beta"), "--agent", "claude")
    view = os.readlink(shared)
    before = json.loads(run("list", "--json"))
    (data_dir() / "library.json").unlink()
    repaired = acxfs("repair", timeout=60)
    assert repaired.returncode == 0, repaired.stderr
    assert "cannot be proved" not in repaired.stderr
    assert os.readlink(shared) == view  # the same view: nothing shown changed
    assert sorted(os.listdir(shared)) == ["alpha"]
    assert description(shared, "alpha") == "tool at 1.0.0."
    assert sorted(os.listdir(claude)) == ["alpha", "beta"]
    after = json.loads(run("list", "--json"))
    assert after["whole"] == before["whole"] and set(after["whole"]) == {str(shared)}
    assert links_by_bundle(after) == links_by_bundle(before)
    run("remove", "alpha")  # and it works on: the view follows
    assert os.listdir(shared) == []


@pytest.mark.slow
def test_repair_with_the_daemon_down_proves_a_whole_directory_from_the_store(
        tmp_path: Path, local_key: None) -> None:
    shared, claude = agent_dirs()
    run("layout", "whole")
    run("add", pack(tmp_path, "tool", "1.0.0", "alpha"))
    run("add", pack(tmp_path, "other", "1.0.0", "beta"))
    views_before = {d: os.readlink(d) for d in (shared, claude)}
    run("down")
    (data_dir() / "library.json").unlink()
    repaired = acxfs("repair", timeout=60)
    assert repaired.returncode == 0, repaired.stderr
    assert "cannot be proved" not in repaired.stderr
    run("up")
    assert {d: os.readlink(d) for d in (shared, claude)} == views_before
    for directory in (shared, claude):
        assert sorted(os.listdir(directory)) == ["alpha", "beta"]
        assert description(directory, "beta") == "other at 1.0.0."


@pytest.mark.slow
def test_repair_shows_every_skill_where_a_view_cannot_be_proved(tmp_path: Path,
                                                                local_key: None) -> None:
    shared, claude = agent_dirs()
    run("layout", "whole", "--agent", "agents")
    run("add", pack(tmp_path, "tool", "1.0.0", "alpha"), "--agent", "claude")
    run("add", pack(tmp_path, "other", "1.0.0", "beta"))
    run("add", pack(tmp_path, "third", "1.0.0", "gamma"), "--agent", "claude")
    run("down")  # no listing: only beta was shown, which no candidate of the store says
    (data_dir() / "library.json").unlink()
    repaired = acxfs("repair", timeout=60)
    assert repaired.returncode == 0, repaired.stderr
    assert f"acxfs: note: {shared} is served whole; which skills it showed cannot be " \
           "proved, so it shows every skill of the library" in repaired.stderr
    run("up")
    assert shared.is_symlink()
    assert sorted(os.listdir(shared)) == ["alpha", "beta", "gamma"]
    assert sorted(os.listdir(claude)) == ["alpha", "beta", "gamma"]


@pytest.mark.slow
def test_superseded_views_are_served_on_bounded_and_never_show_a_removed_skill(
        tmp_path: Path, local_key: None) -> None:
    shared, _ = agent_dirs()
    run("layout", "whole", "--agent", "agents")
    run("add", pack(tmp_path, "tool", "1.0.0", "alpha"), "--agent", "agents")
    first = os.readlink(shared)
    for index in range(KEPT_VIEWS + 2):
        run("add", pack(tmp_path, f"more{index}", "1.0.0", f"more{index}"), "--agent", "agents")
        if index < KEPT_VIEWS:
            assert os.listdir(first) == ["alpha"]  # told once, readable on
    assert os.path.basename(first) not in views()  # the oldest ones are served no more
    assert len(views()) == KEPT_VIEWS + 1  # the one linked to, and the newest it superseded
    run("remove", "alpha")
    assert all("alpha" not in os.listdir(data_dir() / "mnt" / view) for view in views())
