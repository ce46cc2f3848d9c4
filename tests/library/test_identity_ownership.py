"""Who owns an identity, a skill name and a served path in the library, through the real
`acxfs` command, with two publishers both trusted in the real trust store.

- publisher continuity: an identity stays with the publisher (and key) that installed it;
- no identity may be served inside another's path (the daemon also refuses, and answers);
- `revert` cannot bring back a skill name another bundle took since;
- `remove NAME` refuses a NAME that is an identity and another bundle's skill, and a skill
  of a bundle that has others;
- a store file whose bytes or signed release are not the ones installed is not served.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from pathlib import Path
from typing import Any

import nacl.signing
import pytest

from acxfs.paths import library_paths
from scripts.mounting import acxfs
from tests.support.bundles import (
    agent_entries,
    assert_one_line_error,
    azp,
    claude_dir,
    link_of,
    pack,
    trust_key,
)
from tests.support.library import data_dir, home, listing, ok

pytestmark = [pytest.mark.fuse, pytest.mark.slow, pytest.mark.usefixtures("library_stops")]

ALICE, BOB, TESTER = "io.github.alice", "io.github.bob", "io.github.tester"
ALICE_KEY = nacl.signing.SigningKey(bytes(range(1, 33)))
ALICE_NEW_KEY = nacl.signing.SigningKey(bytes(range(2, 34)))
BOB_KEY = nacl.signing.SigningKey(bytes(range(40, 72)))
TESTER_KEY = nacl.signing.SigningKey(bytes(range(80, 112)))
PACKAGE = "io.github.alice.tool"


def unchanged_library() -> tuple[bytes, dict[str, str], list[str]]:
    """The state's bytes, the agent directories and the store: what a refusal must keep."""
    return (library_paths().state.read_bytes(), agent_entries(),
            sorted(os.listdir(data_dir() / "store")))


def bundle(identity: str) -> dict[str, Any]:
    (found,) = [b for b in listing()["bundles"] if b["identity"] == identity]
    assert isinstance(found, dict)
    return found


# --- publisher continuity -------------------------------------------------------------------


def test_a_package_signed_for_another_trusted_publisher_cannot_take_over_an_identity(
        tmp_path: Path) -> None:
    trust_key(tmp_path, ALICE_KEY, ALICE)
    trust_key(tmp_path, BOB_KEY, BOB)
    alices = azp(tmp_path, PACKAGE, "1.0.0", "alice-skill", publisher=ALICE, key=ALICE_KEY)
    bobs = azp(tmp_path, PACKAGE, "9.0.0", "alice-skill", publisher=BOB, key=BOB_KEY)
    ok(acxfs("add", alices))
    before = unchanged_library()
    for command in ("update", "add"):
        refused = acxfs(command, bobs)
        assert_one_line_error(refused, rf"acxfs: error: {re.escape(PACKAGE)} is installed from "
                                       rf"publisher {ALICE}; this file is signed for {BOB}")
        assert unchanged_library() == before
    doc = listing()
    assert doc["floors"][PACKAGE]["version"] == "1.0.0"  # never raised by the refused one
    assert doc["publishers"][PACKAGE]["publisher"] == ALICE
    assert "alice-skill" in (claude_dir() / "alice-skill" / "SKILL.md").read_text()
    ok(acxfs("remove", PACKAGE))  # the binding stays, like the floor
    refused = acxfs("add", bobs)
    assert_one_line_error(refused, rf"acxfs: error: {re.escape(PACKAGE)} was installed from "
                                   rf"publisher {ALICE}; this file is signed for {BOB} \(acxfs "
                                   rf"remove --forget {re.escape(PACKAGE)} forgets the first\)")
    assert listing()["floors"][PACKAGE]["version"] == "1.0.0"
    forgot = ok(acxfs("remove", "--forget", PACKAGE))
    assert f"forgot the floor and publisher of {PACKAGE}" in forgot
    ok(acxfs("add", bobs))  # the user chose to forget: now Bob's may be installed
    assert listing()["publishers"][PACKAGE]["publisher"] == BOB


def test_another_key_of_the_same_publisher_needs_allow_key_change(tmp_path: Path) -> None:
    old_key = trust_key(tmp_path, ALICE_KEY, ALICE)
    new_key = trust_key(tmp_path, ALICE_NEW_KEY, ALICE)
    first = azp(tmp_path, PACKAGE, "1.0.0", "alice-skill", publisher=ALICE, key=ALICE_KEY)
    second = azp(tmp_path, PACKAGE, "2.0.0", "alice-skill", publisher=ALICE, key=ALICE_NEW_KEY)
    third = azp(tmp_path, PACKAGE, "3.0.0", "alice-skill", publisher=ALICE, key=ALICE_KEY)
    ok(acxfs("add", first))
    before = unchanged_library()
    refused = acxfs("update", second)
    assert_one_line_error(refused, rf"acxfs: error: {re.escape(PACKAGE)} is installed from "
                                   rf"publisher {ALICE} with the key {old_key}; this file is "
                                   rf"signed by another key \({new_key}\); --allow-key-change "
                                   r"to accept the new key")
    assert unchanged_library() == before
    assert listing()["floors"][PACKAGE]["version"] == "1.0.0"
    ok(acxfs("update", second, "--allow-key-change"))
    doc = listing()
    assert doc["publishers"][PACKAGE]["keyid"] == new_key
    assert bundle(PACKAGE)["version"] == "2.0.0"
    refused = acxfs("update", third)  # the old key is the other key now
    assert_one_line_error(refused, rf"acxfs: error: .* with the key {new_key}; this file is "
                                   rf"signed by another key \({old_key}\); .*")


# --- served names ---------------------------------------------------------------------------


def test_identities_that_would_nest_as_paths_are_served_side_by_side(tmp_path: Path,
                                                                     local_key: None) -> None:
    """A package `io.github.tester` and a cartridge `io.github.tester/<the package's version
    and digest>`: as nested paths one would be served inside the other; each revision is one
    name right below the mountpoint, so both are served, each at its own name."""
    trust_key(tmp_path, TESTER_KEY, TESTER)
    package = azp(tmp_path, TESTER, "1.0.0", "outer-skill", publisher=TESTER, key=TESTER_KEY)
    digest = hashlib.sha256(package.read_bytes()).hexdigest()
    inner = f"1.0.0-{digest[:12]}"
    cart = pack(tmp_path, TESTER, inner, "1.0.0", "inner-skill")
    ok(acxfs("add", package))
    ok(acxfs("add", cart))
    mnt = data_dir() / "mnt"
    cart_digest = hashlib.sha256(cart.read_bytes()).hexdigest()
    assert sorted(os.listdir(mnt)) == sorted([f"{TESTER}@{inner}",
                                              f"{TESTER}+{inner}@1.0.0-{cart_digest[:12]}"])
    for identity, skill in ((TESTER, "outer-skill"), (f"{TESTER}/{inner}", "inner-skill")):
        assert bundle(identity)["served"] is True
        link = home() / ".claude" / "skills" / skill
        assert Path(os.readlink(link)).parent.parent == mnt
        assert f"name: {skill}" in (link / "SKILL.md").read_text()


# --- skill names ----------------------------------------------------------------------------


def test_revert_cannot_bring_back_a_skill_name_another_bundle_took(tmp_path: Path,
                                                                  local_key: None) -> None:
    first_v1 = pack(tmp_path, TESTER, "first", "1.0.0", "shared-skill", "first-skill")
    first_v2 = pack(tmp_path, TESTER, "first", "2.0.0", "first-skill")
    second = pack(tmp_path, TESTER, "second", "1.0.0", "shared-skill")
    ok(acxfs("add", first_v1, "--agent", "gemini"))
    ok(acxfs("update", first_v2))  # gives up shared-skill ...
    ok(acxfs("add", second))  # ... which the second bundle takes
    gemini = home() / ".gemini" / "skills"
    before = unchanged_library(), sorted(os.listdir(gemini))
    refused = acxfs("revert", f"{TESTER}/first")
    assert_one_line_error(refused, rf"acxfs: error: {TESTER}/first 1\.0\.0: skill "
                                   rf"'shared-skill' is offered by {TESTER}/second now; two "
                                   r"bundles cannot serve one skill name")
    assert (unchanged_library(), sorted(os.listdir(gemini))) == before
    assert bundle(f"{TESTER}/first")["version"] == "2.0.0"
    assert "second" in link_of(claude_dir(), "shared-skill")


def test_remove_of_a_name_that_is_an_identity_and_another_bundles_skill_is_ambiguous(
        tmp_path: Path, local_key: None) -> None:
    trust_key(tmp_path, TESTER_KEY, TESTER)
    package = azp(tmp_path, "dual-name", "1.0.0", "package-skill", publisher=TESTER,
                  key=TESTER_KEY)
    holder = pack(tmp_path, TESTER, "holder", "1.0.0", "dual-name")
    ok(acxfs("add", package))
    ok(acxfs("add", holder))
    before = unchanged_library()
    refused = acxfs("remove", "dual-name")
    assert_one_line_error(refused, rf"acxfs: error: 'dual-name' names both the bundle dual-name "
                                   rf"and a skill of {TESTER}/holder; name the bundle as "
                                   r"'dual-name/', or the skill's bundle by its identity")
    assert unchanged_library() == before
    ok(acxfs("remove", "dual-name/"))  # the identity, and only it
    assert [b["identity"] for b in listing()["bundles"]] == [f"{TESTER}/holder"]
    assert (claude_dir() / "dual-name" / "SKILL.md").is_file()


def test_remove_of_one_skill_of_a_bundle_with_others_removes_nothing_and_says_how(
        tmp_path: Path, local_key: None) -> None:
    ok(acxfs("add", pack(tmp_path, TESTER, "pair", "1.0.0", "pair-one", "pair-two")))
    before = unchanged_library()
    refused = acxfs("remove", "pair-one")
    assert_one_line_error(refused, rf"acxfs: error: 'pair-one' is one of the 2 skills of "
                                   rf"{TESTER}/pair \(pair-one, pair-two\); nothing was removed: "
                                   rf"acxfs removes whole bundles \(acxfs remove {TESTER}/pair "
                                   r"removes all of them\)")
    assert unchanged_library() == before
    ok(acxfs("remove", f"{TESTER}/pair"))
    assert agent_entries() == {}


# --- store files that are not what was installed ------------------------------------------


@pytest.mark.parametrize("how", ["store file replaced", "recorded release changed"])
def test_a_store_file_that_is_not_the_installed_release_is_not_served_after_a_restart(
        tmp_path: Path, local_key: None, how: str) -> None:
    installed = pack(tmp_path, TESTER, "swap", "1.0.0", "swap-skill")
    other = pack(tmp_path, TESTER, "swap", "1.0.0", "swap-skill", tag="-other")  # another uuid
    ok(acxfs("add", installed))
    digest = bundle(f"{TESTER}/swap")["digest"]
    ok(acxfs("down"))
    if how == "store file replaced":  # another signed release of the same identity, version
        store_file = data_dir() / "store" / f"{digest}.acx"
        store_file.chmod(0o600)
        store_file.write_bytes(other.read_bytes())
        store_file.chmod(0o400)
        why = "the store file's sha256 is [0-9a-f]{64}, not the digest it was installed with"
    else:
        state = json.loads(library_paths().state.read_text())
        state["installed"][f"{TESTER}/swap"]["current"]["manifest"] = "sha256:" + "0" * 64
        library_paths().state.write_text(json.dumps(state))
        why = "the store file is another signed release .* than the one installed"
    result = acxfs("up")
    assert result.returncode == 0 and "Traceback" not in result.stderr, result.stderr
    doc = bundle(f"{TESTER}/swap")
    assert doc["served"] is False and re.search(why, doc["why"]), doc["why"]
    assert doc["digest"] == digest
    assert not (claude_dir() / "swap-skill").is_symlink()  # its links were taken away
    assert not os.path.exists(doc["path"])
