"""Faults under a live mount, through the real `acxfs` command: nothing but verified bytes.

The cartridge file truncated, overwritten or deleted while mounted: reads give EIO or still
the verified bytes, never other bytes, and the daemon stays up and unmounts cleanly. The
daemon killed with SIGKILL: `acxfs umount` clears the stale mount. SIGTERM during heavy reads:
a clean unmount, no process left. A full spill directory (a 1 MiB tmpfs as the daemon's
TMPDIR; needs root to mount it): EIO, no partial bytes. And a short bounded run of
the load generator behind `python -m scripts.stress` (1,000 files, 5 s).
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import json
import os
import random
import signal
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any, cast

import pytest

from scripts import cartwriter as cw
from scripts import mounting
from scripts.hostile import load as stress

PUBLISHER = "io.github.example"
SPILL_BYTES = 8 * 1024 * 1024  # Limits.memory_spill_bytes: larger verified files are spilled

pytestmark = [pytest.mark.fuse, pytest.mark.slow]


def _stress_cartridge(tmp_path: Path, seed: int, files: int) -> tuple[Path, Path]:
    """A cartridge the load generator built (one large file) and its signer's public key."""
    cart = tmp_path / "stress.acx"
    stress.build_cartridge(cart, seed=seed, files=files, big=1)
    key = tmp_path / "signer.pub.pem"
    key.write_text(stress.SIGNER.public_pem)
    return cart, key


def _files(count: int = 12, seed: int = 5) -> dict[str, bytes]:
    """Distinct files, half incompressible (BLOBs spanning overflow pages)."""
    rng = random.Random(seed)
    files = {}
    for i in range(count):
        size = rng.randrange(20_000, 120_000)
        body = rng.randbytes(size) if i % 2 else (rng.randbytes(64).hex().encode() * size)[:size]
        files[f"rom/data/f{i:02d}.bin"] = f"file {i}\n".encode() + body
    return files


@pytest.fixture
def signed(tmp_path: Path, signer: cw.Signer) -> tuple[Path, Path, dict[str, bytes]]:
    """A signed cartridge, the signer's public key file, and the signed bytes per path."""
    files = _files()
    cart = cw.build_cartridge(tmp_path / "cart.acx", files, signer=signer, publisher=PUBLISHER)
    key = tmp_path / "signer.pub.pem"
    key.write_text(signer.public_pem)
    return cart, key, files


def read_or_errno(path: Path) -> bytes | int:
    try:
        return path.read_bytes()
    except OSError as exc:
        return exc.errno or -1


def assert_only_signed_bytes_or_eio(mnt: Path, files: dict[str, bytes]) -> dict[str, int]:
    """Read every file: each gives exactly its signed bytes or EIO. Returns the counts."""
    counts = {"signed": 0, "EIO": 0}
    for name, signed_bytes in files.items():
        got = read_or_errno(mnt / name)
        if isinstance(got, int):
            assert got == errno.EIO, f"{name}: {errno.errorcode.get(got, got)}, not EIO"
            counts["EIO"] += 1
        else:
            assert got == signed_bytes, f"{name}: {len(got)} bytes that are not the signed bytes"
            counts["signed"] += 1
    return counts


@contextlib.contextmanager
def live_mount(cart: Path, mnt: Path, *options: object) -> Iterator[mounting.Mount]:
    with mounting.mounted(cart, mnt, *options) as live:
        yield live


def _fault_truncate(cart: Path, other: Path) -> None:
    os.truncate(cart, cart.stat().st_size // 2)


def _fault_overwrite_random(cart: Path, other: Path) -> None:
    size = cart.stat().st_size
    with open(cart, "r+b") as handle:  # the same inode: what the daemon's connections see
        handle.seek(4096)  # keep the header page: a valid-looking, wrong database
        handle.write(random.Random(9).randbytes(size - 4096))


def _fault_overwrite_other_cartridge(cart: Path, other: Path) -> None:
    """Same layout and sizes, other bytes, validly signed by another key: the hardest case."""
    with open(cart, "r+b") as handle:
        handle.write(other.read_bytes())
        handle.truncate()


def _fault_replace_by_rename(cart: Path, other: Path) -> None:
    os.replace(other, cart)  # a new inode under the same name


def _fault_delete(cart: Path, other: Path) -> None:
    cart.unlink()


FAULTS = {
    "truncated": _fault_truncate,
    "overwritten with random bytes": _fault_overwrite_random,
    "overwritten with another signed cartridge": _fault_overwrite_other_cartridge,
    "replaced by rename": _fault_replace_by_rename,
    "deleted": _fault_delete,
}


@pytest.mark.parametrize("fault", sorted(FAULTS))
def test_cartridge_changed_under_live_mount_serves_verified_bytes_or_eio(
    tmp_path: Path, signed: tuple[Path, Path, dict[str, bytes]], other_signer: cw.Signer,
    fault: str,
) -> None:
    cart, key, files = signed
    # the attacker's file: same names and sizes, different bytes, signed by another key
    twisted = {name: bytes(b ^ 0x5A for b in data) for name, data in files.items()}
    other = cw.build_cartridge(tmp_path / "other.acx", twisted, signer=other_signer,
                               publisher=PUBLISHER)
    names = sorted(files)
    read_before = names[: len(names) // 2]  # verified (and cached) before the fault
    with live_mount(cart, tmp_path / "mnt", "--trust-key", key) as live:
        for name in read_before:
            assert (live.mountpoint / name).read_bytes() == files[name]
        FAULTS[fault](cart, other)
        counts = assert_only_signed_bytes_or_eio(live.mountpoint, files)
        for name in read_before:  # verified bytes stay the verified bytes
            assert (live.mountpoint / name).read_bytes() == files[name]
        assert mounting.pid_alive(live.pid), "the daemon died"
        assert os.listdir(live.mountpoint) == ["rom"]
    # mounted() unmounted with `acxfs umount` and checked the daemon exited
    print(f"{fault}: {counts}")  # shown with -s: the figures docs/security.md quotes
    assert counts["signed"] >= len(read_before)
    if fault != "deleted" and fault != "replaced by rename":
        assert counts["EIO"] >= 1, "a damaged cartridge served every unread file"


def test_sigkill_then_umount_clears_the_stale_mount(
    tmp_path: Path, signed: tuple[Path, Path, dict[str, bytes]]
) -> None:
    cart, key, files = signed
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    done = mounting.acxfs("mount", cart, mnt, "--trust-key", key)
    assert done.returncode == 0, done.stderr
    pid = mounting.daemon_pid(mnt, done.stderr)
    assert pid is not None
    try:
        name = sorted(files)[0]
        assert (mnt / name).read_bytes() == files[name]
        os.kill(pid, signal.SIGKILL)
        assert mounting.wait_for(lambda: not mounting.pid_alive(pid), 10)
        with pytest.raises(OSError) as stale:
            os.listdir(mnt)  # attrs and pages are cached (no-open mode); a listing is not
        # "Transport endpoint is not connected", or ECONNABORTED when the listing reached the
        # kernel before it had finished tearing the dead daemon's connection down
        assert stale.value.errno in (errno.ENOTCONN, errno.ECONNABORTED)
        assert "STALE" in mounting.status_line(mnt)
        cleared = mounting.acxfs("umount", mnt)
        assert cleared.returncode == 0, cleared.stderr
        assert not mounting.mount_rows(mnt)
        assert mounting.status_entry(mnt) == []
        assert os.listdir(mnt) == []  # a plain, empty directory again
        # and it mounts again in the same place
        with live_mount(cart, mnt, "--trust-key", key) as live:
            assert (live.mountpoint / name).read_bytes() == files[name]
    finally:
        mounting.force_cleanup(mnt, pid)


def test_sigterm_during_heavy_reads_unmounts_cleanly(tmp_path: Path) -> None:
    cart, key = _stress_cartridge(tmp_path, seed=3, files=400)
    mnt = tmp_path / "mnt"
    done = mounting.acxfs("mount", cart, mnt, "--trust-key", key)  # acxfs creates mnt
    assert done.returncode == 0, done.stderr
    pid = mounting.daemon_pid(mnt, done.stderr)
    assert pid is not None
    outcome: dict[str, object] = {}
    try:
        import threading

        def load() -> None:
            outcome["result"] = stress.run_readers(str(mnt), 3, 400, 1, 4.0, 2, 4)

        readers = threading.Thread(target=load)
        readers.start()
        def reading() -> bool:  # in the middle of the reads: the daemon has served many
            stats = json.loads(mounting.read_xattr(mnt, "user.acx.stats"))
            return bool(stats["blobs_inflated"] >= 100)

        assert mounting.wait_for(reading, 30, step=0.05), "the readers never got going"
        os.kill(pid, signal.SIGTERM)
        assert mounting.wait_for(lambda: not mounting.pid_alive(pid), 15), "daemon still up"
        readers.join(60)
        assert not readers.is_alive(), "a reader hung after the daemon stopped"
        assert not mounting.mount_rows(mnt), "SIGTERM left the mount behind"
        assert not mnt.exists(), "the mountpoint acxfs created was not removed"
        assert mounting.status_entry(mnt) == []
        assert mounting.processes_mentioning(mounting.canonical(mnt)) == []
    finally:
        mounting.force_cleanup(mnt, pid)
    totals, mismatches = cast(tuple[dict[str, int], list[Any]], outcome["result"])
    assert mismatches == [] and totals["mismatched_bytes"] == 0
    assert totals["read"] > 0
    # after the stop: ENOENT (mountpoint gone) or ENOTCONN, or a read cut short by the stop
    # (right bytes, fewer of them); never wrong bytes
    assert set(k for k in totals if k.startswith("error:")) <= {
        "error:ENOENT", "error:ENOTCONN", "error:EIO", "error:ECONNABORTED", "error:SHORT"}


@contextlib.contextmanager
def tiny_tmpfs(path: Path, size: str = "1m") -> Iterator[Path]:
    """A 1 MiB tmpfs (root only): a spill directory that is full at the first large file."""
    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root")
    path.mkdir()
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(path)],
                          capture_output=True, text=True, check=False)
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.strip()}")
    try:
        yield path
    finally:
        subprocess.run(["umount", "-l", str(path)], capture_output=True, check=False)


@pytest.fixture
def spill_cartridge(tmp_path: Path, signer: cw.Signer) -> tuple[Path, Path, dict[str, bytes]]:
    rng = random.Random(11)
    files = {"rom/data/huge.bin": rng.randbytes(SPILL_BYTES + 1024 * 1024),
             "rom/data/small.txt": b"small verified file\n"}
    cart = cw.build_cartridge(tmp_path / "spill.acx", files, signer=signer, deflate="none")
    key = tmp_path / "signer.pub.pem"
    key.write_text(signer.public_pem)
    return cart, key, files


def test_full_spill_directory_gives_eio_and_no_partial_bytes(
    tmp_path: Path, spill_cartridge: tuple[Path, Path, dict[str, bytes]]
) -> None:
    cart, key, files = spill_cartridge
    with tiny_tmpfs(tmp_path / "spill") as spill:
        env = dict(os.environ, TMPDIR=str(spill))
        mnt = tmp_path / "mnt"
        mnt.mkdir()
        done = mounting.acxfs("mount", cart, mnt, "--trust-key", key, env=env)
        assert done.returncode == 0, done.stderr
        pid = mounting.daemon_pid(mnt, done.stderr)
        try:
            huge = mnt / "rom/data/huge.bin"
            with pytest.raises(OSError) as failed:
                open(huge, "rb").read()  # noqa: SIM115 - the open itself must fail
            assert failed.value.errno == errno.EIO
            assert (mnt / "rom/data/small.txt").read_bytes() == files["rom/data/small.txt"]
            assert os.stat(huge).st_size == len(files["rom/data/huge.bin"])  # metadata only
            assert mounting.pid_alive(pid or 0), "the daemon died on a full disk"
            assert os.statvfs(spill).f_bfree == os.statvfs(spill).f_blocks, (
                "the failed spill file was left behind")
            log = Path(os.environ["XDG_STATE_HOME"]) / "acxfs" / "acxfs.log"
            assert "No space left on device" in log.read_text()
        finally:
            problems = mounting.unmount(mnt, pid)
        assert problems == []
        # with space again, a new mount serves the same file verified (spill on a real disk)
    with live_mount(cart, tmp_path / "mnt2", "--trust-key", key) as live:
        assert (live.mountpoint / "rom/data/huge.bin").read_bytes() == files["rom/data/huge.bin"]


def test_full_spill_directory_cat_is_one_error_line(
    tmp_path: Path, spill_cartridge: tuple[Path, Path, dict[str, bytes]]
) -> None:
    cart, key, _ = spill_cartridge
    with tiny_tmpfs(tmp_path / "spill") as spill:
        env = dict(os.environ, TMPDIR=str(spill))
        done = mounting.run([*mounting.acxfs_command(), "cat", cart, "rom/data/huge.bin",
                             "--trust-key", key], env=env)
    assert done.stdout == ""  # no partial bytes in any case
    assert "Traceback" not in done.stderr, done.stderr
    assert done.returncode == 2 and done.stderr.startswith("acxfs: error:")


def test_stress_short_bounded_run(tmp_path: Path) -> None:
    """1,000 files, 8 reader threads in 4 processes, 5 s: zero errors, zero wrong bytes."""
    cart, key = _stress_cartridge(tmp_path, seed=1, files=1000)
    summary = stress.stress(cart, key, tmp_path / "mnt", seed=1, files=1000, big=1,
                            seconds=5.0, processes=4, threads=2)
    assert summary["error_count"] == 0, summary["errors"]
    assert summary["mismatched_bytes"] == 0 and summary["mismatches"] == []
    assert summary["ops"] > 100
    assert summary["daemon_alive_after_load"]
    assert summary["rss_bounded"], summary


def test_tampered_bytes_are_never_in_the_kernel_cache(
    tmp_path: Path, signed: tuple[Path, Path, dict[str, bytes]]
) -> None:
    """A file that failed once keeps failing (no half-verified pages stay readable)."""
    cart, key, files = signed
    name = sorted(files)[1]
    import sqlite3

    with contextlib.closing(sqlite3.connect(cart)) as conn:
        conn.execute("UPDATE sqlar SET data=CAST(zeroblob(length(data)) AS BLOB) WHERE name=?",
                     (name,))
        conn.commit()
    with live_mount(cart, tmp_path / "mnt", "--trust-key", key) as live:
        for _ in range(3):
            assert read_or_errno(live.mountpoint / name) == errno.EIO
        with open(live.mountpoint / sorted(files)[0], "rb") as good:
            assert hashlib.sha256(good.read()).digest() == hashlib.sha256(
                files[sorted(files)[0]]).digest()
