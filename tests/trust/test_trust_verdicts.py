"""The trust taxonomy through the ``acxfs verify`` CLI contract: pins, trust registries and a
trust store someone else could change.

Cartridges are made by the independent writer (``cartwriter``) and signed by ``signer``; each
test changes only what vouches for that signer (a pin, a registry entry, the store's modes or
owner), so the verdict moves on trust alone. (The verdicts of the cartridge itself, its
structure, signature and content, are ``tests/formats/acx/test_cartridge_verdicts.py``'s.)
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any

import pytest

from scripts import cartwriter as cw
from tests.support.demo import PUBLISHER

TRUSTED = f"verified / trusted - Signed by trusted publisher {PUBLISHER}."
LATER_REVOKED = (
    "warning / portable - Signer key later revoked (non-compromise); signed before revocation."
)
REVOKED = "warning / portable - Signer key revoked."
PORTABLE = "warning / portable - Signature valid but signer not in trust registry."
NOT_ELIGIBLE = "warning / portable - Signer registry entry is not eligible for trusted status."
COMPROMISED = "invalid / tampered - Signer key is compromised (revoked)."


def assert_usage_error(result) -> None:
    assert result.code == 2
    assert result.err.startswith("acxfs: error: ")
    assert result.err.count("\n") <= 1
    assert "Traceback" not in result.err


# --------------------------------------------------------------------------- pins


def _pin(run_cli, signer, tmp_path: Path, publisher: str) -> Path:
    """Pin `signer`'s public key file for `publisher`; the key file."""
    pem = tmp_path / "publisher.pub.pem"
    pem.write_text(signer.public_pem)
    assert run_cli("trust", "add", pem, "--publisher", publisher).code == 0
    return pem


def test_key_pinned_from_pem_with_publisher_is_trusted(
    run_cli, make_cartridge, signer, tmp_path
) -> None:
    _pin(run_cli, signer, tmp_path, PUBLISHER)
    result = run_cli("verify", make_cartridge())
    assert (result.code, result.verdict) == (0, TRUSTED)


def test_trust_key_option_trusts_for_one_command(run_cli, make_cartridge, signer, tmp_path) -> None:
    # A key given without a publisher is trusted for whatever publisher it signed for.
    pem = tmp_path / "publisher.pub.pem"
    pem.write_text(signer.public_pem)
    cart = make_cartridge()
    result = run_cli("verify", cart, "--trust-key", pem)
    assert (result.code, result.verdict) == (0, TRUSTED)
    assert run_cli("verify", cart).verdict == PORTABLE  # nothing was stored


def test_pinned_key_for_another_publisher_is_not_trusted(
    run_cli, make_cartridge, signer, tmp_path
) -> None:
    _pin(run_cli, signer, tmp_path, "io.github.someone-else")
    result = run_cli("verify", make_cartridge())
    assert result.code == 4
    assert result.verdict.startswith("warning / portable - ")


def test_pinning_a_key_again_never_widens_it_to_any_publisher_quietly(
    run_cli, make_cartridge, signer, tmp_path
) -> None:
    pem = _pin(run_cli, signer, tmp_path, "io.github.someone-else")
    again = run_cli("trust", "add", pem)
    assert again.code == 2 and "io.github.someone-else" in again.err
    assert again.err.count("\n") == 1
    assert run_cli("verify", make_cartridge()).code == 4  # still only someone-else's key
    assert run_cli("trust", "add", pem, "--publisher", PUBLISHER).code == 0  # said explicitly
    assert run_cli("verify", make_cartridge()).code == 0


def _pin_files() -> list[Path]:
    return sorted((Path(os.environ["ACXFS_TRUST_DIR"]) / "pins").glob("*.json"))


def test_a_pin_that_lost_its_publisher_is_unusable_not_trusted_for_all(
    run_cli, make_cartridge, signer, tmp_path
) -> None:
    _pin(run_cli, signer, tmp_path, "io.github.someone-else")
    (pin,) = _pin_files()
    doc = json.loads(pin.read_text())
    for text in (json.dumps({k: v for k, v in doc.items() if k != "publisherId"}),
                 json.dumps(doc)[:-1] + ', "publisherId": null}'):  # a second, later key
        pin.write_text(text)
        result = run_cli("verify", make_cartridge())
        assert result.code == 2 and "is unusable" in result.err, result.err
    for text in ('{"keyid": "x", "publicKeyPem": 5, "publisherId": null}', '{"keyid": "x"}'):
        pin.write_text(text)  # a key that is not a string, or none: one line, no traceback
        result = run_cli("trust", "list")
        assert result.code == 2 and "publicKeyPem is missing or not a string" in result.err


def test_trust_remove_removes_every_copy_of_the_pin(
    run_cli, make_cartridge, signer, tmp_path
) -> None:
    _pin(run_cli, signer, tmp_path, PUBLISHER)
    (pin,) = _pin_files()
    shutil.copy(pin, pin.parent / "backup.json")
    assert run_cli("trust", "remove", signer.keyid).code == 0
    assert _pin_files() == []
    assert run_cli("verify", make_cartridge()).code == 4


def test_trust_add_says_when_it_replaces_a_pin_for_another_publisher(
    run_cli, signer, tmp_path
) -> None:
    pem = _pin(run_cli, signer, tmp_path, "io.github.first")
    again = run_cli("trust", "add", pem, "--publisher", PUBLISHER)
    assert again.code == 0 and "replaces its pin for publisher io.github.first" in again.out


def test_a_fifo_in_the_pins_directory_is_refused_without_hanging(
    run_cli, make_cartridge, signer, tmp_path
) -> None:
    _pin(run_cli, signer, tmp_path, PUBLISHER)
    os.mkfifo(_pin_files()[0].parent / "planted.json")
    result = run_cli("verify", make_cartridge())  # in-process: a blocking open hangs the test
    assert result.code == 2 and "not a regular file" in result.err


def test_revocation_in_a_registry_overrides_a_pin(
    run_cli, make_cartridge, make_registry, signer
) -> None:
    cart = make_cartridge()
    assert run_cli("trust", "add", cart, "--publisher", PUBLISHER).code == 0
    revoked = make_registry(
        [
            cw.registry_entry(
                signer,
                PUBLISHER,
                status="revoked",
                revocation_reason="key-compromise",
                revoked_at="2026-06-01T00:00:00Z",
            )
        ]
    )
    result = run_cli("verify", cart, "--registry", revoked)
    assert (result.code, result.verdict) == (5, COMPROMISED)


# --------------------------------------------------------------------------- trust registry


def test_registry_key_revoked_for_compromise_is_tampered(
    run_cli, make_cartridge, make_registry, signer
) -> None:
    registry = make_registry(
        [
            cw.registry_entry(
                signer,
                PUBLISHER,
                status="revoked",
                revocation_reason="key-compromise",
                revoked_at="2026-06-01T00:00:00Z",
            )
        ]
    )
    result = run_cli("verify", make_cartridge(), "--registry", registry)
    assert (result.code, result.verdict) == (5, COMPROMISED)


@pytest.mark.parametrize(
    ("revoked_at", "expected"),
    [
        ("2026-06-01T00:00:00Z", LATER_REVOKED),  # signedAt 2026-01-02 < revokedAt
        ("2026-01-01T12:00:00Z", REVOKED),  # revoked before it signed
    ],
    ids=["signed-before-revocation", "signed-after-revocation"],
)
def test_registry_key_revoked_as_superseded_is_portable(
    run_cli, make_cartridge, make_registry, signer, revoked_at: str, expected: str
) -> None:
    registry = make_registry(
        [
            cw.registry_entry(
                signer,
                PUBLISHER,
                status="revoked",
                revocation_reason="superseded",
                revoked_at=revoked_at,
            )
        ]
    )
    result = run_cli("verify", make_cartridge(), "--registry", registry)
    assert (result.code, result.verdict) == (4, expected)


def test_revocation_in_any_registry_wins(
    run_cli, make_cartridge, make_registry, trusted_registry, signer
) -> None:
    revoked = make_registry(
        [
            cw.registry_entry(
                signer,
                PUBLISHER,
                status="revoked",
                revocation_reason="key-compromise",
                revoked_at="2026-06-01T00:00:00Z",
            )
        ],
        "revoked.json",
    )
    cart = make_cartridge()
    result = run_cli("verify", cart, "--registry", trusted_registry, "--registry", revoked)
    assert (result.code, result.verdict) == (5, COMPROMISED)


INELIGIBLE_ENTRIES: dict[str, dict[str, Any]] = {
    "status-expired": {"status": "expired"},
    "not-after-passed": {"not_after": "2026-06-01T00:00:00Z"},
    "signed-before-not-before": {"not_before": "2026-02-01T00:00:00Z"},
    "wrong-publisher": {"publisher": "io.github.someone-else"},
    "proof-for-another-owner": {"proof": cw.namespace_proof("io.github.someone-else")},
    "dns-proof-for-github-publisher": {"proof": cw.namespace_proof("com.example")},
}


@pytest.mark.parametrize("case", sorted(INELIGIBLE_ENTRIES))
def test_ineligible_registry_entry_is_portable(
    run_cli, make_cartridge, make_registry, signer, case: str
) -> None:
    kw = {"publisher": PUBLISHER, **INELIGIBLE_ENTRIES[case]}
    registry = make_registry([cw.registry_entry(signer, **kw)])
    result = run_cli("verify", make_cartridge(), "--registry", registry)
    assert (result.code, result.verdict) == (4, NOT_ELIGIBLE)


def test_dns_txt_publisher_with_matching_proof_is_trusted(
    run_cli, make_cartridge, make_registry, signer
) -> None:
    registry = make_registry([cw.registry_entry(signer, "com.example.tools")])
    cart = make_cartridge(publisher="com.example.tools")
    result = run_cli("verify", cart, "--registry", registry)
    assert (result.code, result.verdict) == (
        0,
        "verified / trusted - Signed by trusted publisher com.example.tools.",
    )


def _private_key_in_registry(signer: cw.Signer, other: cw.Signer) -> str:
    return cw.registry_json([cw.registry_entry(signer, PUBLISHER)], registry_id=signer.private_pem)


def _unknown_field(signer: cw.Signer, other: cw.Signer) -> str:
    return cw.registry_json([{**cw.registry_entry(signer, PUBLISHER), "comment": "hi"}])


def _duplicate_keyid(signer: cw.Signer, other: cw.Signer) -> str:
    entry = cw.registry_entry(signer, PUBLISHER)
    return cw.registry_json([entry, {**entry, "status": "expired"}])


def _pem_not_matching_keyid(signer: cw.Signer, other: cw.Signer) -> str:
    return cw.registry_json([cw.registry_entry(other, PUBLISHER, keyid=signer.keyid)])


def _not_json(signer: cw.Signer, other: cw.Signer) -> str:
    return "{not json"


@pytest.mark.parametrize(
    "registry_text",
    [
        _private_key_in_registry,
        _unknown_field,
        _duplicate_keyid,
        _pem_not_matching_keyid,
        _not_json,
    ],
    ids=lambda f: f.__name__.strip("_").replace("_", "-"),
)
def test_unusable_registry_is_a_usage_error(
    run_cli, make_cartridge, tmp_path, signer, other_signer, registry_text
) -> None:
    registry = tmp_path / "bad.registry.json"
    registry.write_text(registry_text(signer, other_signer))
    assert_usage_error(run_cli("verify", make_cartridge(), "--registry", registry))


def test_missing_registry_file_is_a_usage_error(run_cli, make_cartridge, tmp_path) -> None:
    assert_usage_error(run_cli("verify", make_cartridge(), "--registry", tmp_path / "nope.json"))


# --- a trust store someone else can change is not used ---------------------------------------


@pytest.mark.parametrize("part", ["store", "pins", "pin file", "keys", "local key"])
def test_a_trust_store_anyone_can_write_is_refused(
    run_cli, make_cartridge, signer, tmp_path, part: str
) -> None:
    _pin(run_cli, signer, tmp_path, PUBLISHER)
    assert run_cli("keygen").code == 0
    store = tmp_path / "trust"
    target = {"store": store, "pins": store / "pins", "pin file": next((store / "pins").iterdir()),
              "keys": store / "keys", "local key": store / "keys" / "local.pub.pem"}[part]
    cart = make_cartridge()
    assert run_cli("verify", cart).verdict == TRUSTED
    target.chmod(target.stat().st_mode | 0o002)
    result = run_cli("verify", cart)
    assert result.code == 2 and result.out == ""
    assert result.err == (f"acxfs: error: trust store {target} is writable by anyone (mode "
                          f"{target.stat().st_mode & 0o7777:o}): anyone could choose which keys "
                          f"you trust; run: chmod o-w {target}\n")
    target.chmod(target.stat().st_mode & ~0o002 | 0o020)  # group-writable: the user's choice
    assert run_cli("verify", cart).verdict == TRUSTED


def test_a_trust_store_owned_by_another_user_is_refused(
    run_cli, make_cartridge, signer, tmp_path
) -> None:
    _pin(run_cli, signer, tmp_path, PUBLISHER)
    pins = tmp_path / "trust" / "pins"
    os.chown(pins, 12345, 12345)
    result = run_cli("trust", "list")
    assert result.code == 2 and result.err == (
        f"acxfs: error: trust store {pins} belongs to uid 12345, not to you or root: whoever "
        "owns it chooses which keys you trust\n")
    os.chown(pins, 0, 0)
    assert run_cli("verify", make_cartridge()).verdict == TRUSTED


def test_a_trust_store_in_a_directory_anyone_can_write_is_refused(
    run_cli, make_cartridge, signer, tmp_path, monkeypatch
) -> None:
    shared = tmp_path / "shared"
    shared.mkdir()
    monkeypatch.setenv("ACXFS_TRUST_DIR", str(shared / "trust"))
    pem = tmp_path / "publisher.pub.pem"
    pem.write_text(signer.public_pem)
    assert run_cli("trust", "add", pem, "--publisher", PUBLISHER).code == 0
    cart = make_cartridge()
    assert run_cli("verify", cart).verdict == TRUSTED
    shared.chmod(0o777)  # anyone could rename trust/ away and put their own in its place
    result = run_cli("verify", cart)
    assert result.code == 2 and result.err == (
        f"acxfs: error: trust store {shared / 'trust'} lies in {shared}, which anyone can "
        f"write (mode 777, no sticky bit): anyone could put another store in its place; run: "
        f"chmod o-w {shared}\n")
    shared.chmod(0o1777)  # sticky, like /tmp: others cannot rename what is not theirs
    assert run_cli("verify", cart).verdict == TRUSTED
