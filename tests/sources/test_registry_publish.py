"""`acxfs publish` and `acxfs withdraw` through the real command, on registry directories
made from scratch: the index the standard's builder writes for the real cartridges, byte
stability, the standard's schemas, and the attacks on the registry tree.

Every refusal must be one line, its exit code, and leave the registry exactly as it was.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import sqlite3
from pathlib import Path
from typing import Any

import jsonschema  # type: ignore[import-untyped]
import pytest

from scripts.mounting import acxfs
from tests.support import acx_registry as reg
from tests.support.library import ok

REAL = reg.FIXTURES / "real"
SCHEMAS = reg.SNAPSHOT / "schemas"
CARTS = {"rex-calder": "io.github.calder-sec", "ada-ridge": "io.github.ridgeworks"}


def tree(root: Path) -> dict[str, str]:
    """Every entry below `root`: a file's sha256, a link's target, a directory."""
    out = {}
    for path in sorted(root.rglob("*")) if root.exists() else []:
        rel = str(path.relative_to(root))
        if path.is_symlink():
            out[rel] = "-> " + os.readlink(path)
        elif path.is_dir():
            out[rel] = "dir"
        else:
            out[rel] = hashlib.sha256(path.read_bytes()).hexdigest()
    return out


def refused(root: Path, *args: object, code: int = 1) -> str:
    """Run a command that must be refused in one line, changing nothing below `root`."""
    before = tree(root)
    result = acxfs(*args)
    assert result.returncode == code, (result.args, result.returncode, result.stdout,
                                       result.stderr)
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert "Traceback" not in result.stderr
    assert tree(root) == before
    return lines[0]


@pytest.fixture
def trusted() -> None:
    for name in CARTS:
        ok(acxfs("trust", "add", REAL / f"{name}-1.0.0.acx"))


@pytest.fixture
def empty(tmp_path: Path) -> Path:
    """A new registry holding only the snapshot's (empty) ledger: the builder's input."""
    root = tmp_path / "reg"
    root.mkdir()
    shutil.copyfile(reg.SNAPSHOT / "registry" / "status.json", root / "status.json")
    return root


def publish_real(root: Path) -> None:
    for name in CARTS:
        ok(acxfs("publish", REAL / f"{name}-1.0.0.acx", "--registry", root))


def validate(root: Path) -> None:
    for doc, schema in (("index.json", "registry-index"), ("status.json", "registry-status")):
        if (root / doc).exists():
            jsonschema.validate(json.loads((root / doc).read_text()),
                                json.loads((SCHEMAS / f"{schema}.schema.json").read_text()))


@pytest.mark.usefixtures("trusted")
def test_real_cartridges_get_the_snapshots_entries_field_for_field(empty: Path) -> None:
    publish_real(empty)
    mine, theirs = reg.read_index(empty), reg.read_index(reg.SNAPSHOT / "registry")
    assert mine["generatedAt"] == theirs["generatedAt"]
    assert (mine["count"], mine["artifactCount"]) == (2, 2)
    assert [list(e) for e in mine["cartridges"]] == [list(e) for e in theirs["cartridges"]]
    assert mine["cartridges"] == theirs["cartridges"]  # the same order, the same values
    for name, publisher in CARTS.items():
        placed = empty / f"cartridges/{publisher}/{name}/1.0.0/cartridge.acx"
        assert placed.read_bytes() == (REAL / f"{name}-1.0.0.acx").read_bytes()
    validate(empty)


@pytest.mark.usefixtures("trusted")
def test_publishing_again_changes_no_byte(empty: Path) -> None:
    publish_real(empty)
    before = tree(empty)
    stamp = (empty / "index.json").stat().st_mtime_ns
    out = ok(acxfs("publish", REAL / "ada-ridge-1.0.0.acx", "--registry", empty))
    assert "is already published" in out
    assert tree(empty) == before
    assert (empty / "index.json").stat().st_mtime_ns == stamp  # not even rewritten


def test_an_empty_directory_becomes_a_registry_add_installs_from(
        tmp_path: Path, local_key: None) -> None:
    packed = reg.pack(tmp_path / "packed", "1.0.0")
    root = tmp_path / "new"  # missing: made
    result = acxfs("publish", packed.file, "--registry", root, "--json")
    assert result.returncode == 0, result.stderr
    doc = json.loads(result.stdout)
    assert (doc["name"], doc["version"], doc["written"]) == (packed.name, "1.0.0", True)
    assert doc["digest"] == packed.rom_hash()
    assert "the standard's builder would not list" in result.stderr  # no package spec
    index = reg.read_index(root)
    assert index["generatedAt"] != "1970-01-01T00:00:00.000Z"  # the release's signing time
    assert index["cartridges"][0]["path"] == packed.path
    assert index["cartridges"][0]["latest"] is True
    validate(root)


@pytest.mark.usefixtures("trusted")
def test_a_planted_link_at_the_target_is_refused(empty: Path, tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (empty / "cartridges" / "io.github.ridgeworks").mkdir(parents=True)
    (empty / "cartridges" / "io.github.ridgeworks" / "ada-ridge").symlink_to(outside)
    line = refused(empty, "publish", REAL / "ada-ridge-1.0.0.acx", "--registry", empty, code=2)
    assert line.startswith("acxfs: error: ") and "symbolic link" in line, line
    assert list(outside.iterdir()) == []


@pytest.mark.usefixtures("trusted")
def test_a_link_as_the_cartridge_file_or_the_index_is_refused(empty: Path,
                                                               tmp_path: Path) -> None:
    publish_real(empty)
    victim = tmp_path / "victim.json"
    victim.write_text("{}")
    (empty / "index.json").unlink()
    (empty / "index.json").symlink_to(victim)
    line = refused(empty, "publish", REAL / "ada-ridge-1.0.0.acx", "--registry", empty, code=2)
    assert "index.json: is a symbolic link" in line, line
    assert victim.read_text() == "{}"


@pytest.mark.usefixtures("trusted")
def test_republishing_a_version_with_other_bytes_is_refused_in_one_line(
        empty: Path, tmp_path: Path) -> None:
    publish_real(empty)
    held = empty / "cartridges/io.github.ridgeworks/ada-ridge/1.0.0/cartridge.acx"
    other = tmp_path / "ada-other.acx"
    shutil.copyfile(REAL / "ada-ridge-1.0.0.acx", other)
    with open(other, "ab") as f:  # trailing bytes SQLite never reads: verify still accepts it
        f.write(b"\0" * 4096)
    assert acxfs("verify", other).returncode == 0
    line = refused(empty, "publish", other, "--registry", empty)
    assert line == (f"acxfs: error: {held}: io.github.ridgeworks/ada-ridge 1.0.0 is published "
                    "already with other bytes (sha256:"
                    f"{hashlib.sha256(held.read_bytes()).hexdigest()}, not sha256:"
                    f"{hashlib.sha256(other.read_bytes()).hexdigest()}); a published version "
                    "is immutable: publish a new version"), line


@pytest.mark.usefixtures("trusted")
def test_a_tampered_bundle_is_refused_with_its_verdict(empty: Path, tmp_path: Path) -> None:
    bad = tmp_path / "tampered.acx"
    shutil.copyfile(REAL / "rex-calder-1.0.0.acx", bad)
    with sqlite3.connect(bad) as conn:
        conn.execute("UPDATE sqlar SET data = zeroblob(length(data)) "
                     "WHERE name = 'rom/knowledge/SKILLS.md'")
    conn.close()
    line = refused(empty, "publish", bad, "--registry", empty, code=5)
    assert "acxfs publishes only what verify accepts" in line, line


def test_an_untrusted_bundle_is_refused_exit_4(empty: Path) -> None:
    line = refused(empty, "publish", REAL / "ada-ridge-1.0.0.acx", "--registry", empty, code=4)
    assert line.startswith("acxfs: error: ") and "warning / portable" in line, line


@pytest.mark.usefixtures("trusted")
def test_a_malformed_index_refuses_the_registry(empty: Path) -> None:
    (empty / "index.json").write_text('{"schemaVersion": "acx.registry-index/1", '
                                      '"generatedAt": "yesterday", "cartridges": []}')
    line = refused(empty, "publish", REAL / "ada-ridge-1.0.0.acx", "--registry", empty)
    assert line == f"acxfs: error: {empty / 'index.json'}: generatedAt: not a date-time", line


def test_an_azphalt_package_is_refused(empty: Path) -> None:
    azp = reg.FIXTURES / "azp" / "signed-valid.azp"
    line = refused(empty, "publish", azp, "--registry", empty)
    assert "an ACX registry carries cartridges" in line, line


@pytest.mark.usefixtures("trusted")
def test_a_directory_that_is_no_registry_is_not_written(tmp_path: Path) -> None:
    home = tmp_path / "somewhere"
    home.mkdir()
    (home / "notes.txt").write_text("mine")
    line = refused(home, "publish", REAL / "ada-ridge-1.0.0.acx", "--registry", home, code=2)
    assert "not an ACX registry" in line, line


def withdraw(root: Path, coordinate: str, status: str, reason: str = "a reason long enough",
             *extra: object, epoch: int = 1_800_000_000) -> dict[str, Any]:
    env = {**os.environ, "SOURCE_DATE_EPOCH": str(epoch)}
    result = acxfs("withdraw", coordinate, "--registry", root, "--status", status,
                   "--reason", reason, "--json", *extra, env=env)
    assert result.returncode == 0, result.stderr
    doc = json.loads(result.stdout)
    assert isinstance(doc, dict)
    return doc


@pytest.mark.usefixtures("trusted")
def test_withdraw_writes_a_strictly_newer_ledger_and_keeps_every_entry(empty: Path) -> None:
    publish_real(empty)
    first = withdraw(empty, "io.github.ridgeworks/ada-ridge@1.0.0", "deprecated")
    ledger = json.loads((empty / "status.json").read_text())
    assert ledger["updatedAt"] == first["recordedAt"] == "2027-01-15T08:00:00.000Z"
    # The same second again: still strictly later than the ledger it replaces.
    second = withdraw(empty, "io.github.calder-sec/rex-calder@1.0.0", "revoked")
    assert (second["status"], second["asked"]) == ("withdrawn", "revoked")
    assert second["recordedAt"] == "2027-01-15T08:00:00.001Z"
    ledger = json.loads((empty / "status.json").read_text())
    assert [e["artifact"]["id"] for e in ledger["entries"]] == ["ada-ridge", "rex-calder"]
    assert ledger["entries"][1]["reason"] == "revoked: a reason long enough"
    index = reg.read_index(empty)
    assert index["generatedAt"] == ledger["updatedAt"]
    status = {e["id"]: e["registryStatus"]["status"] for e in index["cartridges"]}
    assert status == {"ada-ridge": "deprecated", "rex-calder": "withdrawn"}
    validate(empty)
    before = tree(empty)
    again = withdraw(empty, "io.github.calder-sec/rex-calder@1.0.0", "revoked", epoch=1)
    assert again["changed"] is False and tree(empty) == before
    line = refused(empty, "withdraw", "io.github.calder-sec/rex-calder@1.0.0", "--registry",
                   empty, "--status", "deprecated", "--reason", "changed my mind now")
    assert "a ledger entry only escalates" in line, line


@pytest.mark.usefixtures("trusted")
def test_withdraw_names_only_published_releases(empty: Path) -> None:
    publish_real(empty)
    line = refused(empty, "withdraw", "io.github.ridgeworks/ada-ridge@2.0.0", "--registry",
                   empty, "--status", "superseded", "--successor", "1.0.0", "--reason",
                   "replaced by the rewrite")
    assert line == (f"acxfs: error: {empty} has no io.github.ridgeworks/ada-ridge 2.0.0 "
                    "(it has 1.0.0)"), line
