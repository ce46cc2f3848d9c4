"""`acxfs verify` checks every byte; `--quick` is the check a mount makes before serving.

As both standards' own `verify` do, plain `acxfs verify` inflates and hashes every file (and
re-derives the skill index); `--deep` stays a synonym of the default; `--quick` reads
structure, signature, manifest and trust only.  A cartridge whose file bytes were edited
behind a stale oid is therefore `0` with `--quick` and `5` with plain `verify`.  (The azphalt
conformance fixtures are checked with plain `verify` in test_azp_packages.py.)
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

from tests.support.demo import DEMO_FILES, PUBLISHER

NOTES = "rom/knowledge/NOTES.md"
TRUSTED = f"verified / trusted - Signed by trusted publisher {PUBLISHER}."
DIVERGES = "invalid / tampered - ROM content diverges from signed manifest (object hash mismatch)."


def edit_content(cart: Path) -> None:
    """NOTES.md's bytes changed, its signed oid left as it was."""
    data = DEMO_FILES[NOTES]
    conn = sqlite3.connect(cart)
    conn.execute("UPDATE sqlar SET data = ? WHERE name = ?",
                 (bytes([data[0] ^ 1]) + data[1:], NOTES))
    conn.commit()
    conn.close()


def test_plain_verify_hashes_every_file(run_cli, make_cartridge, trusted_registry) -> None:
    cart = make_cartridge()
    edit_content(cart)
    for flags in ([], ["--deep"]):
        result = run_cli("verify", *flags, cart, "--registry", trusted_registry)
        assert (result.code, result.verdict) == (5, DIVERGES), flags
    quick = run_cli("verify", "--quick", cart, "--registry", trusted_registry)
    assert (quick.code, quick.verdict) == (0, TRUSTED)


def test_verify_json_says_which_check_ran(run_cli, make_cartridge, trusted_registry) -> None:
    cart = make_cartridge()
    full = json.loads(run_cli("verify", "--json", cart, "--registry", trusted_registry).out)
    quick = json.loads(run_cli("verify", "--quick", "--json", cart,
                               "--registry", trusted_registry).out)
    assert (full["deep"], quick["deep"]) == (True, False)
    assert full["line"] == quick["line"] == TRUSTED


def test_verify_help_says_it_checks_every_byte(run_cli) -> None:
    helped = run_cli("verify", "--help")
    assert helped.code == 0
    text = " ".join(helped.out.split())
    assert "every byte of every file" in text
    assert "--quick" in text and "no file content" in text
    assert "synonym" in text


def test_a_long_deep_check_is_not_cut_short_by_the_statement_bound(
    run_cli, make_cartridge, trusted_registry, monkeypatch
) -> None:
    """The bound on a serving statement is SQLite's time per step: the deep check's one scan
    of the small rows pauses while each row is verified, and that time is not the scan's."""
    import time

    from acxfs.content.rule import verify_content as real
    from acxfs.formats.acx import connection, deep

    files = {**DEMO_FILES, **{f"rom/knowledge/n{i:04d}.md": b"note %d\n" % i for i in range(800)}}
    cart = make_cartridge(files=files)

    def slow(*args, **kwargs):  # a slow machine: each file takes a little while to verify
        time.sleep(0.002)
        return real(*args, **kwargs)

    monkeypatch.setattr(deep, "verify_content", slow)
    monkeypatch.setattr(connection, "STEP_SECONDS", 0.3)  # well under the whole scan
    result = run_cli("verify", cart, "--registry", trusted_registry)
    assert (result.code, result.verdict) == (0, TRUSTED), result.err


def test_the_deep_check_reads_the_file_the_shallow_check_read(
    run_cli, make_cartridge, trusted_registry, monkeypatch, tmp_path
) -> None:
    """A file renamed over the cartridge between its two checks is not the one hashed."""
    import os

    from acxfs.formats import acx
    from acxfs.formats.acx.deep import deep_check as real

    cart = make_cartridge()
    other = make_cartridge("other.acx")
    edit_content(other)

    def swap_first(*args, **kwargs):
        os.replace(other, cart)
        return real(*args, **kwargs)

    monkeypatch.setattr(acx, "deep_check", swap_first)
    result = run_cli("verify", cart, "--registry", trusted_registry)
    assert (result.code, result.verdict) == (0, TRUSTED), result.err
    monkeypatch.setattr(acx, "deep_check", real)
    swapped = run_cli("verify", cart, "--registry", trusted_registry)
    assert (swapped.code, swapped.verdict) == (5, DIVERGES)
