"""policy.json (the trust store's and root's /etc/acxfs/policy.json) through the real command:
a source not allowed is refused before any connection, a publisher before the download, a
keyid after the check, local files, an index too old, an unusable policy, withdrawn: warn.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest

from scripts.mounting import acxfs, acxfs_command
from tests.sources.test_acx_registry_install import NAME, refused
from tests.support import acx_registry as reg
from tests.support.library import agent_dirs, listing, ok
from tests.support.servers import Scripted, files_route

pytestmark = [pytest.mark.fuse, pytest.mark.slow, pytest.mark.usefixtures("library_stops")]


@pytest.fixture
def root(tmp_path: Path, local_key: None) -> Path:
    work = tmp_path / "packed"
    work.mkdir()
    return reg.build(tmp_path / "reg", [reg.pack(work, "1.0.0")], status=[])


def policy(trust: Path, **keys: Any) -> Path:
    path = trust / "policy.json"
    path.write_text(json.dumps({"schemaVersion": "acxfs.policy/1", **keys}))
    return path


def test_a_source_not_allowed_is_refused_before_any_connection(
        root: Path, isolated_user_state: Path) -> None:
    path = policy(isolated_user_state, sources=["https://skills.example.com/registry"])
    server = Scripted(files_route(root))
    with server.running() as base:
        message = refused("add", NAME, "--from", base)
    assert message == f"{path}: source {base} is not allowed"
    assert server.seen == []
    assert "sources: https://skills.example.com/registry/" in ok(acxfs("trust", "list"))


def test_an_allowed_source_installs(root: Path, isolated_user_state: Path) -> None:
    policy(isolated_user_state, sources=[str(root) + "/../reg"], publishers=["io.github"])
    ok(acxfs("add", NAME, "--from", root))


def test_a_publisher_not_allowed_is_refused_before_the_download(
        root: Path, isolated_user_state: Path) -> None:
    path = policy(isolated_user_state, publishers=["com.example"])
    server = Scripted(files_route(root))
    with server.running() as base:
        message = refused("add", NAME, "--from", base)
    assert message == f"{path}: publisher {reg.PUBLISHER} is not allowed"
    assert not any("cartridge.acx" in p for p in server.seen), server.seen


def test_a_keyid_not_allowed_is_refused_after_the_check(
        root: Path, isolated_user_state: Path) -> None:
    path = policy(isolated_user_state, keyids=["ed25519:" + "00" * 32])
    message = refused("add", NAME, "--from", root)
    assert message.startswith(f"{path}: keyid ed25519:") and message.endswith(" is not allowed")


def test_files_false_refuses_local_files(root: Path, isolated_user_state: Path) -> None:
    path = policy(isolated_user_state, files=False)
    cart = root / "cartridges" / reg.PUBLISHER / "helper" / "1.0.0" / "cartridge.acx"
    assert refused("add", cart) == f"{path}: local files are not allowed"
    ok(acxfs("add", NAME, "--from", root))  # a registry is no local file


def test_an_index_older_than_max_index_age_days_is_refused(
        root: Path, isolated_user_state: Path) -> None:
    path = policy(isolated_user_state, maxIndexAgeDays=1)
    reg.write_index(root, reg.read_index(root)["cartridges"], generated="2020-01-01T00:00:00Z")
    message = refused("add", NAME, "--from", root)
    assert message.startswith(f"{path}: {root}/index.json was generated 2020-01-01")


def test_an_unusable_policy_stops_every_library_command(isolated_user_state: Path) -> None:
    isolated_user_state.mkdir(exist_ok=True)
    path = policy(isolated_user_state, withdrawn="sometimes")
    for args in (["list"], ["update", "--check"], ["add", NAME, "--from", "/nonexistent"]):
        message = refused(*args, code=2)
        assert message.startswith(f"{path}: unusable policy"), message


def test_withdrawn_warn_keeps_serving_a_withdrawn_revision(
        root: Path, isolated_user_state: Path, tmp_path: Path) -> None:
    ok(acxfs("add", NAME, "--from", root))
    policy(isolated_user_state, withdrawn="warn")
    packed = next((tmp_path / "packed").glob("helper-1.0.0-*.acx"))
    entry = reg.status_entry(reg.Packed(reg.PUBLISHER, "helper", "1.0.0", packed),
                             "withdrawn", "withdrawn for a test of the warn policy")
    reg.write_status(root, [entry], updated="2026-11-22T00:00:00Z")
    result = acxfs("update")
    assert result.returncode == 0 and "acxfs: warning:" in result.stderr, result
    assert (agent_dirs()[0] / "helper-skill").is_symlink()


def test_the_system_policy_applies_too(root: Path, tmp_path: Path) -> None:
    system = tmp_path / "etc-acxfs"
    system.mkdir()
    (system / "policy.json").write_text(json.dumps(
        {"schemaVersion": "acxfs.policy/1", "sources": ["https://only.example.com/"]}))
    made = not os.path.lexists("/etc/acxfs")  # the mount point; its contents stay the host's
    os.makedirs("/etc/acxfs", exist_ok=True)
    command = " ".join([*acxfs_command(), "add", NAME, "--from", str(root)])
    try:
        result = subprocess.run(
            ["unshare", "-m", "sh", "-c",
             f"mount --make-rprivate / && mount --bind {system} /etc/acxfs && exec {command}"],
            capture_output=True, text=True, timeout=60, check=False)
    finally:
        if made:
            with contextlib.suppress(OSError):  # only while empty: never the host's own
                os.rmdir("/etc/acxfs")
    assert result.returncode == 1, result
    assert result.stderr.strip() == (f"acxfs: error: /etc/acxfs/policy.json: source {root} "
                                     "is not allowed")


def test_up_unlinks_what_the_policy_no_longer_allows_and_links_it_again(
        root: Path, isolated_user_state: Path) -> None:
    """The daemon stops serving the bundle's bytes too (not only its links go): an agent that
    kept the path, or guesses it, reads nothing more the policy no longer allows (what the
    kernel already holds of a file read before stays readable: verified, immutable pages)."""
    ok(acxfs("add", NAME, "--from", root))
    link = agent_dirs()[0] / "helper-skill"
    served = Path(os.readlink(link))  # nothing read through it yet
    path = policy(isolated_user_state, publishers=["com.example"])
    result = acxfs("up")
    assert result.returncode == 0, result
    why = f"{path}: publisher {reg.PUBLISHER} is not allowed"
    assert f"not serving {NAME}: {why}; links removed" in result.stderr, result.stderr
    assert not link.exists()
    [bundle] = listing()["bundles"]
    assert (bundle["served"], bundle["why"]) == (False, why)
    with pytest.raises(OSError):
        (served / "SKILL.md").read_bytes()
    path.unlink()
    result = acxfs("up")
    assert f"serving {NAME} again; linked" in result.stderr, result.stderr
    assert link.is_symlink()
    assert (link / "SKILL.md").read_bytes().startswith(b"---\n")
