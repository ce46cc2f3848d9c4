"""What acxfs remembers of a registry, and `update` by identity, through the real command:
a rollback of the index or ledger, a changed coordinate, a dropped withdrawal, a newer release,
a withdrawn installed one unlinked, another signing key.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from scripts.mounting import acxfs
from tests.sources.test_acx_registry_install import NAME, description, refused
from tests.support import acx_registry as reg
from tests.support.library import agent_dirs, data_dir, listing, ok

pytestmark = [pytest.mark.fuse, pytest.mark.slow, pytest.mark.usefixtures("library_stops")]

WHY = "leaks the user's API keys into the transcript"


@pytest.fixture
def releases(tmp_path: Path, local_key: None) -> dict[str, reg.Packed]:
    work = tmp_path / "packed"
    work.mkdir()
    return {v: reg.pack(work, v) for v in ("1.0.0", "1.1.0")}


def test_an_older_index_is_refused_as_a_rollback(
        tmp_path: Path, releases: dict[str, reg.Packed]) -> None:
    root = reg.build(tmp_path / "r", [releases["1.0.0"]], status=[])
    ok(acxfs("add", NAME, "--from", root))
    accepted = json.loads((data_dir() / "library.json").read_text())["sources"][str(root)]
    reg.write_index(root, [reg.entry(releases["1.0.0"]), reg.entry(releases["1.1.0"])],
                    generated="2026-10-01T00:00:00.000Z")
    message = refused("update", "--from", root)
    assert message == (f"{root}/index.json (generated 2026-10-01T00:00:00.000Z) is older than "
                       f"the one accepted on {accepted['generatedSeen'][:10]} "
                       "(2026-11-20T00:00:00.000Z): a rollback or a stale mirror; "
                       "--allow-stale accepts it")


def test_an_older_ledger_is_refused_and_allow_stale_accepts_it(
        tmp_path: Path, releases: dict[str, reg.Packed]) -> None:
    root = reg.build(tmp_path / "r", [releases["1.0.0"]], status=[])
    ok(acxfs("add", NAME, "--from", root))
    reg.write_status(root, [], updated="2026-01-01T00:00:00Z")
    message = refused("update", NAME)
    assert message.startswith(f"{root}/status.json (updated 2026-01-01T00:00:00Z) is older")
    out = ok(acxfs("update", NAME, "--allow-stale"))
    assert "up to date" in out


def test_a_changed_coordinate_digest_is_refused_without_override(
        tmp_path: Path, releases: dict[str, reg.Packed]) -> None:
    root = reg.build(tmp_path / "r", [releases["1.0.0"]], status=[])
    ok(acxfs("add", NAME, "--from", root))
    before = releases["1.0.0"].rom_hash()
    (tmp_path / "again").mkdir()
    again = reg.pack(tmp_path / "again", "1.0.0", text="A release that rewrites history.")
    reg.build(root, [again], status=[], generated="2026-11-21T00:00:00.000Z")
    message = refused("update", NAME)
    assert message == (f"{root} changed {NAME} 1.0.0 ({before}, now {again.rom_hash()}); "
                       "published coordinates are immutable")


def test_update_installs_the_newest_and_check_says_so_first(
        tmp_path: Path, releases: dict[str, reg.Packed]) -> None:
    root = reg.build(tmp_path / "r", [releases["1.0.0"]], status=[])
    ok(acxfs("add", NAME, "--from", root))
    assert ok(acxfs("update", "--check")).strip() == \
        "everything installed from a source is up to date"
    reg.build(root, list(releases.values()), status=[], generated="2026-11-21T00:00:00.000Z")
    state = (data_dir() / "library.json").read_bytes()
    check = acxfs("update", "--check")
    assert check.returncode == 1, check
    assert check.stdout.strip() == f"{NAME}: 1.0.0 -> 1.1.0 ({root})"
    assert (data_dir() / "library.json").read_bytes() == state
    ok(acxfs("update"))
    assert "release 1.1.0" in description()
    assert listing()["bundles"][0]["coordinate"] == releases["1.1.0"].path


def test_update_unlinks_a_withdrawn_revision_and_list_says_why(
        tmp_path: Path, releases: dict[str, reg.Packed]) -> None:
    root = reg.build(tmp_path / "r", [releases["1.0.0"]], status=[])
    ok(acxfs("add", NAME, "--from", root))
    reg.write_status(root, [reg.status_entry(releases["1.0.0"], "withdrawn", WHY,
                                             "2026-11-22T00:00:00Z")],
                     updated="2026-11-22T00:00:00.000Z")
    assert acxfs("update", "--check").returncode == 1
    assert (agent_dirs()[0] / "helper-skill").is_symlink()
    ok(acxfs("update"))
    assert not (agent_dirs()[0] / "helper-skill").exists()
    bundle = listing()["bundles"][0]
    assert not bundle["served"] and WHY in bundle["why"], bundle
    assert bundle["lifecycle"].startswith("withdrawn")
    ok(acxfs("up"))  # the daemon still serves it; up must not link it again
    assert not (agent_dirs()[0] / "helper-skill").exists()


def test_a_withdrawal_the_ledger_drops_stays_in_force(
        tmp_path: Path, releases: dict[str, reg.Packed]) -> None:
    root = reg.build(tmp_path / "r", list(releases.values()), status=[
        reg.status_entry(releases["1.1.0"], "withdrawn", WHY, "2026-11-02T10:00:00Z")])
    ok(acxfs("add", NAME, "--from", root))
    assert "release 1.0.0" in description()
    reg.write_status(root, [], updated="2026-11-25T00:00:00.000Z")
    message = refused("add", f"{NAME}@1.1.0", "--from", root)
    assert message.startswith(f"{NAME} 1.1.0 is withdrawn ({root}, 2026-11-02): {WHY}")
    assert "up to date" in ok(acxfs("update"))


def test_a_release_signed_by_another_key_needs_allow_key_change(
        tmp_path: Path, releases: dict[str, reg.Packed]) -> None:
    root = reg.build(tmp_path / "r", [releases["1.0.0"]], status=[])
    ok(acxfs("add", NAME, "--from", root))
    key = tmp_path / "other.pem"
    ok(acxfs("keygen", key))
    ok(acxfs("trust", "add", tmp_path / "other.pub.pem", "--publisher", reg.PUBLISHER))
    other = reg.pack(tmp_path, "1.1.0", key=key)
    reg.build(root, [releases["1.0.0"], other], status=[],
              generated="2026-11-21T00:00:00.000Z")
    message = refused("update")
    assert message.startswith(f"{NAME} is installed from publisher {reg.PUBLISHER} with "
                              "the key ed25519:")
    assert message.endswith("--allow-key-change to accept the new key")
    ok(acxfs("update", "--allow-key-change"))
    assert "release 1.1.0" in description()


@pytest.mark.parametrize(("change", "field", "problem"), [
    (lambda m: m["coordinates"].__setitem__(f"{NAME} 1.0.0", 5),
     f'coordinates["{NAME} 1.0.0"]', "not a string (a number)"),
    (lambda m: m.__setitem__("generatedAt", "yesterday"), "generatedAt",
     "not an RFC 3339 date-time"),
    (lambda m: m["pulled"].__setitem__(f"{NAME} 1.0.0", {"status": "gone", "date": None,
                                                         "reason": None, "successor": None}),
     f'pulled["{NAME} 1.0.0"].status', "not one of deprecated, superseded, withdrawn, yanked, "
     "revoked"),
])
def test_a_damaged_source_memory_is_refused_as_damaged_state(
        tmp_path: Path, releases: dict[str, reg.Packed], change: Any, field: str,
        problem: str) -> None:
    root = reg.build(tmp_path / "r", [releases["1.0.0"]], status=[])
    ok(acxfs("add", NAME, "--from", root))
    state = data_dir() / "library.json"
    doc = json.loads(state.read_text())
    change(doc["sources"][str(root)])
    state.write_text(json.dumps(doc))
    result = acxfs("list")
    assert result.returncode == 2, result
    head = f"acxfs: error: {state} is damaged: sources["  # the source, shortened to 60
    assert result.stderr.startswith(head), result.stderr
    assert f"].{field}: {problem}; see docs/library.md" in result.stderr, result.stderr
