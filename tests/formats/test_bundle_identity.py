"""A bundle's signed identity and its skills: from signed facts and the verified tree only."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from acxfs import formats
from acxfs.container import Identity
from acxfs.errors import IdentityError
from acxfs.formats.azp.check import AzpReport
from acxfs.trust.policy import TrustContext
from tests.support.azpwriter import demo_azp
from tests.support.demo import PUBLISHER

MakeCartridge = Callable[..., Path]


def test_a_signed_cartridge_is_named_by_its_signed_facts(make_cartridge: MakeCartridge) -> None:
    report = formats.check(str(make_cartridge()), TrustContext(), deep=True)
    identity = formats.identity(report)
    assert (identity.publisher, identity.artifact, identity.version) == (PUBLISHER, "demo",
                                                                         "1.0.0")
    assert identity.name == f"{PUBLISHER}/demo" and identity.release.startswith("sha256:")
    assert formats.skills(report) == {"demo-skill": "rom/skills/demo-skill"}


def test_an_unsigned_cartridge_has_no_identity(make_cartridge: MakeCartridge) -> None:
    report = formats.check(str(make_cartridge(signer=None)), TrustContext())
    assert report.verdict.trust == "legacy"
    with pytest.raises(IdentityError):
        formats.identity(report)


def test_a_signed_artifact_id_that_is_no_path_segment_is_refused(
    make_cartridge: MakeCartridge,
) -> None:
    cart = make_cartridge(extra_meta={"acx.artifact_id": "../escape"})
    report = formats.check(str(cart), TrustContext())
    assert not report.verdict.is_integrity_failure
    with pytest.raises(IdentityError, match=r"acx\.artifact_id"):
        formats.identity(report)


def test_a_tampered_cartridge_has_neither_identity_nor_skills(
    make_cartridge: MakeCartridge,
) -> None:
    import sqlite3

    cart = make_cartridge()
    with sqlite3.connect(cart) as conn:
        conn.execute("UPDATE cartridge SET value = 'io.github.mallory' "
                     "WHERE key = 'acx.publisher_id'")
    report = formats.check(str(cart), TrustContext())
    assert report.verdict.trust == "tampered"
    with pytest.raises(IdentityError):
        formats.identity(report)
    with pytest.raises(IdentityError):
        formats.skills(report)


def test_a_signed_package_is_named_by_its_manifest(tmp_path: Path) -> None:
    report = formats.check(str(demo_azp(tmp_path / "demo.azp")), TrustContext(), deep=True)
    assert isinstance(report, AzpReport) and report.manifest is not None
    manifest = report.manifest
    identity = formats.identity(report)
    assert identity == Identity(None, str(manifest["id"]), str(manifest["version"]),
                                identity.release)
    assert identity.name == manifest["id"] and identity.release.startswith("sha256:")
    skills = formats.skills(report)
    assert skills and all(path == f"skills/{name}" for name, path in skills.items())


def test_an_unsigned_package_has_no_identity(tmp_path: Path) -> None:
    from tests.support.azpwriter import DEMO_PAYLOAD, skill_manifest, write_azp

    pkg = write_azp(tmp_path / "unsigned.azp", DEMO_PAYLOAD, skill_manifest(DEMO_PAYLOAD),
                    key=None)
    report = formats.check(str(pkg), TrustContext())
    assert report.verdict.trust == "legacy"
    with pytest.raises(IdentityError):
        formats.identity(report)
