"""A registry built only with `acxfs publish` and `acxfs withdraw`, from an empty directory,
by a publisher with its own HOME, serving a second HOME over loopback HTTPS: add by name,
update to a newer release, and a revocation that unlinks the installed release on update.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from scripts.mounting import acxfs
from tests.support import acx_registry as reg
from tests.support.library import agent_dirs, ok
from tests.support.servers import Scripted, files_route, make_ca

pytestmark = [pytest.mark.fuse, pytest.mark.slow, pytest.mark.usefixtures("library_stops")]

NAME = f"{reg.PUBLISHER}/helper"


def publisher_env(root: Path, key_store: Path) -> dict[str, str]:
    """Another user's environment: its own HOME, XDG dirs and trust store (with the key
    `acxfs keygen` made)."""
    env = dict(os.environ)
    for kind in ("CONFIG", "STATE", "CACHE", "DATA"):
        (root / kind.lower()).mkdir(parents=True)
        env[f"XDG_{kind}_HOME"] = str(root / kind.lower())
    (root / "home").mkdir()
    env["HOME"] = str(root / "home")
    shutil.copytree(key_store, root / "trust", copy_function=shutil.copy2)
    env["ACXFS_TRUST_DIR"] = str(root / "trust")
    return env


def release(work: Path, version: str, env: dict[str, str]) -> Path:
    skill = reg.write_skill(work / f"src-{version}", "helper-skill",
                            f"The helper skill, release {version}.")
    out = work / f"helper-{version}.acx"
    ok(acxfs("pack", skill, "-o", out, "--publisher", reg.PUBLISHER, "--id", "helper",
             "--version", version, env=env))
    return out


def description() -> str | None:
    link = agent_dirs()[0] / "helper-skill"
    return (link / "SKILL.md").read_text() if link.exists() else None


def test_a_published_registry_serves_add_update_and_a_revocation_over_https(
        tmp_path: Path, made_local_key: Path) -> None:
    publisher = publisher_env(tmp_path / "publisher", made_local_key)
    work = tmp_path / "work"
    work.mkdir()
    root = tmp_path / "registry"  # does not exist yet: publish makes it
    first = release(work, "1.0.0", publisher)
    ok(acxfs("publish", first, "--registry", root, env=publisher))
    assert sorted(p.name for p in root.iterdir()) == ["cartridges", "index.json"]

    ca, cert, key = make_ca(tmp_path / "ca")
    ok(acxfs("trust", "add", first))  # this user trusts the publisher's key
    with Scripted(files_route(root), tls=(cert, key)).running() as base:
        env = {**os.environ, "SSL_CERT_FILE": str(ca)}
        ok(acxfs("add", NAME, "--from", base, env=env))
        assert "release 1.0.0" in (description() or "")

        ok(acxfs("publish", release(work, "1.1.0", publisher), "--registry", root,
                 env=publisher))
        ok(acxfs("update", env=env))
        assert "release 1.1.0" in (description() or "")

        out = ok(acxfs("withdraw", f"{NAME}@1.1.0", "--registry", root, "--status", "revoked",
                       "--reason", "leaks the API token into logs", env=publisher))
        assert out.startswith(f"{NAME} 1.1.0 is revoked (recorded as withdrawn) since ")
        result = acxfs("update", env=env)
        assert result.returncode == 0, result.stderr
        said = result.stdout + result.stderr
        assert f"{NAME} 1.1.0 is withdrawn" in said and "revoked: leaks the API token" in said
        assert description() is None  # its links are gone
