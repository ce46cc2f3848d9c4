"""The library's lifecycle through the real `acxfs` command: update, rollback protection,
revert, version floors, a kill at each step of an update, racing updates, trust changes and
links changed by hand.

Every test runs in the isolated HOME of conftest (the library lands in
`$HOME/.local/share/acxfs`), through real mounts, and stops the library daemon at the end;
a daemon or mount left behind fails the test.
"""

from __future__ import annotations

import hashlib
import os
import re
import subprocess
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import pytest

from acxfs.paths import library_paths
from scripts.mounting import acxfs, acxfs_command
from tests.support.library import data_dir, home, listing

pytestmark = [pytest.mark.fuse, pytest.mark.slow, pytest.mark.usefixtures("library_stops")]

PUBLISHER = "io.github.tester"
IDENTITY = f"{PUBLISHER}/tool"
AGENT_DIRS = (".agents", ".claude")
EPOCH = "1767225600"
UUID = "00000000-0000-4000-8000-0000000000a1"


def link_path(agent: str, skill: str) -> Path:
    return home() / agent / "skills" / skill


def skill_text(name: str, version: str) -> str:
    return (f"---\nname: {name}\ndescription: {name} at version {version}.\n---\n\n"
            f"# {name}\n\nRelease {version}.\n")


def pack(tmp_path: Path, version: str, *skills: str, key: Path | None = None,
         fixed: bool = False, tag: str = "") -> Path:
    return pack_signed(tmp_path, version, *skills, key=key, fixed=fixed, tag=tag)[0]


def pack_signed(tmp_path: Path, version: str, *skills: str, key: Path | None = None,
                fixed: bool = False, tag: str = "") -> tuple[Path, str]:
    """A cartridge of identity IDENTITY at `version` offering `skills` (each SKILL.md names the
    version), and the manifest hash pack printed; `fixed`: reproducible (one time and uuid),
    so two packs differ only where the key signs."""
    src = tmp_path / f"src-{version}-{'-'.join(skills)}{tag}"
    for name in skills:
        (src / name).mkdir(parents=True)
        (src / name / "SKILL.md").write_text(skill_text(name, version))
    out = tmp_path / f"tool-{version}{tag}.acx"
    args: list[object] = ["pack", *(src / n for n in skills), "-o", out, "--publisher",
                          PUBLISHER, "--id", "tool", "--version", version]
    env = dict(os.environ)
    if key is not None:
        args += ["--key", key]
    if fixed:
        args += ["--uuid", UUID]
        env["SOURCE_DATE_EPOCH"] = EPOCH
    result = acxfs(*args, env=env)
    assert result.returncode == 0, result.stderr
    (line,) = [x for x in result.stdout.splitlines() if x.startswith("manifest: ")]
    return out, line.removeprefix("manifest: ")


def bundle() -> dict[str, Any]:
    (only,) = listing()["bundles"]
    assert isinstance(only, dict)
    return only


def served_at(version: str, cart: Path) -> Path:
    """Where the daemon serves `cart`: its identity, version and digest prefix."""
    digest = hashlib.sha256(cart.read_bytes()).hexdigest()
    return data_dir() / "mnt" / f"{PUBLISHER}+tool@{version}-{digest[:12]}"


def assert_linked_to(root: Path, skills: Iterable[str], absent: Iterable[str] = ()) -> None:
    """Every skill in `skills` is linked in both agent directories to `root/<skill>` and reads
    its verified SKILL.md; none in `absent` is there at all."""
    for agent in AGENT_DIRS:
        for skill in skills:
            link = link_path(agent, skill)
            assert link.is_symlink(), link
            assert Path(os.readlink(link)) == root / skill
            assert (link / "SKILL.md").read_text().startswith(f"---\nname: {skill}\n")
        for skill in absent:
            assert not link_path(agent, skill).is_symlink() and not link_path(agent, skill).exists()


def library_files() -> dict[str, bytes]:
    """The state and store as bytes: what an unchanged library must keep exactly."""
    files = {"state": library_paths().state.read_bytes()}
    for stored in sorted((data_dir() / "store").iterdir()):
        files[stored.name] = stored.read_bytes()
    return files


def agent_links() -> dict[str, str]:
    found: dict[str, str] = {}
    for agent in AGENT_DIRS:
        directory = home() / agent / "skills"
        if directory.is_dir():
            for entry in sorted(directory.iterdir()):
                found[str(entry)] = os.readlink(entry) if entry.is_symlink() else "not a link"
    return found


def assert_one_line_refusal(result: subprocess.CompletedProcess[str], pattern: str) -> None:
    assert result.returncode == 1, (result.stdout, result.stderr)
    assert "Traceback" not in result.stderr
    lines = result.stderr.splitlines()
    assert len(lines) == 1, lines
    assert re.fullmatch(pattern, lines[0]), lines[0]


# --- update -------------------------------------------------------------------------------


def test_update_repoints_links_keeps_an_open_old_file_and_adds_and_drops_skills(
        tmp_path: Path, local_key: None) -> None:
    old = pack(tmp_path, "1.0.0", "kept-skill", "dropped-skill")
    new = pack(tmp_path, "2.0.0", "kept-skill", "added-skill")
    assert acxfs("add", old).returncode == 0
    old_root = served_at("1.0.0", old)
    assert_linked_to(old_root, {"kept-skill", "dropped-skill"})
    # Opened through the agent's link before the update, read only after it.
    handle = os.open(link_path(".claude", "kept-skill") / "SKILL.md", os.O_RDONLY)
    try:
        result = acxfs("update", new)
        assert result.returncode == 0, result.stderr
        assert "1.0.0 -> 2.0.0" in result.stdout
        new_root = served_at("2.0.0", new)
        assert new_root != old_root
        assert_linked_to(new_root, {"kept-skill", "added-skill"}, absent={"dropped-skill"})
        for agent in AGENT_DIRS:
            assert (link_path(agent, "kept-skill") / "SKILL.md").read_text() == \
                skill_text("kept-skill", "2.0.0")
        assert os.pread(handle, 65536, 0) == skill_text("kept-skill", "1.0.0").encode()
    finally:
        os.close(handle)
    doc = bundle()
    assert doc["version"] == "2.0.0" and doc["served"] is True
    assert doc["skills"] == ["added-skill", "kept-skill"]
    assert doc["previous"] == {"version": "1.0.0", "digest": hashlib.sha256(
        old.read_bytes()).hexdigest(), "served": True}
    assert {link["target"] for link in doc["links"]} == {
        str(new_root / s) for s in ("added-skill", "kept-skill")}
    assert all(link["state"] == "ok" for link in doc["links"])
    assert len(list((data_dir() / "store").iterdir())) == 2  # the previous revision is kept


def test_update_of_an_identity_not_installed_is_refused(tmp_path: Path, local_key: None) -> None:
    cart = pack(tmp_path, "1.0.0", "lone-skill")
    before = agent_links()
    result = acxfs("update", cart)
    assert_one_line_refusal(result, r"acxfs: error: .*io\.github\.tester/tool is not installed "
                                    r"\(acxfs add it\)")
    assert agent_links() == before
    assert not list((data_dir() / "store").iterdir())


# --- rollback protection --------------------------------------------------------------------


def test_rollback_below_the_installed_version_is_refused(tmp_path: Path, local_key: None) -> None:
    newer = pack(tmp_path, "1.3.0", "roll-skill")
    older = pack(tmp_path, "1.2.0", "roll-skill")
    assert acxfs("add", newer).returncode == 0
    before, links_before = library_files(), agent_links()
    for command in ("update", "add"):
        result = acxfs(command, older)
        assert_one_line_refusal(
            result, r"acxfs: error: rollback refused: io\.github\.tester/tool 1\.2\.0 is older "
                    r"than 1\.3\.0, installed on \d{4}-\d{2}-\d{2}; --allow-downgrade to "
                    r"install it anyway")
        assert library_files() == before and agent_links() == links_before
    assert bundle()["version"] == "1.3.0"


def test_prerelease_of_the_installed_version_is_a_rollback(tmp_path: Path,
                                                           local_key: None) -> None:
    release = pack(tmp_path, "2.0.0", "pre-skill")
    candidate = pack(tmp_path, "2.0.0-rc.1", "pre-skill")
    assert acxfs("add", release).returncode == 0
    result = acxfs("update", candidate)
    assert_one_line_refusal(result, r"acxfs: error: rollback refused: io\.github\.tester/tool "
                                    r"2\.0\.0-rc\.1 is older than 2\.0\.0, .*")


def test_same_version_with_another_manifest_is_refused(tmp_path: Path, local_key: None) -> None:
    first = pack(tmp_path, "1.0.0", "same-skill")
    other = pack(tmp_path, "1.0.0", "same-skill", tag="-other")  # another uuid: another release
    assert acxfs("add", first).returncode == 0
    before, links_before = library_files(), agent_links()
    result = acxfs("update", other)
    assert_one_line_refusal(
        result, r"acxfs: error: refused: io\.github\.tester/tool 1\.0\.0 is another release "
                r"under the number 1\.0\.0 installed before \(its signed manifest differs\); "
                r"--allow-downgrade to install it anyway")
    assert library_files() == before and agent_links() == links_before


def test_same_release_resigned_with_another_trusted_key_is_accepted_with_allow_key_change(
        tmp_path: Path, local_key: None) -> None:
    rotated = tmp_path / "rotated.pem"
    made = acxfs("keygen", rotated)
    assert made.returncode == 0, made.stderr
    pinned = acxfs("trust", "add", tmp_path / "rotated.pub.pem", "--publisher", PUBLISHER)
    assert pinned.returncode == 0, pinned.stderr
    first, manifest = pack_signed(tmp_path, "1.0.0", "signed-skill", fixed=True)
    resigned, manifest_again = pack_signed(tmp_path, "1.0.0", "signed-skill", key=rotated,
                                           fixed=True, tag="-resigned")
    assert manifest == manifest_again  # one release ...
    assert first.read_bytes() != resigned.read_bytes()  # ... in two files, signed twice

    assert acxfs("add", first).returncode == 0
    first_keyid = bundle()["keyid"]
    before, links_before = library_files(), agent_links()
    refused = acxfs("update", resigned)  # another key of the publisher: said, not silent
    assert_one_line_refusal(
        refused, rf"acxfs: error: {re.escape(IDENTITY)} is installed from publisher "
                 rf"{re.escape(PUBLISHER)} with the key {re.escape(first_keyid)}; this file is "
                 r"signed by another key \(ed25519:[0-9a-f]+\); --allow-key-change to accept "
                 r"the new key")
    assert library_files() == before and agent_links() == links_before
    result = acxfs("update", resigned, "--allow-key-change")
    assert result.returncode == 0, result.stderr
    assert_linked_to(served_at("1.0.0", resigned), {"signed-skill"})
    doc = bundle()
    assert doc["version"] == "1.0.0" and doc["keyid"] != first_keyid
    assert doc["manifest"].removeprefix("sha256:") == manifest.removeprefix("sha256:")
    assert doc["previous"]["digest"] == hashlib.sha256(first.read_bytes()).hexdigest()


def test_allow_downgrade_installs_an_older_version_and_keeps_the_floor(
        tmp_path: Path, local_key: None) -> None:
    newer = pack(tmp_path, "1.3.0", "down-skill")
    older = pack(tmp_path, "1.2.0", "down-skill")
    between = pack(tmp_path, "1.2.5", "down-skill")
    other_release = pack(tmp_path, "1.2.0", "down-skill", tag="-other")
    assert acxfs("add", newer).returncode == 0
    result = acxfs("update", older, "--allow-downgrade")
    assert result.returncode == 0, result.stderr
    assert_linked_to(served_at("1.2.0", older), {"down-skill"})
    doc = listing()
    assert doc["bundles"][0]["version"] == "1.2.0"
    assert doc["floors"][IDENTITY]["version"] == "1.3.0"  # a downgrade never lowers the floor
    refused = acxfs("update", between)
    assert_one_line_refusal(refused, r"acxfs: error: rollback refused: .* 1\.2\.5 is older than "
                                     r"1\.3\.0, .*")
    also = acxfs("add", other_release, "--allow-downgrade")  # another release under 1.2.0
    assert also.returncode == 0, also.stderr
    assert_linked_to(served_at("1.2.0", other_release), {"down-skill"})


# --- revert ---------------------------------------------------------------------------------


def test_revert_swaps_back_and_keeps_the_floor(tmp_path: Path, local_key: None) -> None:
    old = pack(tmp_path, "1.0.0", "rev-skill", "rev-old-skill")
    new = pack(tmp_path, "2.0.0", "rev-skill", "rev-new-skill")
    middle = pack(tmp_path, "1.5.0", "rev-skill")
    assert acxfs("add", old).returncode == 0
    assert acxfs("update", new).returncode == 0
    result = acxfs("revert", IDENTITY)
    assert result.returncode == 0, result.stderr
    assert "back to 1.0.0" in result.stdout
    assert_linked_to(served_at("1.0.0", old), {"rev-skill", "rev-old-skill"},
                     absent={"rev-new-skill"})
    doc = listing()
    assert doc["bundles"][0]["version"] == "1.0.0"
    assert doc["bundles"][0]["previous"]["version"] == "2.0.0"
    assert doc["floors"][IDENTITY]["version"] == "2.0.0"
    refused = acxfs("update", middle)  # the floor stayed at 2.0.0
    assert_one_line_refusal(refused, r"acxfs: error: rollback refused: .* 1\.5\.0 is older than "
                                     r"2\.0\.0, .*")
    again = acxfs("revert", "rev-skill")  # by skill name: back to 2.0.0 at once
    assert again.returncode == 0, again.stderr
    assert_linked_to(served_at("2.0.0", new), {"rev-skill", "rev-new-skill"},
                     absent={"rev-old-skill"})


def test_revert_naming_one_bundle_twice_goes_back_once(tmp_path: Path, local_key: None) -> None:
    old = pack(tmp_path, "1.0.0", "twice-skill")
    new = pack(tmp_path, "2.0.0", "twice-skill")
    assert acxfs("add", old).returncode == 0
    assert acxfs("update", new).returncode == 0
    result = acxfs("revert", IDENTITY, "twice-skill")  # by identity and by skill: one bundle
    assert result.returncode == 0, result.stderr
    assert result.stdout.count("back to 1.0.0") == 1
    assert_linked_to(served_at("1.0.0", old), {"twice-skill"})
    assert listing()["bundles"][0]["version"] == "1.0.0"


def test_revert_without_a_previous_revision_is_refused(tmp_path: Path, local_key: None) -> None:
    only = pack(tmp_path, "1.0.0", "only-skill")
    assert acxfs("add", only).returncode == 0
    before, links_before = library_files(), agent_links()
    result = acxfs("revert", IDENTITY)
    assert_one_line_refusal(result, r"acxfs: error: io\.github\.tester/tool has no previous "
                                    r"revision to go back to")
    assert library_files() == before and agent_links() == links_before


# --- floors and remove ----------------------------------------------------------------------


def test_floor_survives_remove_and_goes_with_forget(tmp_path: Path, local_key: None) -> None:
    newer = pack(tmp_path, "1.3.0", "floor-skill")
    older = pack(tmp_path, "1.2.0", "floor-skill")
    assert acxfs("add", newer).returncode == 0
    assert acxfs("remove", IDENTITY).returncode == 0
    assert listing()["floors"][IDENTITY]["version"] == "1.3.0"
    refused = acxfs("add", older)
    assert_one_line_refusal(refused, r"acxfs: error: rollback refused: io\.github\.tester/tool "
                                     r"1\.2\.0 is older than 1\.3\.0, installed on "
                                     r"\d{4}-\d{2}-\d{2}; --allow-downgrade to install it anyway")
    assert not link_path(".claude", "floor-skill").exists()
    assert not list((data_dir() / "store").iterdir())
    assert acxfs("add", newer).returncode == 0  # the floor's own release is welcome back
    forgot = acxfs("remove", "floor-skill", "--forget")
    assert forgot.returncode == 0, forgot.stderr
    assert IDENTITY not in listing()["floors"]
    result = acxfs("add", older)
    assert result.returncode == 0, result.stderr
    assert_linked_to(served_at("1.2.0", older), {"floor-skill"})
    assert listing()["floors"][IDENTITY]["version"] == "1.2.0"


# --- interrupted and concurrent updates -----------------------------------------------------


UPDATE_STEPS = ["add:checked", "add:intent", "add:repoint", "add:unlink", "add:link",
                "add:commit", "add:cleanup",
                # inside one link step, while a temporary link exists beside the skill's
                "replace_symlink_at:exchange", "replace_symlink_at:exchanged",
                "remove_symlink_at:unlink"]


@pytest.mark.parametrize("step", UPDATE_STEPS)
def test_update_killed_at_each_step_leaves_all_links_old_or_all_new(
        tmp_path: Path, local_key: None, step: str) -> None:
    old = pack(tmp_path, "1.0.0", "kill-kept", "kill-dropped")
    new = pack(tmp_path, "2.0.0", "kill-kept", "kill-added")
    assert acxfs("add", old).returncode == 0
    killed = subprocess.run([*acxfs_command(), "update", str(new)],
                            env={**os.environ, "ACXFS_TEST_KILL_AT": step},
                            capture_output=True, text=True, timeout=60, check=False)
    assert killed.returncode == -9, (killed.stdout, killed.stderr)
    assert acxfs("list").returncode == 0  # any command finishes (or forgets) the change first
    if step == "add:checked":  # killed before its intent: the old library, no orphan file
        root, skills, absent, version = served_at("1.0.0", old), {"kill-kept", "kill-dropped"}, \
            {"kill-added"}, "1.0.0"
        assert [p.name for p in (data_dir() / "store").iterdir()] == [
            f"{hashlib.sha256(old.read_bytes()).hexdigest()}.acx"]
    else:
        root, skills, absent, version = served_at("2.0.0", new), {"kill-kept", "kill-added"}, \
            {"kill-dropped"}, "2.0.0"
        assert len(list((data_dir() / "store").iterdir())) == 2
    assert_linked_to(root, skills, absent)
    doc = bundle()
    assert doc["version"] == version and doc["served"] is True
    assert sorted((link["path"], link["target"]) for link in doc["links"]) == sorted(
        (str(link_path(a, s)), str(root / s)) for a in AGENT_DIRS for s in skills)
    assert not library_paths().intent.exists()
    assert agent_links() == {link["path"]: link["target"] for link in doc["links"]}  # no temp


def test_two_updates_racing_finish_cleanly_and_one_wins(tmp_path: Path,
                                                        local_key: None) -> None:
    base = pack(tmp_path, "1.0.0", "race-skill", "race-old")
    second = pack(tmp_path, "2.0.0", "race-skill", "race-two")
    third = pack(tmp_path, "3.0.0", "race-skill", "race-three")
    assert acxfs("add", base).returncode == 0
    racers = [subprocess.Popen([*acxfs_command(), "update", str(cart)], stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True, stdin=subprocess.DEVNULL)
              for cart in (second, third)]
    outcomes = [(p.wait(timeout=120), *p.communicate()) for p in racers]
    for code, _, err in outcomes:
        assert "Traceback" not in err
        assert code in (0, 1), err
    two_code, _, two_err = outcomes[0]
    three_code, _, three_err = outcomes[1]
    assert three_code == 0, three_err  # 3.0.0 is above every floor it can meet
    if two_code == 1:  # it came second: 3.0.0 had raised the floor
        assert re.fullmatch(r"acxfs: error: rollback refused: .* 2\.0\.0 is older than "
                            r"3\.0\.0, .*\n", two_err), two_err
    assert_linked_to(served_at("3.0.0", third), {"race-skill", "race-three"},
                     absent={"race-old", "race-two"})
    doc = bundle()
    assert doc["version"] == "3.0.0"
    assert doc["previous"]["version"] == ("2.0.0" if two_code == 0 else "1.0.0")
    assert all(link["state"] == "ok" for link in doc["links"])
    assert agent_links() == {link["path"]: link["target"] for link in doc["links"]}
    stored = {p.name for p in (data_dir() / "store").iterdir()}
    assert stored == {f"{doc['digest']}.acx", f"{doc['previous']['digest']}.acx"}
    assert not library_paths().intent.exists()


# --- trust changes and links changed by hand ------------------------------------------------


@pytest.mark.parametrize("how", ["trust remove", "pin file deleted"])
def test_revoked_key_then_up_reload_stops_serving_and_unlinks(tmp_path: Path, how: str) -> None:
    signing = tmp_path / "publisher.pem"
    made = acxfs("keygen", signing)
    assert made.returncode == 0, made.stderr
    (keyid,) = [x.removeprefix("keyid: ") for x in made.stdout.splitlines()
                if x.startswith("keyid: ")]
    pub = tmp_path / "publisher.pub.pem"
    pinned = acxfs("trust", "add", pub, "--publisher", PUBLISHER)
    assert pinned.returncode == 0, pinned.stderr
    (pin_file,) = [Path(x.removeprefix("stored in ")) for x in pinned.stdout.splitlines()
                   if x.startswith("stored in ")]
    cart = pack(tmp_path, "1.0.0", "trust-skill", "unread-skill", key=signing)
    assert acxfs("add", cart).returncode == 0
    root = served_at("1.0.0", cart)
    assert_linked_to(root, {"trust-skill"})
    note = "acxfs: note: not serving io.github.tester/tool: "
    if how == "trust remove":  # with the daemon running, it reloads by itself
        removed = acxfs("trust", "remove", keyid)
        assert removed.returncode == 0, removed.stderr
        assert note in removed.stderr and "links removed" in removed.stderr
    else:  # changed behind acxfs's back: served as checked until told to re-check
        pin_file.unlink()
        assert_linked_to(root, {"trust-skill"})
    result = acxfs("up", "--reload")
    assert result.returncode == 0, result.stderr
    assert "Traceback" not in result.stderr
    if how != "trust remove":
        assert note in result.stderr and "links removed" in result.stderr
    assert_linked_to(root, set(), absent={"trust-skill", "unread-skill"})
    assert not root.exists()  # the daemon serves nothing of the identity any more
    with pytest.raises(FileNotFoundError):  # nothing the kernel cached before stays
        (root / "trust-skill" / "SKILL.md").read_bytes()
    with pytest.raises(FileNotFoundError):
        (root / "unread-skill" / "SKILL.md").read_bytes()
    doc = bundle()
    assert doc["served"] is False and "portable" in doc["why"]
    assert doc["links"] == []
    listed = acxfs("list")
    assert "NOT served" in listed.stdout and "portable" in listed.stdout
    again = acxfs("trust", "add", pub, "--publisher", PUBLISHER)  # trusted again: served again
    assert again.returncode == 0, again.stderr
    assert acxfs("up", "--reload").returncode == 0
    assert_linked_to(root, {"trust-skill", "unread-skill"})
    assert bundle()["served"] is True


def test_link_deleted_by_hand_is_reported_by_up_and_not_recreated(tmp_path: Path,
                                                                  local_key: None) -> None:
    cart = pack(tmp_path, "1.0.0", "hand-skill", "hand-other")
    assert acxfs("add", cart).returncode == 0
    deleted = link_path(".claude", "hand-skill")
    os.unlink(deleted)
    for restart in (False, True):
        if restart:
            assert acxfs("down").returncode == 0
        result = acxfs("up")
        assert result.returncode == 0, result.stderr
        assert str(deleted) in result.stderr and "missing" in result.stderr
        assert "Traceback" not in result.stderr
        assert not deleted.exists() and not deleted.is_symlink()
        assert (link_path(".agents", "hand-skill") / "SKILL.md").is_file()
        assert (link_path(".claude", "hand-other") / "SKILL.md").is_file()
    states = {link["path"]: link["state"] for link in bundle()["links"]}
    assert states[str(deleted)] == "missing"
    assert {s for p, s in states.items() if p != str(deleted)} == {"ok"}


# --- pack --version -------------------------------------------------------------------------


@pytest.mark.parametrize("version", ["1.0", "v1.0.0", "01.0.0", "1.0.0-", "1.0.0-01", "1.0.0 "])
def test_pack_refuses_a_version_that_is_not_semver(tmp_path: Path, local_key: None,
                                                   version: str) -> None:
    src = tmp_path / "ver-skill"
    src.mkdir()
    (src / "SKILL.md").write_text(skill_text("ver-skill", "x"))
    out = tmp_path / "ver.acx"
    result = acxfs("pack", src, "-o", out, "--publisher", PUBLISHER, "--version", version)
    assert result.returncode == 1
    assert result.stderr.splitlines() == [
        f"acxfs: error: --version {version!r} is not a SemVer 2.0.0 version (MAJOR.MINOR.PATCH, "
        "e.g. 1.2.0 or 2.0.0-rc.1)"]
    assert not out.exists() and result.stdout == ""
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(".acxfs-")) == []


def test_pack_accepts_a_prerelease_version(tmp_path: Path, local_key: None) -> None:
    src = tmp_path / "pre-ver-skill"
    src.mkdir()
    (src / "SKILL.md").write_text(skill_text("pre-ver-skill", "x"))
    out = tmp_path / "pre.acx"
    result = acxfs("pack", src, "-o", out, "--publisher", PUBLISHER, "--version", "2.0.0-rc.1")
    assert result.returncode == 0, result.stderr
    assert out.is_file()
