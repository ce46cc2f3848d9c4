"""The kernel caches the library's mount for long, and a running reader still sees every
change at once: right after `acxfs update`, `revert` or `remove` returns, a lookup, stat or
listing through the mount shows the served set as it is now (no positive entry of a bundle no
longer served, no negative entry hiding one just served, no stale listing), under each FUSE
binding; and a file never read before is still verified when read.
"""

from __future__ import annotations

import errno
import hashlib
import json
import os
import secrets
from collections.abc import Iterator
from pathlib import Path

import pytest

from acxfs.errors import EnvironmentProblem
from acxfs.mount import backend
from scripts.mounting import acxfs
from tests.support.library import data_dir, home

pytestmark = [pytest.mark.fuse, pytest.mark.slow, pytest.mark.usefixtures("library_stops")]

PUBLISHER = "io.github.tester"


def _usable(name: str) -> bool:
    try:
        backend.load(name)
    except EnvironmentProblem:
        return False
    return True


@pytest.fixture(params=backend.BACKENDS)
def binding(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """The library's daemon served by each binding this machine has."""
    name = str(request.param)
    if name != backend.DEFAULT_BACKEND and not _usable(name):
        pytest.skip(f"{name} is not usable here")
    monkeypatch.setenv("ACXFS_FUSE_BACKEND", name)
    yield name


def pack(tmp_path: Path, version: str, *, blob: bytes = b"") -> Path:
    """Bundle io.github.tester/tool at `version` with the skill `cache-skill` (and `blob`
    as its data.bin)."""
    src = tmp_path / f"src-{version}" / "cache-skill"
    src.mkdir(parents=True)
    (src / "SKILL.md").write_text(f"---\nname: cache-skill\ndescription: at {version}.\n---\n")
    if blob:
        (src / "data.bin").write_bytes(blob)
    out = tmp_path / f"tool-{version}.acx"
    made = acxfs("pack", src, "-o", out, "--publisher", PUBLISHER, "--id", "tool",
                 "--version", version)
    assert made.returncode == 0, made.stderr
    return out


def served_at(version: str, cart: Path) -> Path:
    digest = hashlib.sha256(cart.read_bytes()).hexdigest()
    return data_dir() / "mnt" / f"{PUBLISHER}+tool@{version}-{digest[:12]}"


def link() -> Path:
    return home() / ".claude" / "skills" / "cache-skill"


def run(*args: object) -> None:
    done = acxfs(*args)
    assert done.returncode == 0, (args, done.stdout, done.stderr)


def test_update_and_revert_are_seen_at_once_despite_cached_lookups(
        tmp_path: Path, local_key: None, binding: str) -> None:
    old, new = pack(tmp_path, "1.0.0"), pack(tmp_path, "2.0.0")
    run("add", old)
    old_root, new_root = served_at("1.0.0", old), served_at("2.0.0", new)
    mnt = old_root.parent  # each revision is one name right below the mountpoint
    assert (link() / "SKILL.md").read_text().endswith("at 1.0.0.\n---\n")
    assert os.listdir(mnt) == [old_root.name]  # a listing the kernel may keep
    assert not new_root.exists()  # a negative entry the kernel may keep
    run("update", new)
    assert os.readlink(link()) == str(new_root / "cache-skill")
    assert os.stat(link()).st_ino == os.stat(new_root / "cache-skill").st_ino
    assert (link() / "SKILL.md").read_text().endswith("at 2.0.0.\n---\n")
    assert sorted(os.listdir(mnt)) == sorted([old_root.name, new_root.name])
    run("revert", "cache-skill")
    assert os.readlink(link()) == str(old_root / "cache-skill")
    assert (link() / "SKILL.md").read_text().endswith("at 1.0.0.\n---\n")


def test_a_removed_bundle_is_gone_at_once_even_where_it_was_read(
        tmp_path: Path, local_key: None, binding: str) -> None:
    cart = pack(tmp_path, "1.0.0")
    run("add", cart)
    root = served_at("1.0.0", cart)
    mnt = data_dir() / "mnt"
    skill_md = root / "cache-skill" / "SKILL.md"
    assert skill_md.read_bytes()  # looked up, stat'd and read: all of it cached
    assert os.listdir(mnt) == [root.name]
    run("remove", "cache-skill")
    for path in (skill_md, root / "cache-skill", root):
        with pytest.raises(FileNotFoundError):
            os.stat(path)
    assert os.listdir(mnt) == []
    run("add", cart)  # served again at the same path: seen at once, the negative entries gone
    assert skill_md.read_bytes().endswith(b"at 1.0.0.\n---\n")
    assert os.listdir(mnt) == [root.name]


def test_a_file_never_read_is_still_verified_when_read(
        tmp_path: Path, local_key: None, binding: str) -> None:
    blob = secrets.token_bytes(64 * 1024)  # incompressible: stored as it is
    cart = pack(tmp_path, "1.0.0", blob=blob)
    run("add", cart)
    root = served_at("1.0.0", cart)
    assert (root / "cache-skill" / "SKILL.md").read_bytes()
    assert os.stat(root / "cache-skill" / "data.bin").st_size == len(blob)  # attrs cached
    (stored,) = (data_dir() / "store").iterdir()
    os.chmod(stored, 0o600)
    data = bytearray(stored.read_bytes())
    at = data.find(blob[1000:1064])
    assert at > 0
    data[at] ^= 0x01
    with open(stored, "r+b") as handle:  # the same file, changed in place under the daemon
        handle.seek(at)
        handle.write(data[at:at + 1])
    with pytest.raises(OSError) as failed:
        (root / "cache-skill" / "data.bin").read_bytes()
    assert failed.value.errno == errno.EIO


def listings_answered() -> int:
    """How many listing requests the library's daemon has answered (its root's stats)."""
    stats = json.loads(os.getxattr(data_dir() / "mnt", "user.acx.stats"))
    return int(stats["listings"])


def test_a_directory_listed_again_is_answered_by_the_kernel(
        tmp_path: Path, local_key: None) -> None:
    if not _usable(backend.LOWLEVEL):
        pytest.skip(f"{backend.LOWLEVEL} is not usable here")  # libfuse3 is absent
    cart = pack(tmp_path, "1.0.0")
    run("add", cart)
    skill = served_at("1.0.0", cart) / "cache-skill"
    assert os.listdir(skill) == ["SKILL.md"]
    assert os.listdir(skill.parent) == ["cache-skill"]
    before = listings_answered()
    for _ in range(5):  # what an agent's start-up does with every skill directory
        assert os.listdir(skill) == ["SKILL.md"]
        assert os.listdir(skill.parent) == ["cache-skill"]
    assert listings_answered() == before
    new = pack(tmp_path, "2.0.0")
    mnt = skill.parent.parent
    assert os.listdir(mnt) == [skill.parent.name]
    run("update", new)  # the listing of what changed is asked again, and is current
    before = listings_answered()
    assert sorted(os.listdir(mnt)) == sorted([skill.parent.name,
                                                   served_at("2.0.0", new).name])
    assert listings_answered() > before
