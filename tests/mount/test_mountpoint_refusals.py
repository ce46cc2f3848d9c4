"""A mountpoint on, inside or over a path acxfs depends on is refused at once, in one line.

The paths: acxfs's state directory (a mount on its `mounts/` used to deadlock the daemon's
first write), the trust store (a cartridge mounted over `keys/` would become trusted keys),
the skills library's data directory (only the library's own mount may use its `mnt`), the
log file and the command's inputs.  Each refusal is exit 2, `acxfs: error: ...`, before any
check or fork, with no mount and no daemon left.
"""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path

import pytest

from acxfs.errors import EnvironmentProblem
from acxfs.mount import preflight
from acxfs.paths import library_paths, mount_records_dir
from scripts.mounting import acxfs, attempt_mount, mount_rows, processes_mentioning
from tests.support import REPO
from tests.support.demo import PUBLISHER

pytestmark = [pytest.mark.fuse, pytest.mark.slow]

HELLO = REPO / "examples" / "hello-acx"


@pytest.fixture
def hello(tmp_path: Path) -> Path:
    """hello-acx packed with this test's local key (so it verifies as `verified / local`)."""
    assert acxfs("keygen").returncode == 0
    out = tmp_path / "hello.acx"
    done = acxfs("pack", HELLO, "-o", out, "--publisher", PUBLISHER)
    assert done.returncode == 0, done.stderr
    return out


def _state() -> Path:
    return Path(os.environ["XDG_STATE_HOME"]) / "acxfs"


def _refused(done: subprocess.CompletedProcess[str], mountpoint: Path, *words: str) -> None:
    assert done.returncode == 2, (done.returncode, done.stderr)
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("acxfs: error: "), lines
    assert "Traceback" not in done.stderr
    for word in words:
        assert word in lines[0], lines
    assert not mount_rows(mountpoint)
    assert not processes_mentioning(str(mountpoint))


PLACES = {
    "state-dir": lambda: _state(),
    "state-mounts": lambda: _state() / "mounts",
    "trust-store": lambda: Path(os.environ["ACXFS_TRUST_DIR"]),
    "trust-keys": lambda: Path(os.environ["ACXFS_TRUST_DIR"]) / "keys",
    "library-data": lambda: library_paths().root,
    "library-mnt": lambda: library_paths().mnt,
    "library-store": lambda: library_paths().store,
}
WHAT = {"state": "state directory", "trust": "the trust store",
        "library": "the skills library's data directory"}


@pytest.mark.parametrize("where", sorted(PLACES))
def test_a_mountpoint_on_or_inside_what_acxfs_depends_on_is_refused_at_once(
    where: str, hello: Path
) -> None:
    mountpoint = PLACES[where]()
    existed = mountpoint.exists()
    started = time.monotonic()
    done = attempt_mount(hello, mountpoint, timeout=30)
    assert time.monotonic() - started < 20  # a mount on state/mounts used to hang 65 s
    _refused(done, mountpoint, WHAT[where.split("-")[0]])
    assert mountpoint.exists() == existed


def test_an_unsigned_cartridge_cannot_become_the_trust_stores_keys(
    hello: Path, tmp_path: Path
) -> None:
    # The mount over keys/ would serve the attacker's key file as one of the store's keys.
    keys = Path(os.environ["ACXFS_TRUST_DIR"]) / "keys"
    before = sorted(os.listdir(keys)) if keys.exists() else None
    done = attempt_mount(hello, keys, "--min-trust", "legacy", timeout=30)
    _refused(done, keys, "the trust store")
    assert (sorted(os.listdir(keys)) if keys.exists() else None) == before


@pytest.mark.parametrize("holds", ["trust", "library", "state"])
def test_a_mountpoint_over_a_directory_holding_them_is_refused(
    holds: str, hello: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Mounting over a parent hides what is below it just as well (none of them exists yet).
    over = tmp_path / "over"
    over.mkdir()
    variable = {"trust": "ACXFS_TRUST_DIR", "library": "XDG_DATA_HOME",
                "state": "XDG_STATE_HOME"}[holds]
    monkeypatch.setenv(variable, str(over / "inside"))
    done = attempt_mount(hello, over, timeout=30)
    assert done.returncode == 2, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("acxfs: error: ") and str(over) in lines[0]
    assert not mount_rows(over)


def test_the_log_file_and_an_input_are_refused_as_mountpoints(hello: Path, tmp_path: Path) -> None:
    log = tmp_path / "mount.log"
    done = attempt_mount(hello, log, "--log-file", log, timeout=30)
    assert done.returncode == 2 and len(done.stderr.strip().splitlines()) == 1, done.stderr
    assert not mount_rows(log) and not log.is_dir()
    registry = tmp_path / "registry.json"
    registry.write_text("{}\n")
    done = attempt_mount(hello, registry, "--registry", registry, timeout=30)
    _refused(done, registry, "the input")
    done = attempt_mount(hello, hello, timeout=30)
    _refused(done, hello, "the input")


def test_only_the_librarys_own_mount_may_use_its_mnt() -> None:
    mnt = str(library_paths().mnt)
    with pytest.raises(EnvironmentProblem, match="skills library"):
        preflight.check_mountpoint(mnt, [], None)
    preflight.check_mountpoint(mnt, [], None, reserved=library_paths().mnt)
    for other in (library_paths().store, library_paths().root, mount_records_dir(),
                  library_paths().mnt / "inner"):
        with pytest.raises(EnvironmentProblem):
            preflight.check_mountpoint(str(other), [], None, reserved=library_paths().mnt)
