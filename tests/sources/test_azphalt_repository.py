"""`acxfs add ID --from azphalt+URL` against a loopback azphalt Repository API that answers in
the reference server's canonical shapes (tests/fixtures/azphalt-repository) and serves the real
signed skill package (tests/fixtures/azp): install by id, a wrong digest, a yanked version, a
revocation of the installed one, a paid download, a package that is no skill.
"""

from __future__ import annotations

import copy
import hashlib
import io
import json
import zipfile
from pathlib import Path
from typing import Any

import pytest

from scripts.mounting import acxfs
from tests.sources.test_acx_registry_install import refused
from tests.support.library import agent_dirs, listing, ok
from tests.support.servers import Reply, Scripted

pytestmark = [pytest.mark.fuse, pytest.mark.slow, pytest.mark.usefixtures("library_stops")]

FIXTURES = Path(__file__).parent.parent / "fixtures"
CANON = FIXTURES / "azphalt-repository"
AZP = FIXTURES / "azp" / "com.hereliesaz.azphalt.dev-workflow-skills-1.0.0.azp"
ID = "com.hereliesaz.azphalt.dev-workflow-skills"
DOWNLOAD = f"packages/{ID}/versions/1.0.0/download"


def canonical(name: str) -> dict[str, Any]:
    doc = json.loads((CANON / name).read_text())
    assert isinstance(doc, dict)
    return doc


class Repository:
    """The loopback repository: one skill package, its version list, the revocations feed."""

    def __init__(self) -> None:
        self.blob = AZP.read_bytes()
        self.digest = "sha256-" + hashlib.sha256(self.blob).hexdigest()
        self.yanked = False
        self.revocations: list[dict[str, str]] = []

    def detail(self) -> dict[str, Any]:
        body: dict[str, Any] = copy.deepcopy(canonical("package-detail.json")["body"])
        body.update(id=ID, kind="skill", version="1.0.0", latest="1.0.0", types=[])
        body["manifest"] = json.loads(_member(self.blob, "manifest.json"))
        body["versions"] = [{"version": "1.0.0", "publishedAt": "2026-01-01T00:00:00.000Z",
                             "size": len(self.blob), "digest": self.digest,
                             "yanked": self.yanked}]
        return body

    def route(self, path: str) -> Reply | None:
        bare = path.split("?", 1)[0]
        if bare == f"/packages/{ID}":
            return Reply(200, json.dumps(self.detail()).encode())
        if bare == f"/{DOWNLOAD}":
            return Reply(200, self.blob)
        if bare == "/revocations":
            feed = canonical("revocations.json")["body"]
            feed["revocations"] = self.revocations
            return Reply(200, json.dumps(feed).encode())
        if bare == "/packages/com.demo.free":
            return Reply(200, json.dumps(canonical("package-detail.json")["body"]).encode())
        if bare.startswith("/packages/com.demo.paid"):
            if bare.endswith("/download"):
                paid = canonical("download-402-unlicensed.json")
                return Reply(paid["status"], json.dumps(paid["body"]).encode())
            body = copy.deepcopy(self.detail())
            body["id"] = "com.demo.paid"
            return Reply(200, json.dumps(body).encode())
        return None


def _member(blob: bytes, name: str) -> bytes:
    with zipfile.ZipFile(io.BytesIO(blob)) as z:
        return z.read(name)


@pytest.fixture
def repo() -> Repository:
    ok(acxfs("trust", "add", AZP))
    return Repository()


def test_installs_the_skill_package_by_id(repo: Repository) -> None:
    with Scripted(repo.route).running() as base:
        ok(acxfs("add", ID, "--from", f"azphalt+{base}"))
    bundle = listing()["bundles"][0]
    assert bundle["identity"] == ID
    assert (bundle["source"], bundle["coordinate"]) == (f"azphalt+{base}", f"{ID}@1.0.0")
    assert all((agent_dirs()[0] / s / "SKILL.md").is_file() for s in bundle["skills"])


def test_a_download_whose_sha256_is_not_the_digest_is_refused(repo: Repository) -> None:
    real = repo.digest
    repo.digest = "sha256-" + "0" * 64
    with Scripted(repo.route).running() as base:
        message = refused("add", ID, "--from", f"azphalt+{base}")
    assert message == f"{base}{DOWNLOAD}: {real}, not the digest azphalt+{base} names"


def test_a_yanked_version_is_refused(repo: Repository) -> None:
    repo.yanked = True
    with Scripted(repo.route).running() as base:
        message = refused("add", ID, "--from", f"azphalt+{base}")
    assert message == (f"{ID} 1.0.0 is yanked (azphalt+{base}): yanked by the repository; "
                       "--allow-withdrawn installs it anyway")


def test_a_revocation_of_the_installed_version_unlinks_it(repo: Repository) -> None:
    with Scripted(repo.route).running() as base:
        ok(acxfs("add", ID, "--from", f"azphalt+{base}"))
        skills = listing()["bundles"][0]["skills"]
        assert ok(acxfs("update", "--check")).strip().endswith("up to date")
        repo.revocations = [{"id": ID, "version": "1.0.0", "reason": "malware",
                             "revokedAt": "2026-11-30T09:30:00Z"}]
        check = acxfs("update", "--check")
        assert check.returncode == 1, check
        assert (agent_dirs()[0] / skills[0]).is_symlink()
        ok(acxfs("update"))
        repo.revocations = []  # a revocation the feed drops stays in force
        message = refused("add", f"{ID}@1.0.0", "--from", f"azphalt+{base}")
    assert not any((d / s).exists() for d in agent_dirs() for s in skills)
    bundle = listing()["bundles"][0]
    assert not bundle["served"] and "revoked" in bundle["why"] and "malware" in bundle["why"]
    assert message.startswith(f"{ID} 1.0.0 is revoked (azphalt+{base}, 2026-11-30): malware")


def test_a_paid_download_is_refused_with_the_servers_reason(repo: Repository) -> None:
    with Scripted(repo.route).running() as base:
        message = refused("add", "com.demo.paid", "--from", f"azphalt+{base}")
    assert message == (f"{base}packages/com.demo.paid/versions/1.0.0/download: refused by the "
                       "repository (HTTP 402): payment_required: payment required: no license "
                       "for this package")


def test_a_package_that_is_no_skill_is_refused(repo: Repository) -> None:
    with Scripted(repo.route).running() as base:
        message = refused("add", "com.demo.free", "--from", f"azphalt+{base}")
    assert message == f"{base}packages/com.demo.free: kind 'asset', not \"skill\""
