"""The peers compared with acxfs: a plain directory, `sqlite3 -Ax` extraction, and the FUSE
filesystems (ratarmount, fuse-zip, the do-nothing nullfs, acxfs on libfuse2, on libfuse3, and
on its own binding of libfuse3's low-level API).

Each peer probes whether it can run here (`absent` says why not) and gives a dataset's tree as
a `Mount`; FUSE peers mount afresh for every cold run and unmount on leaving `mounted()`.
"""

from __future__ import annotations

import contextlib
import math
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from scripts.bench.config import PEER_NAMES
from scripts.bench.context import BenchError, Context
from scripts.bench.datasets import Dataset
from scripts.bench.system import (
    ACTIVE_MOUNTS,
    fusermount_u,
    install_apt,
    run_checked,
    tool,
    try_drop_caches,
    wait_gone,
    wait_ready,
)
from scripts.liveness import daemon_pid_from_argv, is_mounted

NULLFS = Path(__file__).resolve().parent.parent / "nullfs.py"


@dataclass
class Mount:
    """Where a dataset's rom/ tree is visible, and the daemon serving it (if any)."""

    root: Path
    pid: int | None = None
    ready_s: float = math.nan
    proc: subprocess.Popen[bytes] | None = None


class Peer:
    """A way to read a dataset. FUSE peers mount freshly for every cold run."""

    name = ""
    fuse = True

    def __init__(self, ctx: Context) -> None:
        self.ctx = ctx
        self.absent: str | None = None

    def probe(self) -> None:
        """Set `absent` to the reason this peer cannot run here (installing when asked)."""

    def prepare(self, ds: Dataset) -> None:
        """One-time work before the first mount of `ds`."""

    def _mount(self, ds: Dataset) -> Mount:
        raise NotImplementedError

    def _unmount(self, mount: Mount) -> None:
        fusermount_u(mount.root)
        ACTIVE_MOUNTS.discard(str(mount.root))
        wait_gone(mount.pid)

    def mountpoint(self, ds: Dataset) -> Path:
        slug = self.name.replace(" ", "").replace("-", "")
        path = self.ctx.cfg.work / "mnt" / f"{slug}-{ds.name}"
        if is_mounted(path):
            fusermount_u(path)
        path.mkdir(parents=True, exist_ok=True)
        return path

    @contextlib.contextmanager
    def mounted(self, ds: Dataset, cold: bool) -> Iterator[Mount]:
        if cold and self.ctx.drop_caches:
            try_drop_caches()
        mount = self._mount(ds)
        try:
            yield mount
        finally:
            if self.fuse:
                self._unmount(mount)


class PlainPeer(Peer):
    name = "plain"
    fuse = False

    def _mount(self, ds: Dataset) -> Mount:
        return Mount(ds.root)


class ExtractPeer(Peer):
    """`sqlite3 -Ax` of the .acx; the extracted tree is then read like a plain directory."""

    name = "sqlite3 -Ax"
    fuse = False

    def probe(self) -> None:
        if shutil.which("sqlite3") is None and self.ctx.cfg.install_peers:
            install_apt(self.ctx, "sqlite3")
        if shutil.which("sqlite3") is None:
            self.absent = "sqlite3 CLI not installed (apt-get install sqlite3)"

    def target(self, ds: Dataset) -> Path:
        return self.ctx.cfg.work / "extract" / ds.name

    def extract(self, ds: Dataset) -> float:
        target = self.target(ds)
        shutil.rmtree(target, ignore_errors=True)
        target.mkdir(parents=True)
        start = time.perf_counter()
        run_checked(["sqlite3", "-readonly", str(ds.acx), "-A", "-x", "-C", str(target)],
                    timeout=self.ctx.cfg.timeout)
        return time.perf_counter() - start

    def prepare(self, ds: Dataset) -> None:
        if not (self.target(ds) / ds.files[-1]).exists():
            self.extract(ds)

    def _mount(self, ds: Dataset) -> Mount:
        self.prepare(ds)
        return Mount(self.target(ds))


class DaemonPeer(Peer):
    """A FUSE daemon started by a command; `daemonizes`: the command returns once mounted."""

    daemonizes = True

    def probe(self) -> None:
        self.absent = "/dev/fuse missing" if not os.path.exists("/dev/fuse") else self.missing()

    def missing(self) -> str | None:
        """Why this peer's program cannot run here (installing it first when asked), or None."""
        return None

    def command(self, ds: Dataset, mountpoint: Path) -> list[str]:
        raise NotImplementedError

    def _mount(self, ds: Dataset) -> Mount:
        mountpoint = self.mountpoint(ds)
        log_path = self.ctx.cfg.work / "logs" / f"{mountpoint.name}.log"
        log_path.parent.mkdir(parents=True, exist_ok=True)
        ACTIVE_MOUNTS.add(str(mountpoint))
        with open(log_path, "wb") as log:
            start = time.perf_counter()
            proc = subprocess.Popen(self.command(ds, mountpoint), env=self.ctx.env,
                                    stdin=subprocess.DEVNULL, stdout=log, stderr=log)
        try:
            if self.daemonizes:
                proc.wait(timeout=min(self.ctx.cfg.timeout, 600))
                if proc.returncode != 0:
                    raise BenchError(f"exited {proc.returncode}")
            wait_ready(mountpoint, min(self.ctx.cfg.timeout, 600), proc)
        except (BenchError, subprocess.TimeoutExpired) as exc:
            with contextlib.suppress(OSError):
                proc.kill()
            fusermount_u(mountpoint)
            ACTIVE_MOUNTS.discard(str(mountpoint))
            lines = log_path.read_text(errors="replace").strip().splitlines()
            raise BenchError(f"mount failed ({exc}): {lines[-1] if lines else 'no output'}"
                             ) from exc
        ready = time.perf_counter() - start
        pid = proc.pid if not self.daemonizes else daemon_pid_from_argv(mountpoint)
        return Mount(mountpoint, pid, ready, proc)

    def _unmount(self, mount: Mount) -> None:
        super()._unmount(mount)
        if mount.proc is not None:
            with contextlib.suppress(subprocess.TimeoutExpired):
                mount.proc.wait(timeout=30)
            if mount.proc.poll() is None:
                mount.proc.kill()
                mount.proc.wait()


class AcxfsPeer(DaemonPeer):
    """`acxfs mount` through libfuse2 (fusepy): the binding where libfuse3 is absent; the
    default elsewhere is the low-level peer's."""

    name = "acxfs"
    backend = "libfuse2"

    def missing(self) -> str | None:
        if shutil.which("acxfs") is None:
            return "the acxfs console script is not installed (pip install -e .)"
        return None

    def command(self, ds: Dataset, mountpoint: Path) -> list[str]:
        return [tool("acxfs"), "mount", str(ds.acx), str(mountpoint), "--backend", self.backend]

    def _unmount(self, mount: Mount) -> None:
        subprocess.run([tool("acxfs"), "umount", str(mount.root)], env=self.ctx.env,
                       capture_output=True, check=False, timeout=120)
        super()._unmount(mount)


class AcxfsFuse3Peer(AcxfsPeer):
    """`acxfs mount --backend libfuse3` (mfusepy's high-level API)."""

    name = "acxfs libfuse3"
    backend = "libfuse3"

    def missing(self) -> str | None:
        reason = super().missing()
        if reason is None and subprocess.run(
            [sys.executable, "-c",
             f"from acxfs.mount import backend; backend.load({self.backend!r})"],
            capture_output=True, check=False,
        ).returncode != 0:
            reason = (f"{self.backend} backend unavailable (pip install 'acxfs[fuse3]', "
                      "apt-get install libfuse3-3)")
        return reason


class AcxfsLowLevelPeer(AcxfsFuse3Peer):
    """`acxfs mount` where libfuse3 loads: its own binding of libfuse3's low-level API."""

    name = "acxfs lowlevel"
    backend = "libfuse3-lowlevel"


class RatarmountPeer(DaemonPeer):
    name = "ratarmount"

    def missing(self) -> str | None:
        if shutil.which("ratarmount") is None and self.ctx.cfg.install_peers:
            self.ctx.log("installing ratarmount (pip) ...")
            subprocess.run([sys.executable, "-m", "pip", "install", "-q", "ratarmount"],
                           capture_output=True, check=False)
        if shutil.which("ratarmount") is None:
            return "ratarmount not installed (pip install ratarmount; --install-peers)"
        return None

    def command(self, ds: Dataset, mountpoint: Path) -> list[str]:
        return [tool("ratarmount"), str(ds.acx), str(mountpoint)]


class FuseZipPeer(DaemonPeer):
    name = "fuse-zip"

    def missing(self) -> str | None:
        if shutil.which("fuse-zip") is None and self.ctx.cfg.install_peers:
            install_apt(self.ctx, "fuse-zip")
        if shutil.which("fuse-zip") is None:
            return "fuse-zip not installed (apt-get install fuse-zip; --install-peers)"
        return None

    def command(self, ds: Dataset, mountpoint: Path) -> list[str]:
        return ["fuse-zip", "-r", str(ds.zip), str(mountpoint)]


class NullPeer(DaemonPeer):
    name = "nullfs"
    daemonizes = False

    def missing(self) -> str | None:
        return None if NULLFS.exists() else f"{NULLFS} missing"

    def command(self, ds: Dataset, mountpoint: Path) -> list[str]:
        return [sys.executable, str(NULLFS), str(ds.root), str(mountpoint)]


class NullSinglePeer(NullPeer):
    name = "nullfs -s"

    def command(self, ds: Dataset, mountpoint: Path) -> list[str]:
        return [*super().command(ds, mountpoint), "--single-thread"]


PEER_CLASSES: dict[str, type[Peer]] = {
    "plain": PlainPeer, "sqlite3 -Ax": ExtractPeer, "ratarmount": RatarmountPeer,
    "fuse-zip": FuseZipPeer, "nullfs": NullPeer, "nullfs -s": NullSinglePeer,
    "acxfs": AcxfsPeer, "acxfs libfuse3": AcxfsFuse3Peer,
    "acxfs lowlevel": AcxfsLowLevelPeer,
}


def make_peers(ctx: Context) -> list[Peer]:
    peers = []
    for name in PEER_NAMES:
        peer = PEER_CLASSES[name](ctx)
        if name not in ctx.cfg.peers:
            peer.absent = "not selected (--peers)"
        else:
            peer.probe()
        peers.append(peer)
    return peers
