"""`acxfs add NAME --from SOURCE` from ACX registries through the real command: the standard's
snapshot as a directory, a git clone, `python -m http.server`, HTTPS with a CA the test
makes; releases packed and signed here, indexed as the standard's builder does.

Every refusal must be one line, its exit code, and leave the library exactly as it was.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from scripts.mounting import acxfs
from tests.support import acx_registry as reg
from tests.support.library import agent_dirs, data_dir, home, listing, ok
from tests.support.servers import Reply, Scripted, files_route, make_ca, static_server

pytestmark = [pytest.mark.fuse, pytest.mark.slow, pytest.mark.usefixtures("library_stops")]

ADA = "io.github.ridgeworks/ada-ridge"
ADA_FILE = "cartridges/io.github.ridgeworks/ada-ridge/1.0.0/cartridge.acx"
NAME = f"{reg.PUBLISHER}/helper"


def library_now() -> tuple[bytes | None, list[str]]:
    """The library's state file and store: what a refusal must leave as it was."""
    state = data_dir() / "library.json"
    store = data_dir() / "store"
    return (state.read_bytes() if state.exists() else None,
            sorted(p.name for p in store.iterdir()) if store.exists() else [])


def refused(*args: object, code: int = 1, env: dict[str, str] | None = None) -> str:
    """Run a command that must be refused in one line, changing nothing; its message."""
    before = library_now()
    result = acxfs(*args, env=env)
    assert result.returncode == code, (result.args, result.returncode, result.stdout,
                                       result.stderr)
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("acxfs: error: "), result.stderr
    assert "Traceback" not in result.stderr
    assert library_now() == before
    return lines[0].removeprefix("acxfs: error: ")


def description() -> str:
    return (agent_dirs()[0] / "helper-skill" / "SKILL.md").read_text()


@pytest.fixture
def snapshot(tmp_path: Path) -> Path:
    """A copy of the standard's registry snapshot, its signer pinned."""
    copy = tmp_path / "acx"
    shutil.copytree(reg.SNAPSHOT, copy)
    ok(acxfs("trust", "add", copy / "registry" / ADA_FILE))
    return copy


@pytest.fixture
def releases(tmp_path: Path, local_key: None) -> dict[str, reg.Packed]:
    work = tmp_path / "packed"
    work.mkdir()
    return {v: reg.pack(work, v) for v in ("1.0.0", "1.1.0", "2.0.0-rc.1")}


@pytest.fixture
def registry(tmp_path: Path, releases: dict[str, reg.Packed]) -> Path:
    return reg.build(tmp_path / "reg", list(releases.values()), status=[])


def test_snapshot_directory_installs_a_cartridge_by_name(snapshot: Path) -> None:
    out = ok(acxfs("add", ADA, "--from", snapshot))
    assert "expertise-devops-engineer" in out
    assert (agent_dirs()[1] / "expertise-devops-engineer" / "SKILL.md").is_file()
    bundle = listing()["bundles"][0]
    assert (bundle["source"], bundle["coordinate"]) == (str(snapshot), ADA_FILE)
    assert f"from: {snapshot} {ADA_FILE}" in ok(acxfs("list"))


def test_git_clone_of_the_registry_is_a_source(tmp_path: Path, snapshot: Path) -> None:
    env = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.com",
           "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@example.com",
           "PATH": "/usr/bin:/bin", "HOME": str(home())}
    for args in (["init", "-q", str(snapshot)], ["-C", str(snapshot), "add", "-A"],
                 ["-C", str(snapshot), "commit", "-qm", "registry"],
                 ["clone", "-q", str(snapshot), str(tmp_path / "clone")]):
        subprocess.run(["git", *args], check=True, env=env, capture_output=True)
    ok(acxfs("add", f"{ADA}@1.0.0", "--from", tmp_path / "clone"))
    assert listing()["bundles"][0]["coordinate"] == ADA_FILE


def test_http_server_on_loopback_serves_the_snapshot(snapshot: Path) -> None:
    with static_server(snapshot / "registry") as base:
        ok(acxfs("add", ADA, "--from", base))
    assert listing()["bundles"][0]["source"] == base


def test_https_needs_the_test_ca_in_ssl_cert_file(tmp_path: Path, snapshot: Path) -> None:
    ca, cert, key = make_ca(tmp_path / "ca")
    with Scripted(files_route(snapshot / "registry"), tls=(cert, key)).running() as base:
        assert base.startswith("https://")
        message = refused("add", ADA, "--from", base, code=2)
        assert message.startswith(f"{base}index.json: certificate verify failed"), message
        env = {**_environ(), "SSL_CERT_FILE": str(ca)}
        ok(acxfs("add", ADA, "--from", base, env=env))
    assert listing()["bundles"][0]["source"] == base


def test_plain_http_beyond_loopback_is_refused_before_any_connection() -> None:
    message = refused("add", ADA, "--from", "http://192.0.2.1/registry/", code=2)
    assert message == "http://192.0.2.1/registry/: plain HTTP only for loopback"


def test_newest_release_is_chosen_and_a_prerelease_only_when_named(
        registry: Path) -> None:
    ok(acxfs("add", NAME, "--from", registry))
    assert "release 1.1.0" in description()
    ok(acxfs("add", f"{NAME}@2.0.0-rc.1", "--from", registry))
    assert "release 2.0.0-rc.1" in description()


def test_a_version_the_source_lacks_is_named_with_what_it_has(registry: Path) -> None:
    message = refused("add", f"{NAME}@2.0.0", "--from", registry)
    assert message == (f"{registry} has no {NAME} 2.0.0 "
                       "(it has 1.0.0, 1.1.0, 2.0.0-rc.1)")


def test_withdrawn_release_is_refused_unless_allowed(
        tmp_path: Path, releases: dict[str, reg.Packed]) -> None:
    why = "leaks the user's API keys into the transcript"
    root = reg.build(tmp_path / "r", list(releases.values()), status=[
        reg.status_entry(releases["1.1.0"], "withdrawn", why, "2026-11-02T10:00:00Z")])
    ok(acxfs("add", NAME, "--from", root))  # the newest not withdrawn
    assert "release 1.0.0" in description()
    message = refused("add", f"{NAME}@1.1.0", "--from", root)
    assert message == (f"{NAME} 1.1.0 is withdrawn ({root}, 2026-11-02): {why}; "
                       "--allow-withdrawn installs it anyway")
    ok(acxfs("add", f"{NAME}@1.1.0", "--from", root, "--allow-withdrawn"))


def test_deprecated_warns_and_superseded_names_its_successor(
        tmp_path: Path, releases: dict[str, reg.Packed]) -> None:
    root = reg.build(tmp_path / "r", list(releases.values()), status=[
        reg.status_entry(releases["1.1.0"], "deprecated", "use the 2.x line instead"),
        reg.status_entry(releases["1.0.0"], "superseded", "replaced by the 1.1 release",
                         successor=releases["1.1.0"])])
    result = acxfs("add", NAME, "--from", root)
    assert result.returncode == 0, result.stderr
    assert f"acxfs: warning: {NAME} 1.1.0 is deprecated" in result.stderr
    assert listing()["bundles"][0]["lifecycle"].startswith("deprecated")
    ok(acxfs("remove", NAME, "--forget"))
    result = acxfs("add", f"{NAME}@1.0.0", "--from", root)
    assert f"is superseded by {NAME} 1.1.0" in result.stderr, result.stderr


def test_another_cartridge_at_the_coordinate_is_refused(
        tmp_path: Path, releases: dict[str, reg.Packed]) -> None:
    root = reg.build(tmp_path / "r", [releases["1.0.0"]], status=[])
    other = reg.pack(tmp_path, "1.0.0", artifact="other")  # trusted too, another identity
    shutil.copyfile(other.file, root / releases["1.0.0"].path)
    doc = reg.read_index(root)
    doc["cartridges"][0].update(bytes=other.file.stat().st_size, romHash=other.rom_hash(),
                                digest=other.rom_hash())
    reg.write_index(root, doc["cartridges"])
    message = refused("add", NAME, "--from", root)
    assert message == (f"{root / releases['1.0.0'].path} is signed as "
                       f"{reg.PUBLISHER}/other 1.0.0, not {NAME} 1.0.0")


def test_a_manifest_other_than_the_index_digest_is_refused(
        tmp_path: Path, releases: dict[str, reg.Packed]) -> None:
    root = reg.build(tmp_path / "r", [releases["1.0.0"]], status=[])
    doc = reg.read_index(root)
    fake = "sha256:" + "ab" * 32
    doc["cartridges"][0].update(romHash=fake, digest=fake)
    reg.write_index(root, doc["cartridges"])
    message = refused("add", NAME, "--from", root)
    assert message == (f"{root / releases['1.0.0'].path}: signed manifest "
                       f"{releases['1.0.0'].rom_hash()}, index.json names {fake}")


def test_a_path_that_is_not_the_coordinate_is_refused(
        tmp_path: Path, releases: dict[str, reg.Packed]) -> None:
    root = reg.build(tmp_path / "r", list(releases.values()), status=[])
    doc = reg.read_index(root)
    doc["cartridges"][2]["path"] = "cartridges/../../etc/cartridge.acx"
    reg.write_index(root, doc["cartridges"])
    message = refused("add", NAME, "--from", root)
    assert message == (f"{root}/index.json: cartridges[2].path: not "
                       "cartridges/<publisher>/<id>/<version>/cartridge.acx")


def test_an_index_over_16_mib_is_refused(tmp_path: Path, registry: Path) -> None:
    index = registry / "index.json"
    index.write_bytes(index.read_bytes()[:-2] + b" " * (16 * 1024 * 1024) + b"}\n")
    assert refused("add", NAME, "--from", registry) == f"{index}: over 16 MiB"
    with static_server(registry) as base:
        assert refused("add", NAME, "--from", base) == f"{base}index.json: over 16 MiB"


@pytest.mark.parametrize("delta", [+1, -1])
def test_a_download_longer_or_shorter_than_bytes_is_refused(
        registry: Path, releases: dict[str, reg.Packed], delta: int) -> None:
    doc = reg.read_index(registry)
    entry = next(c for c in doc["cartridges"] if c["version"] == "1.1.0")
    size = entry["bytes"]
    entry["bytes"] = size - delta  # the file is longer (delta +1) or shorter than stated
    reg.write_index(registry, doc["cartridges"])
    with static_server(registry) as base:
        message = refused("add", NAME, "--from", base)
    url = f"{base}{entry['path']}"
    if delta > 0:
        assert message == f"{url}: more than {size - 1} bytes, its stated size"
    else:
        assert message == f"{url}: {size} bytes, not {size + 1}"


def test_a_body_without_a_length_is_cut_at_bytes(registry: Path) -> None:
    doc = reg.read_index(registry)
    entry = next(c for c in doc["cartridges"] if c["version"] == "1.1.0")
    files = files_route(registry)

    def route(path: str) -> Reply | None:
        found = files(path)
        if found is None or not path.endswith(".acx"):
            return found
        return Reply(200, found.body + b"\0" * 65536, length=-1)  # until the server closes

    with Scripted(route).running() as base:
        message = refused("add", NAME, "--from", base)
    assert message == (f"{base}{entry['path']}: more than {entry['bytes']} bytes, its "
                       "stated size")


def test_a_redirect_is_never_followed(registry: Path) -> None:
    def route(path: str) -> Reply:
        return Reply(302, b"", {"Location": "http://127.0.0.1:9/elsewhere/index.json"})

    with Scripted(route).running() as base:
        message = refused("add", NAME, "--from", base, code=2)
    assert message == (f"{base}index.json: redirected to http://127.0.0.1:9/elsewhere/"
                       "index.json; acxfs follows no redirects")


def test_a_stalled_server_is_given_up_after_timeout(registry: Path) -> None:
    with Scripted(lambda path: Reply(200, b"", length=100, stall=True)).running() as base:
        message = refused("add", NAME, "--from", base, "--timeout", "1", code=2)
    assert message == f"{base}index.json: no answer in 1 s"


def test_offline_refuses_the_network_and_keeps_directories(registry: Path) -> None:
    message = refused("add", NAME, "--from", "https://127.0.0.1:9/reg/", "--offline", code=2)
    assert message == f"{NAME} needs a download from https://127.0.0.1:9/reg/; offline"
    env = {**_environ(), "ACXFS_OFFLINE": "1"}
    ok(acxfs("add", NAME, "--from", registry, env=env))


def _environ() -> dict[str, str]:
    return dict(os.environ)


def test_a_folder_of_bundle_files_is_a_source(
        tmp_path: Path, releases: dict[str, reg.Packed], isolated_user_state: Path) -> None:
    folder = tmp_path / "vendor"
    folder.mkdir()
    for p in releases.values():
        shutil.copyfile(p.file, folder / p.file.name)
    (folder / "notes.txt").write_text("not a bundle\n")
    ok(acxfs("add", NAME, "--from", folder))
    assert "release 1.1.0" in description()
    bundle = listing()["bundles"][0]
    assert (bundle["source"], bundle["coordinate"]) == (str(folder), releases["1.1.0"].file.name)
    (isolated_user_state / "policy.json").write_text(
        '{"schemaVersion": "acxfs.policy/1", "files": false}')
    message = refused("add", f"{NAME}@2.0.0-rc.1", "--from", folder)
    assert message == f"{isolated_user_state}/policy.json: local files are not allowed"
