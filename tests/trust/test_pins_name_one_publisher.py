"""Pins name one publisher, and the trust store is read from its own filesystem only.

A pin trusts a key for exactly one publisher: a container whose signed statement names none,
or a key file given without `--publisher`, is no pin, and a stored pin naming none is
ignored with a one-line warning naming it (otherwise the same key's next cartridge claiming
any publisher, `io.github.anthropics` say, would be "Signed by trusted publisher ...").  Any
part of the store (registries/, pins/, keys/ or a file in them) on another filesystem than
the store's directory, a mount inside it, is refused with one line.
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
import sqlite3
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from scripts import cartwriter as cw
from scripts.mounting import acxfs
from tests.support.demo import PUBLISHER

TRUSTED = f"verified / trusted - Signed by trusted publisher {PUBLISHER}."
PORTABLE = "warning / portable - Signature valid but signer not in trust registry."
CLAIMED = "io.github.anthropics"


def store() -> Path:
    return Path(os.environ["ACXFS_TRUST_DIR"])


def one_line(text: str) -> str:
    assert text.count("\n") == 1 and text.endswith("\n"), text
    assert "Traceback" not in text
    return text


def sign_statement_for(path: Path, signer: cw.Signer, publisher: str | None) -> None:
    """Re-sign the cartridge's statement with `predicate.publisherId` set (None: removed)."""
    conn = sqlite3.connect(path)
    try:
        (text,) = conn.execute("SELECT envelope FROM signatures").fetchone()
        statement = json.loads(base64.b64decode(json.loads(text)["payload"]))
        if publisher is None:
            del statement["predicate"]["publisherId"]
        else:
            statement["predicate"]["publisherId"] = publisher
        conn.execute("UPDATE signatures SET envelope = ?",
                     (cw.sign_envelope(cw.jcs(statement), signer),))
        conn.commit()
    finally:
        conn.close()


def key_pem(signer: cw.Signer, tmp_path: Path) -> Path:
    pem = tmp_path / "signer.pub.pem"
    pem.write_text(signer.public_pem)
    return pem


def null_pin(signer: cw.Signer) -> Path:
    """A pin file as an older acxfs wrote it for "any publisher" (`publisherId: null`)."""
    pins = store() / "pins"
    pins.mkdir(parents=True, exist_ok=True)
    path = pins / "any-publisher.json"
    path.write_text(json.dumps({"keyid": signer.keyid, "publicKeyPem": signer.public_pem,
                                "publisherId": None, "addedAt": "2024-01-01T00:00:00Z",
                                "note": "old"}))
    return path


# --------------------------------------------------------------------------- no publisher, no pin


def test_cartridge_signed_without_a_publisher_is_not_pinned(
    run_cli, make_cartridge, signer
) -> None:
    cart = make_cartridge("nopublisher.acx")
    sign_statement_for(cart, signer, None)
    assert run_cli("verify", "--quick", cart).verdict == PORTABLE  # intact, signed, no claim
    added = run_cli("trust", "add", cart)
    assert added.code == 2 and "pass --publisher" in one_line(added.err), added.err
    assert not (store() / "pins").exists() or list((store() / "pins").iterdir()) == []
    claiming = make_cartridge("claims.acx")
    sign_statement_for(claiming, signer, CLAIMED)  # the same key, speaking for someone else
    result = run_cli("verify", claiming)
    assert (result.code, result.verdict) == (4, PORTABLE)


def test_key_file_without_publisher_is_not_pinned(run_cli, make_cartridge, signer,
                                                  tmp_path: Path) -> None:
    added = run_cli("trust", "add", key_pem(signer, tmp_path))
    assert added.code == 2 and "pass --publisher" in one_line(added.err), added.err
    claiming = make_cartridge("claims.acx")
    sign_statement_for(claiming, signer, CLAIMED)
    assert run_cli("verify", claiming).code == 4
    assert run_cli("trust", "list").out.count("pinned") == 0


def test_key_file_pinned_for_a_publisher_trusts_only_that_publisher(
    run_cli, make_cartridge, signer, tmp_path: Path
) -> None:
    added = run_cli("trust", "add", key_pem(signer, tmp_path), "--publisher", PUBLISHER)
    assert added.code == 0 and f"publisher: {PUBLISHER}" in added.out
    assert run_cli("verify", make_cartridge()).verdict == TRUSTED
    claiming = make_cartridge("claims.acx")
    sign_statement_for(claiming, signer, CLAIMED)
    assert run_cli("verify", claiming).code == 4


def test_stored_pin_naming_no_publisher_is_ignored_with_a_warning(
    run_cli, make_cartridge, signer
) -> None:
    pin = null_pin(signer)
    claiming = make_cartridge("claims.acx")
    sign_statement_for(claiming, signer, CLAIMED)
    result = run_cli("verify", claiming)
    assert (result.code, result.verdict) == (4, PORTABLE)
    warning = one_line(result.err)
    assert warning.startswith("acxfs: warning: pinned key ") and str(pin) in warning
    assert "names no publisher and is ignored" in warning
    listed = acxfs("trust", "list")  # a process of its own: said once, though read twice
    assert listed.returncode == 0 and signer.keyid not in listed.stdout
    assert one_line(listed.stderr).count("names no publisher") == 1


def test_library_says_an_ignored_pin_in_one_line(make_cartridge, signer) -> None:
    # The library loads the trust store itself: its warning is one line on stderr too.
    null_pin(signer)
    result = acxfs("add", make_cartridge())
    assert result.returncode == 4, result.stderr
    lines = [line for line in result.stderr.splitlines() if "names no publisher" in line]
    assert len(lines) == 1 and lines[0].startswith("acxfs: warning: pinned key ")
    assert "Traceback" not in result.stderr


# --------------------------------------------------------------------------- a mount in the store


@contextlib.contextmanager
def _mounted(argv: list[str], target: Path) -> Iterator[None]:
    """`mount ARGV... TARGET` for the test's duration (lazily unmounted after). Only where the
    system refuses to mount does the test skip, and never under CI=true (root mounts there)."""
    done = subprocess.run(["mount", *argv, str(target)], capture_output=True, check=False)
    if done.returncode != 0:
        why = f"cannot mount here: {done.stderr.decode(errors='replace')}"
        if os.environ.get("CI") == "true":
            pytest.fail(why)
        pytest.skip(why)
    try:
        yield
    finally:
        subprocess.run(["umount", "-l", str(target)], check=False)


@contextlib.contextmanager
def tmpfs_on(directory: Path) -> Iterator[None]:
    directory.mkdir(parents=True, exist_ok=True)
    with _mounted(["-t", "tmpfs", "-o", "mode=0755", "tmpfs"], directory):
        yield


@contextlib.contextmanager
def bind_file(source: Path, target: Path) -> Iterator[None]:
    target.touch()
    with _mounted(["--bind", str(source)], target):
        yield


def _pinned(signer: cw.Signer, tmp_path: Path) -> Callable[[Path], None]:
    def write(pins: Path) -> None:
        (pins / "planted.json").write_text(json.dumps(
            {"keyid": signer.keyid, "publicKeyPem": signer.public_pem, "publisherId": PUBLISHER,
             "addedAt": "2024-01-01T00:00:00Z", "note": "planted"}))
    return write


@pytest.mark.parametrize("part", ["pins", "keys", "registries"])
def test_a_mount_inside_the_trust_store_is_refused(
    run_cli, make_cartridge, signer, make_registry, tmp_path: Path, part: str
) -> None:
    if os.geteuid() != 0:
        pytest.skip("mounting needs root")
    cart = make_cartridge()
    store().mkdir(mode=0o755)
    inside = store() / part
    with tmpfs_on(inside):
        if part == "pins":
            _pinned(signer, tmp_path)(inside)
        elif part == "keys":
            (inside / "local.pub.pem").write_text(signer.public_pem)
        else:
            registry = make_registry([cw.registry_entry(signer, PUBLISHER)])
            (inside / "planted.json").write_bytes(registry.read_bytes())
        for argv in (["verify", cart], ["trust", "list"]):
            result = run_cli(*argv)
            assert result.code == 2, (argv, result)
            assert "lies on another filesystem" in one_line(result.err)
            assert str(inside) in result.err
    assert run_cli("verify", cart).verdict == PORTABLE


def test_a_file_mounted_into_the_trust_store_is_refused(
    run_cli, make_cartridge, signer, tmp_path: Path
) -> None:
    if os.geteuid() != 0:
        pytest.skip("mounting needs root")
    cart = make_cartridge()
    (store() / "pins").mkdir(parents=True, mode=0o755)
    outside = tmp_path / "elsewhere"
    with tmpfs_on(outside):
        _pinned(signer, tmp_path)(outside)
        target = store() / "pins" / "planted.json"
        with bind_file(outside / "planted.json", target):
            result = run_cli("verify", cart)
            assert result.code == 2 and str(target) in one_line(result.err)
            assert "lies on another filesystem" in result.err
