"""`acxfs update` of bundles installed from an OCI registry, through the real `acxfs push`,
`add`, `update` and the real distribution registry (plain HTTP on loopback): a version tag
follows the highest release tag above it (pre-releases not), `latest` follows what it names
now, a digest pin never moves, and `update --check` exits 1 exactly when `update` would change
something, changing nothing itself.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.oci_library import (
    OciMachine,
    holdings,
    manifest_doc,
    oci_machines,
    plant,
    push,
)
from tests.support.projects import PUBLISHER, pack, skill_text
from tests.support.registry import Registry, registry

pytestmark = [pytest.mark.fuse, pytest.mark.slow]

REPO = "acx/research"
NAME = f"{PUBLISHER}/research"


def release(machine: OciMachine, tmp_path: Path, reg: Registry, version: str,
            tag: str | None = None) -> str:
    """`version` packed and pushed (also as `tag`); its OCI manifest digest."""
    cart = pack(machine, tmp_path / f"packs-{version}", "research", version, "alpha")
    return push(machine, cart, reg.ref(REPO, tag=tag)).manifest


def current(machine: OciMachine) -> tuple[str, str, str]:
    """The installed (version, coordinate, reference) of NAME."""
    (bundle,) = machine.listing()["bundles"]
    return str(bundle["version"]), str(bundle["coordinate"]), str(bundle["reference"])


def served(machine: OciMachine) -> str:
    return (machine.home / ".claude" / "skills" / "alpha" / "SKILL.md").read_text()


def check(machine: OciMachine, code: int) -> str:
    """`update --check`, which must exit `code` and change nothing; its stdout."""
    before = holdings(machine)
    result = machine.acxfs("update", "--check")
    assert result.returncode == code, result
    assert holdings(machine) == before
    return result.stdout


def test_a_version_tag_updates_to_the_highest_release_tag_above(tmp_path: Path) -> None:
    with registry(tmp_path, tls=False) as reg, oci_machines(tmp_path, "one") as (one,):
        one.ok("keygen")
        release(one, tmp_path, reg, "1.1.0")
        one.ok("add", reg.ref(REPO, tag="1.1.0"))
        assert "up to date" in check(one, 0)
        for version in ("1.2.0", "1.10.0", "1.9.0", "2.0.0-rc.1"):
            release(one, tmp_path, reg, version)
        assert check(one, 1) == f"{NAME}: 1.1.0 -> 1.10.0 ({reg.ref(REPO)})\n"
        one.ok("update")
        version, coordinate, _ = current(one)
        assert (version, coordinate.split("@")[0]) == ("1.10.0", "1.10.0")
        assert served(one) == skill_text("alpha", "1.10.0")
        assert "up to date" in check(one, 0)
        assert "up to date" in one.ok("update")
        assert current(one)[0] == "1.10.0"


def test_latest_moved_updates_to_what_it_names_now(tmp_path: Path) -> None:
    with registry(tmp_path, tls=False) as reg, oci_machines(tmp_path, "one") as (one,):
        one.ok("keygen")
        release(one, tmp_path, reg, "1.0.0", tag="latest")
        one.ok("add", reg.ref(REPO, tag="latest"))
        assert "up to date" in check(one, 0)
        moved = release(one, tmp_path, reg, "1.1.0", tag="latest")
        assert check(one, 1) == f"{NAME}: 1.0.0 -> latest ({reg.ref(REPO)})\n"
        one.ok("update")
        assert current(one) == ("1.1.0", f"latest@{moved}",
                                f"{reg.ref(REPO, tag='latest')}@{moved}")
        assert served(one) == skill_text("alpha", "1.1.0")
        release(one, tmp_path, reg, "1.2.0")  # a newer version tag: latest has not moved
        assert "up to date" in check(one, 0)


def test_a_digest_pin_is_kept(tmp_path: Path) -> None:
    with registry(tmp_path, tls=False) as reg, oci_machines(tmp_path, "one") as (one,):
        one.ok("keygen")
        pin = release(one, tmp_path, reg, "1.0.0", tag="latest")
        one.ok("add", reg.ref(REPO, digest=pin))
        release(one, tmp_path, reg, "1.1.0", tag="latest")
        release(one, tmp_path, reg, "2.0.0")
        assert "up to date" in check(one, 0)
        before = holdings(one)
        assert "up to date" in one.ok("update")
        assert holdings(one) == before
        assert current(one) == ("1.0.0", f"@{pin}", reg.ref(REPO, digest=pin))
        assert served(one) == skill_text("alpha", "1.0.0")


def test_a_pin_updated_from_another_repository_takes_its_highest_release_tag(
        tmp_path: Path) -> None:
    with registry(tmp_path, tls=False) as reg, oci_machines(tmp_path, "one") as (one,):
        one.ok("keygen")
        pin = release(one, tmp_path, reg, "1.0.0")
        one.ok("add", reg.ref(REPO, digest=pin))
        release(one, tmp_path, reg, "1.3.0")
        one.ok("update", NAME, "--from", reg.ref(REPO))  # its own repository: the pin holds
        assert current(one)[0] == "1.0.0"
        mirror = reg.ref("acx/mirror")
        cart = pack(one, tmp_path / "mirror", "research", "1.2.0", "alpha")
        moved = push(one, cart, mirror).manifest
        one.ok("update", NAME, "--from", mirror)
        (bundle,) = one.listing()["bundles"]
        assert (bundle["version"], bundle["source"]) == ("1.2.0", mirror)
        assert bundle["reference"] == f"{reg.ref('acx/mirror', tag='1.2.0')}@{moved}"
        assert served(one) == skill_text("alpha", "1.2.0")


def test_latest_is_still_followed_after_it_moved_to_a_release_the_library_knows(
        tmp_path: Path) -> None:
    with registry(tmp_path, tls=False) as reg, oci_machines(tmp_path, "one") as (one,):
        one.ok("keygen")
        release(one, tmp_path, reg, "1.0.0", tag="latest")
        one.ok("add", reg.ref(REPO, tag="latest"))
        cart = pack(one, tmp_path / "next", "research", "1.1.0", "alpha")
        known = push(one, cart, reg.ref(REPO)).manifest
        project = tmp_path / "project"
        project.mkdir()
        one.ok("add", "--project", project, reg.ref(REPO, tag="1.1.0"))  # now remembered
        assert push(one, cart, reg.ref(REPO, tag="latest")).manifest == known
        assert check(one, 1) == f"{NAME}: 1.0.0 -> 1.1.0 ({reg.ref(REPO)})\n"
        one.ok("update")
        assert current(one)[:2] == ("1.1.0", f"latest@{known}")
        release(one, tmp_path, reg, "1.2.0")  # latest has not moved
        assert "up to date" in check(one, 0)


def test_latest_re_pushed_with_the_same_bundle_is_no_update(tmp_path: Path) -> None:
    """Another manifest under `latest` whose layer is the installed file (annotations
    changed, say): nothing to install, so `update --check` says up to date and `update`
    succeeds without a change."""
    with registry(tmp_path, tls=False) as reg, oci_machines(tmp_path, "one") as (one,):
        one.ok("keygen")
        release(one, tmp_path, reg, "1.1.0", tag="latest")
        one.ok("add", reg.ref(REPO, tag="latest"))
        before = current(one)
        doc = manifest_doc(reg.client(), REPO, "latest")
        annotations = doc["annotations"]
        assert isinstance(annotations, dict)
        doc["annotations"] = {**annotations, "org.example.note": "re-pushed"}
        plant(reg.client(), REPO, "latest", doc)
        assert "up to date" in check(one, 0)
        assert "up to date" in one.ok("update")
        assert current(one) == before
