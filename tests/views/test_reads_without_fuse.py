"""Reads without FUSE: cat, ls, extract and verify --deep serve only verified bytes."""

from __future__ import annotations

import hashlib
import os
import sqlite3
from pathlib import Path

import pytest

from acxfs.content.cache import VerifiedCache
from acxfs.formats import open_source
from acxfs.trust.store import load_trust
from scripts import cartwriter as cw
from tests.support import REAL
from tests.support.demo import DEMO_FILES

REAL_CASES = [
    ("rex-calder-1.0.0.acx", [], 4),
    ("ada-ridge-1.0.0.acx", [], 4),
    ("scenario-research-designer.acx",
     ["--registry", REAL / "scenario-research-designer.registry.json"], 0),
]
PORTABLE = "warning / portable - Signature valid but signer not in trust registry."
DIVERGES = "invalid / tampered - ROM content diverges from signed manifest (object hash mismatch)."
TARGET = "rom/skills/demo-skill/references/guide.md"


def _edit_stale(cart: Path, name: str = TARGET) -> None:
    """Replace one file's bytes (same size), leaving its signed oid stale."""
    conn = sqlite3.connect(cart)
    original = DEMO_FILES[name]
    edited = original.replace(b"read", b"READ")
    assert len(edited) == len(original) and edited != original
    conn.execute("UPDATE sqlar SET data=? WHERE name=?", (cw.compress(edited), name))
    conn.commit()
    conn.close()


@pytest.mark.parametrize(("name", "extra", "code"), REAL_CASES)
def test_deep_verify_agrees_with_shallow_on_real_cartridges(run_cli, name, extra, code) -> None:
    shallow = run_cli("verify", REAL / name, *extra)
    deep = run_cli("verify", REAL / name, "--deep", *extra)
    assert shallow.code == deep.code == code
    assert shallow.verdict == deep.verdict


@pytest.mark.parametrize(("name", "extra", "code"), REAL_CASES)
def test_every_real_rom_file_reads_as_its_signed_oid(name, extra, code) -> None:
    source, _ = open_source(str(REAL / name), load_trust(), VerifiedCache(), min_trust="portable")
    try:
        files = list(source.tree.files())
        assert len(files) in (8, 14)
        for entry in files:
            blob = source.blob(entry)
            data = blob.read(0, blob.size)
            assert len(data) == entry.size
            assert entry.digest is not None
            assert hashlib.sha256(data).digest() == entry.digest
    finally:
        source.close()


def test_cat_prints_verified_bytes(tmp_path, capfdbinary, make_cartridge, trusted_registry) -> None:
    from acxfs.cli import main

    cart = make_cartridge()
    code = main(["cat", str(cart), TARGET, "--registry", str(trusted_registry)])
    assert code == 0
    assert capfdbinary.readouterr().out == DEMO_FILES[TARGET]


def test_cat_of_a_portable_cartridge_needs_min_trust(run_cli) -> None:
    cart = REAL / "rex-calder-1.0.0.acx"
    refused = run_cli("cat", cart, "rom/knowledge/IDENTITY.md")
    assert refused.code == 4 and PORTABLE in refused.err and "acxfs trust add" in refused.err
    allowed = run_cli("cat", cart, "rom/knowledge/IDENTITY.md", "--min-trust", "portable")
    assert allowed.code == 0 and allowed.out


def test_stale_oid_passes_shallow_but_not_deep(run_cli, make_cartridge, trusted_registry) -> None:
    cart = make_cartridge()
    _edit_stale(cart)
    assert run_cli("verify", "--quick", cart, "--registry", trusted_registry).code == 0
    deep = run_cli("verify", cart, "--deep", "--registry", trusted_registry)
    assert (deep.code, deep.verdict) == (5, DIVERGES)
    assert TARGET in deep.out


def test_stale_oid_fails_that_file_only(run_cli, make_cartridge, trusted_registry) -> None:
    cart = make_cartridge()
    _edit_stale(cart)
    bad = run_cli("cat", cart, TARGET, "--registry", trusted_registry)
    assert bad.code == 5 and TARGET in bad.err and bad.out == ""
    for name, data in DEMO_FILES.items():
        if name != TARGET:
            good = run_cli("cat", cart, name, "--registry", trusted_registry)
            assert good.code == 0 and good.out == data.decode()


def test_extract_of_a_tampered_cartridge_leaves_nothing(run_cli, make_cartridge, trusted_registry,
                                                        tmp_path) -> None:
    cart = make_cartridge()
    _edit_stale(cart)
    dest = tmp_path / "out"
    result = run_cli("extract", cart, dest, "--registry", trusted_registry)
    assert result.code == 5 and TARGET in result.err
    assert not dest.exists()
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".out")] == []


def test_extract_writes_verified_files(run_cli, make_cartridge, trusted_registry, tmp_path) -> None:
    cart = make_cartridge()
    dest = tmp_path / "all"
    assert run_cli("extract", cart, dest, "--registry", trusted_registry).code == 0
    for name, data in DEMO_FILES.items():
        assert (dest / name).read_bytes() == data
    skill = tmp_path / "demo-skill"
    assert run_cli("extract", cart, skill, "--skill", "demo-skill",
                   "--registry", trusted_registry).code == 0
    assert (skill / "SKILL.md").read_bytes() == DEMO_FILES["rom/skills/demo-skill/SKILL.md"]
    assert not (skill / "rom").exists()


def test_extract_refuses_an_existing_destination(run_cli, make_cartridge, trusted_registry,
                                                 tmp_path) -> None:
    cart = make_cartridge()
    result = run_cli("extract", cart, tmp_path, "--registry", trusted_registry)
    assert result.code == 2 and "exists" in result.err


def test_extract_makes_a_tree_others_can_read(run_cli, make_cartridge, trusted_registry,
                                              tmp_path) -> None:
    notes = make_cartridge("notes.acx", files={**DEMO_FILES, "rom/skills/notes/a.md": b"a\n"})
    refused = run_cli("extract", notes, tmp_path / "n", "--skill", "notes",
                      "--registry", trusted_registry)  # no SKILL.md: not a skill, as for mount
    assert refused.code == 2 and "(skills: demo-skill)" in refused.err
    dest = tmp_path / "out"
    assert run_cli("extract", make_cartridge(), dest, "--registry", trusted_registry).code == 0
    modes = {p.stat().st_mode & 0o777 for p in [dest, *dest.rglob("*")] if p.is_dir()}
    assert modes == {0o755}  # the top directory too, not mkdtemp's 0700


def test_failed_extract_removes_the_parents_it_created(run_cli, make_cartridge,
                                                       trusted_registry, tmp_path) -> None:
    cart = make_cartridge()
    _edit_stale(cart)
    result = run_cli("extract", cart, tmp_path / "new" / "deeper" / "out",
                     "--registry", trusted_registry)
    assert result.code == 5 and TARGET in result.err
    assert not (tmp_path / "new").exists()


def test_ls_lists_without_reading_content(run_cli, make_cartridge, trusted_registry) -> None:
    cart = make_cartridge()
    conn = sqlite3.connect(cart)
    conn.execute("UPDATE sqlar SET data = zeroblob(length(data))")
    conn.commit()
    conn.close()
    result = run_cli("ls", cart, "rom/skills/demo-skill", "-l", "--registry", trusted_registry)
    assert result.code == 0
    assert "rom/skills/demo-skill/SKILL.md" in result.out and "-r--r--r--" in result.out


def test_extract_honours_the_umask(run_cli, make_cartridge, trusted_registry, tmp_path) -> None:
    import os

    cart = make_cartridge()
    dest = tmp_path / "private"
    old = os.umask(0o077)
    try:
        assert run_cli("extract", cart, dest, "--registry", trusted_registry).code == 0
    finally:
        os.umask(old)
    modes = {p.stat().st_mode & 0o777 for p in [dest, *dest.rglob("*")]}
    assert modes <= {0o700, 0o600} and 0o600 in modes and 0o700 in modes, modes


def test_a_finished_tree_never_replaces_a_directory_made_meanwhile(tmp_path) -> None:
    from acxfs.safe.dirs import rename_noreplace_at

    staging, dest = tmp_path / ".staging", tmp_path / "dest"
    (staging / "sub").mkdir(parents=True)
    dest.mkdir()  # made after the caller checked that dest did not exist
    dirfd = os.open(tmp_path, os.O_PATH | os.O_DIRECTORY)
    try:
        with pytest.raises(FileExistsError):
            rename_noreplace_at(dirfd, ".staging", dirfd, "dest")
        assert (staging / "sub").is_dir() and list(dest.iterdir()) == []
        dest.rmdir()
        rename_noreplace_at(dirfd, ".staging", dirfd, "dest")
    finally:
        os.close(dirfd)
    assert (dest / "sub").is_dir() and not staging.exists()


def test_extract_to_a_name_of_the_longest_length_works(run_cli, make_cartridge,
                                                       trusted_registry, tmp_path) -> None:
    dest = tmp_path / ("d" * 255)
    assert run_cli("extract", make_cartridge(), dest, "--registry", trusted_registry).code == 0
    assert (dest / "rom" / "knowledge" / "NOTES.md").is_file()


def test_a_source_keeps_the_tree_but_not_the_checked_rows(make_cartridge, trusted_registry) -> None:
    # A mount's daemon holds the source for its life: the check's rows (every sqlar and
    # objects row) would double its memory for nothing once the tree is built.
    import gc

    from acxfs.formats.acx.rows import CartridgeRows
    from acxfs.trust.store import load_trust

    trust = load_trust(registries=[str(trusted_registry)])
    source, report = open_source(str(make_cartridge()), trust, VerifiedCache())
    verified = report.verdict.status == "verified"
    del report  # the caller's to keep or drop; the source must not keep the rows alive
    gc.unfreeze()  # the check froze what it built: bring it back into view
    gc.collect()
    assert verified and source.tree.lookup("rom/knowledge/NOTES.md")
    assert not [o for o in gc.get_objects() if isinstance(o, CartridgeRows)]
    source.close()
