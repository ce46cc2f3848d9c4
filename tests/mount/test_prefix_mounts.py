"""One daemon, many sources: each served under its path prefix, changed while it runs.

The FUSE operations route a path to the source whose prefix leads it; the directories above
the prefixes are made up, read-only and hold nothing but the way to a source; a tampered
file is EIO and recorded with the source it belongs to.
"""

from __future__ import annotations

import contextlib
import errno
import os
import sqlite3
import stat
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from acxfs import formats
from acxfs.container import Source
from acxfs.content.cache import VerifiedCache
from acxfs.mount.operations import AcxOperations, FuseOSError
from acxfs.mount.router import Mounted
from acxfs.trust.store import load_trust
from scripts import cartwriter as cw
from scripts.mounting import acxfs, mount_rows, status_entry, wait_for
from tests.support.demo import DEMO_FILES

GUIDE = "rom/skills/demo-skill/references/guide.md"
ONE = "io.github.example/one/1.0.0-aaaa1111"
TWO = "io.github.example/two/2.0.0-bbbb2222"
SKILL = "rom/skills/demo-skill"


@pytest.fixture
def opened(make_cartridge: Callable[..., Path], trusted_registry: Path
           ) -> Iterator[Callable[[str], tuple[Path, Mounted]]]:
    """Factory: `opened(name)` builds a demo cartridge and opens it through one store."""
    store = VerifiedCache()
    trust = load_trust([str(trusted_registry)])
    sources: list[Source] = []

    def make(name: str, prefix: str = "") -> tuple[Path, Mounted]:
        path = make_cartridge(f"{name}.acx")
        source, report = formats.open_source(str(path), trust, store)
        sources.append(source)
        return path, Mounted(prefix, source, SKILL, report.verdict, str(path))

    make.store = store  # type: ignore[attr-defined]
    yield make
    for source in sources:
        source.close()


def _errno(call: Callable[[], object]) -> int:
    with pytest.raises(FuseOSError) as caught:
        call()
    assert caught.value.errno is not None
    return caught.value.errno


def test_sources_are_served_under_their_prefixes_below_made_up_directories(opened) -> None:
    _, one = opened("one", ONE)
    _, two = opened("two", TWO)
    ops = AcxOperations([one, two], opened.store)

    assert ops.readdir("/", None) == [".", "..", "io.github.example"]
    assert ops.readdir("/io.github.example", None) == [".", "..", "one", "two"]
    assert ops.readdir("/io.github.example/one", None) == [".", "..", "1.0.0-aaaa1111"]
    assert ops.readdir(f"/{ONE}", None) == [".", "..", "SKILL.md", "references", "scripts"]
    made = ops.getattr("/io.github.example/two")
    assert made["st_mode"] == stat.S_IFDIR | 0o555 and made["st_nlink"] == 3
    want = DEMO_FILES[GUIDE]
    for prefix in (ONE, TWO):
        path = f"/{prefix}/references/guide.md"
        assert ops.getattr(path)["st_size"] == len(want)
        assert ops.read(path, len(want) + 10, 0, None) == want
    assert ops.getxattr(f"/{ONE}", "user.acx.trust") == b"trusted"
    assert _errno(lambda: ops.getxattr("/io.github.example", "user.acx.trust")) == errno.ENODATA
    assert _errno(lambda: ops.getattr("/io.github.example/three")) == errno.ENOENT
    assert _errno(lambda: ops.getattr(f"/{ONE}/nope")) == errno.ENOENT
    assert _errno(lambda: ops.read("/io.github.example", 10, 0, None)) == errno.EISDIR
    assert _errno(lambda: ops.mkdir("/io.github.example/x", 0o755)) == errno.EROFS
    assert _errno(lambda: ops.access("/io.github.example", os.W_OK)) == errno.EROFS
    assert [name for name, _, _ in ops.readdir_plus("/io.github.example")] == [
        ".", "..", "one", "two"]


def test_a_source_attached_or_detached_while_serving_appears_or_goes(opened) -> None:
    _, one = opened("one", ONE)
    _, two = opened("two", TWO)
    ops = AcxOperations([one], opened.store)
    assert ops.readdir("/io.github.example", None) == [".", "..", "one"]

    ops.attach(TWO, two)
    assert ops.readdir("/io.github.example", None) == [".", "..", "one", "two"]
    assert ops.read(f"/{TWO}/SKILL.md", 1 << 20, 0, None) == DEMO_FILES[f"{SKILL}/SKILL.md"]
    assert [m.prefix for m in ops.mounted()] == [ONE, TWO]

    assert ops.detach(ONE) is one
    assert ops.detach(ONE) is None
    assert ops.readdir("/io.github.example", None) == [".", "..", "two"]
    assert _errno(lambda: ops.getattr(f"/{ONE}/SKILL.md")) == errno.ENOENT
    assert _errno(lambda: ops.getattr("/io.github.example/one")) == errno.ENOENT
    ops.detach(TWO)
    assert ops.readdir("/", None) == [".", ".."]


@pytest.mark.parametrize("prefix", [ONE, "io.github.example", f"{ONE}/inner", "", "a/../b",
                                    "a//b"])
def test_a_prefix_that_is_taken_nested_or_not_plain_names_is_refused(opened, prefix) -> None:
    _, one = opened("one", ONE)
    _, other = opened("other")
    ops = AcxOperations([one], opened.store)
    with pytest.raises(ValueError):
        ops.attach(prefix, other)
    assert [m.prefix for m in ops.mounted()] == [ONE]


def test_the_single_source_mount_takes_no_other_prefix(opened) -> None:
    _, whole = opened("whole")
    _, other = opened("other")
    ops = AcxOperations([whole], opened.store)
    assert ops.readdir("/", None) == [".", "..", "SKILL.md", "references", "scripts"]
    with pytest.raises(ValueError):
        ops.attach(TWO, other)


def test_reads_keep_working_while_sources_come_and_go(opened) -> None:
    _, one = opened("one", ONE)
    _, two = opened("two", TWO)
    ops = AcxOperations([one], opened.store)
    want = DEMO_FILES[GUIDE]
    stop = threading.Event()
    failures: list[str] = []

    def reader() -> None:
        while not stop.is_set():
            try:
                if ops.read(f"/{ONE}/references/guide.md", 1 << 20, 0, None) != want:
                    failures.append("wrong bytes")
                ops.readdir("/io.github.example", None)
                with contextlib.suppress(FuseOSError):
                    ops.getattr(f"/{TWO}/SKILL.md")
            except Exception as exc:
                failures.append(repr(exc))

    threads = [threading.Thread(target=reader) for _ in range(4)]
    for thread in threads:
        thread.start()
    for _ in range(300):
        ops.attach(TWO, two)
        ops.detach(TWO)
    stop.set()
    for thread in threads:
        thread.join(10)
    assert failures == []


def _tamper(path: Path) -> None:
    original = DEMO_FILES[GUIDE]
    forged = original.replace(b"read.", b"RUIN.")
    assert len(forged) == len(original) and forged != original
    with contextlib.closing(sqlite3.connect(path)) as conn:
        assert conn.execute("UPDATE sqlar SET data = ? WHERE name = ?",
                            (cw.compress(forged, "raw"), GUIDE)).rowcount == 1
        conn.commit()


def test_a_tampered_file_is_eio_and_recorded_once_with_its_source(opened) -> None:
    _, one = opened("one", ONE)
    path_two, two = opened("two", TWO)
    logged: list[str] = []
    ops = AcxOperations([one, two], opened.store, log=logged.append)
    _tamper(path_two)

    for _ in range(3):
        assert _errno(lambda: ops.read(f"/{TWO}/references/guide.md", 100, 0, None)) == errno.EIO
    assert ops.read(f"/{ONE}/references/guide.md", 1 << 20, 0, None) == DEMO_FILES[GUIDE]
    events = ops.tamper_events()
    assert [(e.prefix, e.label, e.path) for e in events] == [(TWO, str(path_two), GUIDE)]
    assert len(logged) == 1 and logged[0].startswith(f"tamper: {path_two}: ")
    assert GUIDE in logged[0]


MOUNT_TWO = """
import sys
from acxfs import formats
from acxfs.mount import lifecycle
from acxfs.content.cache import VerifiedCache
from acxfs.mount.router import Mounted
from acxfs.trust.store import load_trust

mountpoint, registry, *pairs = sys.argv[1:]
store, trust = VerifiedCache(), load_trust([registry])
mounts = []
for prefix, path in zip(pairs[::2], pairs[1::2]):
    source, report = formats.open_source(path, trust, store)
    mounts.append(Mounted(prefix, source, "rom/skills/demo-skill", report.verdict, path))
plan = lifecycle.MountPlan(mountpoint, mounts, store, "library", name="acxfs-test-library",
                        fuse_options={"negative_timeout": 0}, announce=print)
sys.exit(lifecycle.mount(plan))
"""


@pytest.mark.fuse
@pytest.mark.slow
def test_one_daemon_serves_two_cartridges_under_prefixes(opened, trusted_registry,
                                                         tmp_path) -> None:
    path_one, _ = opened("one")
    path_two, _ = opened("two")
    mountpoint = tmp_path / "mnt"
    mountpoint.mkdir()
    done = subprocess.run(
        [sys.executable, "-c", MOUNT_TWO, str(mountpoint), str(trusted_registry),
         ONE, str(path_one), TWO, str(path_two)], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    try:
        assert wait_for(lambda: os.path.ismount(mountpoint), 10)
        assert mount_rows(mountpoint)[0][0] == "acxfs:acxfs-test-library"
        assert sorted(os.listdir(mountpoint / "io.github.example")) == ["one", "two"]
        for prefix in (ONE, TWO):
            assert (mountpoint / prefix / "references" / "guide.md").read_bytes() == \
                DEMO_FILES[GUIDE]
        entry = "\n".join(status_entry(mountpoint))  # this daemon's, not another library's
        assert "view=library" in entry and "2 sources" in entry, entry
    finally:
        unmounted = acxfs("umount", mountpoint)
    assert unmounted.returncode == 0, unmounted.stderr
    assert not mount_rows(mountpoint)
