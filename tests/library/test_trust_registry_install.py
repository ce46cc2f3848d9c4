"""`acxfs trust add REGISTRY.json` installs an acx.trust-registry/1 file through the store's
writers (before, it answered `invalid PEM body`), `trust list` shows its keys and statuses,
`trust remove REGISTRY_ID` takes it away; the refusal of an untrusted bundle names the exact
command that would trust it.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from scripts import cartwriter as cw
from scripts.mounting import acxfs
from tests.sources.test_acx_registry_install import refused
from tests.support.demo import PUBLISHER
from tests.support.library import ok
from tests.support.servers import Reply, Scripted

pytestmark = [pytest.mark.fuse, pytest.mark.slow, pytest.mark.usefixtures("library_stops")]


def test_a_trust_registry_is_installed_listed_and_removed(
        make_cartridge: Callable[..., Path], trusted_registry: Path, signer: cw.Signer,
        isolated_user_state: Path) -> None:
    cart = make_cartridge()
    message = refused("add", cart, code=4)
    assert f"acxfs trust add {cart} --publisher {PUBLISHER} (pins ed25519:" in message, message
    out = ok(acxfs("trust", "add", trusted_registry))
    assert out.startswith("installed trust registry acxfs-tests (1 keys)"), out
    installed = isolated_user_state / "registries" / "acxfs-tests.json"
    assert installed.read_bytes() == trusted_registry.read_bytes()
    assert f"registry  publisher={PUBLISHER} status=active" in ok(acxfs("trust", "list"))
    ok(acxfs("add", cart))
    ok(acxfs("trust", "remove", "acxfs-tests"))
    assert not installed.exists()
    ok(acxfs("remove", "--forget", f"{PUBLISHER}/demo"))
    refused("add", cart, code=4)


def test_a_broken_registry_is_refused_as_the_loader_would(
        tmp_path: Path, isolated_user_state: Path) -> None:
    bad = tmp_path / "bad.registry.json"
    bad.write_text('{"schemaVersion": "acx.trust-registry/1", "registryId": "x", "keys": 3}')
    message = refused("trust", "add", bad, code=2)
    assert message == f"trust registry {bad} is unusable: keys is not a list"
    assert not (isolated_user_state / "registries").exists()


def test_a_trust_registry_is_fetched_with_from_url(
        trusted_registry: Path, isolated_user_state: Path) -> None:
    data = trusted_registry.read_bytes()
    with Scripted(lambda path: Reply(200, data) if path == "/trust.json" else None
                  ).running() as base:
        out = ok(acxfs("trust", "add", "--from", f"{base}trust.json"))
        assert out.startswith("installed trust registry acxfs-tests"), out
        message = refused("trust", "add", "--from", f"{base}missing.json", code=2)
    assert message == f"{base}missing.json: HTTP 404 Not Found"
    assert (isolated_user_state / "registries" / "acxfs-tests.json").read_bytes() == data
