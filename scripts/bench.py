"""Side-by-side benchmark of acxfs and its peers on the same synthetic skills.

One command builds synthetic skill directories, packs them with `acxfs pack --sqlar-dirs`
(zlib rows, directory rows and S_IFREG bits, so ratarmount can list them), zips the same
trees for fuse-zip, and measures in the same run:

    plain        the same files in a plain directory (the floor)
    sqlite3 -Ax  extraction of the same .acx, then the extracted tree
    ratarmount   the same .acx mounted with ratarmount (no verification)
    fuse-zip     a zip of the same tree mounted with fuse-zip
    nullfs       scripts/nullfs.py: a do-nothing fusepy filesystem with the same names and
                 sizes (the libfuse2 + Python floor for open, read and release), served
                 by libfuse's worker threads as acxfs is
    nullfs -s    the same, served by libfuse's single-threaded loop (-s)
    acxfs        the same .acx mounted with acxfs (every byte verified)

Workloads (a)-(f) and `acxfs verify`; a Markdown table of medians goes to
stdout and every raw run to a JSON file.  Each cold run mounts afresh after dropping the page
cache (when root may); warm runs repeat on the same mount.  A peer that cannot run is shown
as "absent: reason", never dropped.

    python scripts/bench.py --quick                  # CI smoke test, under 3 minutes
    python scripts/bench.py --install-peers          # the full run (long: 100k-file packs)
"""

from __future__ import annotations

import argparse
import base64
import contextlib
import functools
import hashlib
import importlib.util
import json
import math
import multiprocessing
import os
import platform
import random
import shutil
import signal
import sqlite3
import statistics
import subprocess
import sys
import time
import zipfile
import zlib
from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

MiB = 1024 * 1024
SELF = Path(__file__).resolve()
NULLFS = SELF.parent / "nullfs.py"
PUBLISHER = "io.github.bench"
PEER_NAMES = ("plain", "sqlite3 -Ax", "ratarmount", "fuse-zip", "nullfs", "nullfs -s", "acxfs",
              "acxfs libfuse3")
FILES_PER_DIR = 100
STEP = 256 * 1024  # BLOB read and inflate step, as acxfs.limits.chunk_bytes
LOREM = (b"Verified bytes only: every file of a cartridge is inflated, hashed and compared with "
         b"its signed digest before the first byte is served. ") * 64


# --- configuration ------------------------------------------------------------------------


@dataclass(frozen=True)
class Config:
    """Sizes and repetitions of one run (`--quick` shrinks them)."""

    quick: bool
    work: Path
    json_path: Path
    mount_counts: tuple[int, ...]  # (a) file counts of the cartridges mounted
    listing_counts: tuple[int, ...]  # (b) file counts listed with find -ls / ls -lR
    read_count: int  # (c) and (f): small files read
    small_size: int  # bytes per small file
    big_mib: int  # (d) the large file
    alt_mib: int  # (e) each of the two alternating files
    verify_files: int  # acxfs verify --deep: reference files in one skill
    cold_reps: int  # fresh mounts per cold measurement
    warm_reps: int  # repetitions on a live mount
    timeout: float  # seconds before one measured operation counts as a timeout
    random_reads: int  # (d) random preads, and as many backwards preads
    readers: tuple[int, ...]  # (f) parallel reader counts
    install_peers: bool
    peers: tuple[str, ...]
    workloads: tuple[str, ...]
    rebuild: bool


def make_config(args: argparse.Namespace) -> Config:
    quick = bool(args.quick)
    return Config(
        quick=quick,
        work=Path(args.work).resolve(),
        json_path=Path(args.json).resolve(),
        mount_counts=(1000, 5000) if quick else (1000, 10_000, 100_000),
        listing_counts=(5000,) if quick else (10_000, 100_000),
        read_count=1000 if quick else 10_000,
        small_size=4096,
        big_mib=32 if quick else 256,
        alt_mib=16 if quick else 128,
        verify_files=5000,
        cold_reps=args.reps or (1 if quick else 3),
        warm_reps=args.reps or (1 if quick else 3),
        timeout=30.0 if quick else 600.0,
        random_reads=200 if quick else 1000,
        readers=(2, 4),
        install_peers=bool(args.install_peers),
        peers=tuple(args.peers.split(",")) if args.peers else PEER_NAMES,
        workloads=tuple(args.workloads.split(",")) if args.workloads else tuple("abcdefvp"),
        rebuild=bool(args.rebuild),
    )


# --- results ------------------------------------------------------------------------------


@dataclass
class Cell:
    """One peer's runs of one row; `note` replaces the value when nothing was measured."""

    values: list[float] = field(default_factory=list)
    note: str = ""

    @property
    def median(self) -> float | None:
        return statistics.median(self.values) if self.values else None


@dataclass
class Row:
    key: str
    label: str
    unit: str
    cells: dict[str, Cell] = field(default_factory=dict)

    def median(self, peer: str) -> float | None:
        cell = self.cells.get(peer)
        return cell.median if cell else None


@dataclass
class Target:
    """One performance goal and whether this run meets it (None: cannot tell)."""

    goal: str
    figure: str
    met: bool | None


@dataclass
class Table:
    rows: dict[str, Row] = field(default_factory=dict)

    def row(self, key: str, label: str, unit: str) -> Row:
        if key not in self.rows:
            self.rows[key] = Row(key, label, unit)
        return self.rows[key]

    def get(self, key: str) -> Row | None:
        return self.rows.get(key)


class BenchError(Exception):
    """A measurement could not be taken (mount failed, command failed)."""


class OpTimeout(BenchError):
    """A measured operation ran past the configured timeout."""


@dataclass
class Context:
    cfg: Config
    env: dict[str, str]
    table: Table
    drop_caches: bool
    drop_note: str
    log: Callable[[str], None]
    revision: str = "unknown"


# --- system helpers -----------------------------------------------------------------------


ACTIVE_MOUNTS: set[str] = set()


def try_drop_caches() -> tuple[bool, str]:
    """Flush and drop the page cache; (False, reason) where that is not allowed."""
    try:
        os.sync()
        with open("/proc/sys/vm/drop_caches", "w", encoding="ascii") as handle:
            handle.write("3\n")
        return True, "page cache dropped before every cold run"
    except OSError as exc:
        return False, f"page cache NOT dropped (/proc/sys/vm/drop_caches: {exc.strerror})"


def is_mounted(path: Path) -> bool:
    target = str(path)
    with open("/proc/mounts", encoding="utf-8") as handle:
        for line in handle:
            parts = line.split()
            if len(parts) > 1 and parts[1].replace("\\040", " ") == target:
                return True
    return False


def wait_ready(path: Path, timeout: float, proc: subprocess.Popen[bytes] | None = None) -> None:
    """Until `path` is a mount whose root can be listed."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if is_mounted(path):
            with contextlib.suppress(OSError):
                os.listdir(path)
                return
        if proc is not None and proc.poll() is not None:
            raise BenchError(f"the daemon exited with {proc.returncode} before mounting")
        time.sleep(0.002)
    raise BenchError(f"{path} not mounted after {timeout:.0f} s")


def daemon_pid(mountpoint: Path) -> int | None:
    """The live process whose command line names `mountpoint` (the FUSE daemon)."""
    target = str(mountpoint).encode()
    best: tuple[int, int] | None = None
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as handle:
                args = handle.read().split(b"\0")
            rss = status_kib(int(entry), "VmRSS")
        except OSError:
            continue
        if target in args and rss is not None and (best is None or rss > best[1]):
            best = (int(entry), rss)
    return best[0] if best else None


def status_kib(pid: int, field_name: str) -> int | None:
    try:
        with open(f"/proc/{pid}/status", encoding="ascii") as handle:
            for line in handle:
                if line.startswith(field_name + ":"):
                    return int(line.split()[1])
    except OSError:
        return None
    return None


def peak_rss_mib(pid: int | None) -> float | None:
    if pid is None:
        return None
    kib = status_kib(pid, "VmHWM")
    return None if kib is None else kib / 1024


def pid_alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii") as handle:
            return handle.read().split(") ", 1)[1][:1] != "Z"
    except OSError:
        return False


def fusermount_u(path: Path) -> None:
    """Unmount a FUSE mount; lazily when a plain unmount is refused."""
    for args in (["fusermount", "-u", str(path)], ["fusermount", "-uz", str(path)]):
        if not is_mounted(path):
            return
        subprocess.run(args, capture_output=True, check=False, timeout=60)
        deadline = time.monotonic() + 5
        while is_mounted(path) and time.monotonic() < deadline:
            time.sleep(0.01)


def wait_gone(pid: int | None, timeout: float = 30.0) -> None:
    if pid is None:
        return
    deadline = time.monotonic() + timeout
    while pid_alive(pid) and time.monotonic() < deadline:
        time.sleep(0.01)
    if pid_alive(pid):
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGKILL)


def cleanup_mounts() -> None:
    """Last resort (atexit): never leave a mount behind."""
    for path in list(ACTIVE_MOUNTS):
        fusermount_u(Path(path))
        ACTIVE_MOUNTS.discard(path)


def run_checked(args: Sequence[str], env: dict[str, str] | None = None,
                cwd: Path | None = None, timeout: float = 3600) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(list(args), env=env, cwd=cwd, capture_output=True, text=True,
                          check=False, timeout=timeout)
    if done.returncode != 0:
        detail = (done.stderr or done.stdout).strip().splitlines()
        raise BenchError(f"{Path(args[0]).name} exited {done.returncode}: "
                         f"{detail[-1] if detail else ''}")
    return done


def tool(name: str) -> str:
    """The executable beside this interpreter when there is one (skips pyenv's shims)."""
    beside = Path(sys.executable).parent / name
    if beside.is_file() and os.access(beside, os.X_OK):
        return str(beside)
    return shutil.which(name) or name


def timed_command(ctx: Context, args: Sequence[str], cwd: Path | None = None) -> float:
    start = time.perf_counter()
    try:
        done = subprocess.run(list(args), cwd=cwd, stdout=subprocess.DEVNULL,
                              stderr=subprocess.PIPE, check=False, timeout=ctx.cfg.timeout,
                              env=ctx.env)
    except subprocess.TimeoutExpired as exc:
        raise OpTimeout(f"timeout > {ctx.cfg.timeout:.0f} s") from exc
    elapsed = time.perf_counter() - start
    if done.returncode != 0:
        raise BenchError(f"{args[0]} exited {done.returncode}: "
                         f"{done.stderr.decode(errors='replace').strip()[-200:]}")
    return elapsed


# --- synthetic data -----------------------------------------------------------------------


@dataclass
class Dataset:
    """One skill as a plain tree (root/rom/skills/<skill>/...), its .acx and its .zip."""

    name: str
    skill: str
    root: Path
    acx: Path
    zip: Path
    files: list[str]  # paths relative to root, in generation order
    total_bytes: int
    build: dict[str, float] = field(default_factory=dict)  # seconds: generate, pack, zip

    @property
    def skill_dir(self) -> Path:
        return self.root / "rom" / "skills" / self.skill

    def path(self, rel: str) -> str:
        return f"rom/skills/{self.skill}/{rel}"


def count_label(count: int) -> str:
    return f"{count // 1000}k" if count % 1000 == 0 and count >= 1000 else str(count)


def skill_md(skill: str, what: str) -> bytes:
    return (f"---\nname: {skill}\ndescription: Synthetic benchmark skill with {what}.\n---\n"
            f"# {skill}\n\nGenerated by scripts/bench.py; every file content is unique.\n"
            ).encode()


def small_file(rng: random.Random, rel: str, size: int) -> bytes:
    """Unique, about half compressible: a header, base64 noise, then repeated prose."""
    head = f"# {rel}\n\n".encode()
    noise = base64.b64encode(rng.randbytes(size * 3 // 8))
    return (head + noise + b"\n\n" + LOREM * (1 + size // len(LOREM)))[:size]


def write_big(path: Path, mib: int, seed: int) -> None:
    """`mib` MiB, each MiB half random bytes and half repeated prose (half compressible)."""
    rng = random.Random(seed)
    prose = (LOREM * (1 + (MiB // 2) // len(LOREM)))[: MiB // 2]
    with open(path, "wb") as handle:
        for _ in range(mib):
            handle.write(rng.randbytes(MiB // 2))
            handle.write(prose)


def build_dataset(ctx: Context, name: str, skill: str,
                  fill: Callable[[Path], list[str]]) -> Dataset:
    """Generate (or reuse) the plain tree, then pack it and zip it, timing each step."""
    base = ctx.cfg.work / "data" / name
    marker = base / "dataset.json"
    if marker.exists() and not ctx.cfg.rebuild:
        doc = json.loads(marker.read_text())
        ds = Dataset(name, skill, Path(doc["root"]), Path(doc["acx"]), Path(doc["zip"]),
                     doc["files"], doc["total_bytes"], doc["build"])
        if ds.acx.exists() and ds.zip.exists():
            ctx.log(f"reusing {name} ({len(ds.files)} files; built earlier)")
            return ds
    shutil.rmtree(base, ignore_errors=True)
    root = base / "plain"
    skill_dir = root / "rom" / "skills" / skill
    skill_dir.mkdir(parents=True)
    ctx.log(f"generating {name} ...")
    start = time.perf_counter()
    rels = fill(skill_dir)
    files = ["SKILL.md", *rels]
    gen = time.perf_counter() - start
    total = sum((skill_dir / rel).stat().st_size for rel in files)
    ds = Dataset(name, skill, root, base / f"{name}.acx", base / f"{name}.zip",
                 [f"rom/skills/{skill}/{rel}" for rel in files], total)
    ds.build["generate"] = gen
    ctx.log(f"packing {name} with acxfs pack --sqlar-dirs ...")
    start = time.perf_counter()
    run_checked([tool("acxfs"), "pack", str(skill_dir), "-o", str(ds.acx), "--publisher", PUBLISHER,
                 "--sqlar-dirs"], env=ctx.env)
    ds.build["pack"] = time.perf_counter() - start
    start = time.perf_counter()
    write_zip(ds)
    ds.build["zip"] = time.perf_counter() - start
    doc = {"root": str(ds.root), "acx": str(ds.acx), "zip": str(ds.zip), "files": ds.files,
           "total_bytes": ds.total_bytes, "build": ds.build}
    marker.write_text(json.dumps(doc))
    return ds


def write_zip(ds: Dataset) -> None:
    with zipfile.ZipFile(ds.zip, "w", zipfile.ZIP_DEFLATED, compresslevel=6) as archive:
        for rel in ds.files:
            archive.write(ds.root / rel, rel)


def small_tree(count: int, size: int, seed: int) -> Callable[[Path], list[str]]:
    def fill(skill_dir: Path) -> list[str]:
        rng = random.Random(seed)
        (skill_dir / "SKILL.md").write_bytes(skill_md(skill_dir.name, f"{count} files"))
        rels = []
        for i in range(count):
            rel = f"references/d{i // FILES_PER_DIR:04d}/f{i:06d}.md"
            if i % FILES_PER_DIR == 0:
                (skill_dir / rel).parent.mkdir(parents=True)
            (skill_dir / rel).write_bytes(small_file(rng, rel, size))
            rels.append(rel)
        return rels

    return fill


def big_tree(big_mib: int, alt_mib: int) -> Callable[[Path], list[str]]:
    def fill(skill_dir: Path) -> list[str]:
        (skill_dir / "SKILL.md").write_bytes(skill_md(skill_dir.name, "large files"))
        (skill_dir / "assets").mkdir()
        write_big(skill_dir / "assets" / "big.bin", big_mib, 1)
        write_big(skill_dir / "assets" / "alt-a.bin", alt_mib, 2)
        write_big(skill_dir / "assets" / "alt-b.bin", alt_mib, 3)
        return ["assets/big.bin", "assets/alt-a.bin", "assets/alt-b.bin"]

    return fill


@dataclass
class Datasets:
    small: dict[int, Dataset]
    big: Dataset | None
    verify: Dataset | None


def build_datasets(ctx: Context) -> Datasets:
    cfg = ctx.cfg
    wanted: set[int] = set()
    if "a" in cfg.workloads:
        wanted.update(cfg.mount_counts)
    if "b" in cfg.workloads:
        wanted.update(cfg.listing_counts)
    if {"c", "f"} & set(cfg.workloads):
        wanted.add(cfg.read_count)
    small = {}
    for count in sorted(wanted):
        label = count_label(count)
        small[count] = build_dataset(ctx, f"files-{label}", f"bench-{label}",
                                     small_tree(count, cfg.small_size, count))
    big = None
    if {"d", "e"} & set(cfg.workloads):
        big = build_dataset(ctx, f"big-{cfg.big_mib}m", "bench-big",
                            big_tree(cfg.big_mib, cfg.alt_mib))
    verify = None
    if "v" in cfg.workloads and cfg.verify_files in small:
        verify = small[cfg.verify_files]  # one skill with that many files already
    elif "v" in cfg.workloads:
        label = count_label(cfg.verify_files)
        verify = build_dataset(ctx, f"verify-{label}", f"bench-verify-{label}",
                               small_tree(cfg.verify_files, cfg.small_size, 77))
    return Datasets(small, big, verify)


# --- peers --------------------------------------------------------------------------------


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
        pid = proc.pid if not self.daemonizes else daemon_pid(mountpoint)
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
    name = "acxfs"

    def missing(self) -> str | None:
        if shutil.which("acxfs") is None:
            return "the acxfs console script is not installed (pip install -e .)"
        return None

    def command(self, ds: Dataset, mountpoint: Path) -> list[str]:
        return [tool("acxfs"), "mount", str(ds.acx), str(mountpoint)]

    def _unmount(self, mount: Mount) -> None:
        subprocess.run([tool("acxfs"), "umount", str(mount.root)], env=self.ctx.env,
                       capture_output=True, check=False, timeout=120)
        super()._unmount(mount)


class AcxfsFuse3Peer(AcxfsPeer):
    name = "acxfs libfuse3"

    def missing(self) -> str | None:
        reason = super().missing()
        if reason is None and subprocess.run(
            [sys.executable, "-c", "from acxfs.mount import backend; backend.load('libfuse3')"],
            capture_output=True, check=False,
        ).returncode != 0:
            reason = ("libfuse3 backend unavailable (pip install 'acxfs[fuse3]', "
                      "apt-get install libfuse3-3)")
        return reason

    def command(self, ds: Dataset, mountpoint: Path) -> list[str]:
        return [*super().command(ds, mountpoint), "--backend", "libfuse3"]


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


def install_apt(ctx: Context, package: str) -> None:
    ctx.log(f"installing {package} (apt-get) ...")
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    subprocess.run(["apt-get", "update", "-qq"], capture_output=True, check=False, env=env)
    subprocess.run(["apt-get", "install", "-y", "-qq", package], capture_output=True,
                   check=False, env=env)


PEER_CLASSES: dict[str, type[Peer]] = {
    "plain": PlainPeer, "sqlite3 -Ax": ExtractPeer, "ratarmount": RatarmountPeer,
    "fuse-zip": FuseZipPeer, "nullfs": NullPeer, "nullfs -s": NullSinglePeer,
    "acxfs": AcxfsPeer, "acxfs libfuse3": AcxfsFuse3Peer,
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


# --- worker processes (each measured operation runs in its own process) -------------------


def op_walk(root: str) -> dict[str, float]:
    """Walk `root` and read every file to its end, in one process."""
    start = time.perf_counter()
    files = size = 0
    for dirpath, _dirs, names in os.walk(root):
        for name in names:
            with open(os.path.join(dirpath, name), "rb", buffering=0) as handle:
                while chunk := handle.read(MiB):
                    size += len(chunk)
            files += 1
    return {"seconds": time.perf_counter() - start, "files": files, "bytes": size}


def op_first_byte(path: str) -> dict[str, float]:
    start = time.perf_counter()
    fd = os.open(path, os.O_RDONLY)
    try:
        got = len(os.read(fd, 4096))
    finally:
        os.close(fd)
    return {"seconds": time.perf_counter() - start, "bytes": got}


def op_sequential(path: str) -> dict[str, float]:
    start = time.perf_counter()
    size = 0
    with open(path, "rb", buffering=0) as handle:
        while chunk := handle.read(MiB):
            size += len(chunk)
    return {"seconds": time.perf_counter() - start, "bytes": size}


def op_random(path: str, count: int) -> dict[str, float]:
    """`count` 4 KiB preads at random offsets, then `count` going backwards over the file."""
    fd = os.open(path, os.O_RDONLY)
    try:
        size = os.fstat(fd).st_size
        blocks = max(1, size // 4096)
        rng = random.Random(5)
        offsets = [rng.randrange(blocks) * 4096 for _ in range(count)]
        stride = max(1, blocks // count)
        offsets += [(blocks - 1 - i * stride) * 4096 for i in range(count) if i * stride < blocks]
        start = time.perf_counter()
        for offset in offsets:
            if len(os.pread(fd, 4096, offset)) != min(4096, size - offset):
                raise OSError(f"short read at {offset}")
        return {"seconds": time.perf_counter() - start, "reads": len(offsets)}
    finally:
        os.close(fd)


def op_alternate(first: str, second: str) -> dict[str, float]:
    """Read two files alternately, 1 MiB from each in turn, to the end of both."""
    start = time.perf_counter()
    size = 0
    with open(first, "rb", buffering=0) as a, open(second, "rb", buffering=0) as b:
        live = [a, b]
        while live:
            for handle in list(live):
                chunk = handle.read(MiB)
                size += len(chunk)
                if not chunk:
                    live.remove(handle)
    return {"seconds": time.perf_counter() - start, "bytes": size}


def _read_shard(paths: list[str], gate: Any) -> None:
    gate.wait()
    for path in paths:
        with open(path, "rb", buffering=0) as handle:
            while handle.read(MiB):
                pass


def op_parallel(root: str, list_file: str, readers: int) -> dict[str, float]:
    """`readers` processes, each reading every readers-th file of the list."""
    with open(list_file, encoding="utf-8") as handle:
        paths = [os.path.join(root, line.rstrip("\n")) for line in handle if line.strip()]
    mp = multiprocessing.get_context("fork")
    gate = mp.Event()
    procs = [mp.Process(target=_read_shard, args=(paths[i::readers], gate))
             for i in range(readers)]
    for proc in procs:
        proc.start()
    start = time.perf_counter()
    gate.set()
    for proc in procs:
        proc.join()
    elapsed = time.perf_counter() - start
    if any(proc.exitcode != 0 for proc in procs):
        raise OSError("a reader failed")
    return {"seconds": elapsed, "files": len(paths)}


WORKER_OPS: dict[str, Callable[..., dict[str, float]]] = {
    "walk": op_walk, "first_byte": op_first_byte, "sequential": op_sequential,
    "random": op_random, "alternate": op_alternate, "parallel": op_parallel,
}


def worker_main(spec: str) -> int:
    doc = json.loads(spec)
    op = WORKER_OPS[doc.pop("op")]
    print(json.dumps(op(**doc)))
    return 0


def in_worker(ctx: Context, op: str, **args: Any) -> dict[str, float]:
    """Run one operation in a fresh process (killed at the timeout); its own timing."""
    spec = json.dumps({"op": op, **args})
    try:
        done = subprocess.run([sys.executable, str(SELF), "--worker", spec], capture_output=True,
                              text=True, timeout=ctx.cfg.timeout, check=False)
    except subprocess.TimeoutExpired as exc:
        raise OpTimeout(f"timeout > {ctx.cfg.timeout:.0f} s") from exc
    if done.returncode != 0:
        lines = done.stderr.strip().splitlines()
        raise BenchError(f"{op} failed: {lines[-1] if lines else done.returncode}")
    result: dict[str, float] = json.loads(done.stdout)
    return result


# --- measuring ----------------------------------------------------------------------------


Op = Callable[[Mount], float]


def record(ctx: Context, peer: Peer, rows: Sequence[Row],
           measure: Callable[[], Sequence[list[float]]]) -> None:
    """Fill `peer`'s cell in each row with the lists `measure` returns (or why it could not)."""
    if peer.absent:
        for row in rows:
            row.cells[peer.name] = Cell(note=f"absent: {peer.absent}")
        return
    ctx.log(f"  {peer.name}: {rows[0].label}")
    try:
        results = measure()
    except Exception as exc:  # any failure becomes the cell's note; the run goes on
        text = str(exc) if isinstance(exc, BenchError) else f"error: {type(exc).__name__}: {exc}"
        for row in rows:
            row.cells[peer.name] = Cell(note=text[:160])
        ctx.log(f"    {text}")
        return
    for row, values in zip(rows, results, strict=True):
        row.cells[peer.name] = Cell(values=values)


def not_applicable(rows: Sequence[Row], peer: Peer, why: str = "n/a") -> None:
    for row in rows:
        row.cells[peer.name] = Cell(note=f"absent: {peer.absent}" if peer.absent else why)


def cold_and_warm(ctx: Context, peer: Peer, ds: Dataset, op: Op) -> tuple[list[float],
                                                                          list[float]]:
    """`cold_reps` fresh mounts (page cache dropped first), each followed by warm repeats."""
    cold: list[float] = []
    warm: list[float] = []
    per_mount = max(1, math.ceil(ctx.cfg.warm_reps / ctx.cfg.cold_reps))
    for _ in range(ctx.cfg.cold_reps):
        with peer.mounted(ds, cold=True) as mount:
            cold.append(op(mount))
            for _ in range(per_mount):
                warm.append(op(mount))
    return cold, warm


def wl_mount(ctx: Context, peers: list[Peer], data: Datasets) -> None:
    """(a) mount until the root can be listed, archive cold and warm; daemon peak RSS."""
    for count in ctx.cfg.mount_counts:
        ds = data.small[count]
        label = count_label(count)
        cold_row = ctx.table.row(f"a.mount.cold.{count}",
                                 f"(a) mount until ready, {label} files, archive cold", "s")
        warm_row = ctx.table.row(f"a.mount.warm.{count}",
                                 f"(a) mount until ready, {label} files, archive warm", "s")
        rss_row = ctx.table.row(f"a.rss.{count}",
                                f"(a) daemon peak RSS after mount, {label} files", "MiB")
        rows = [cold_row, warm_row, rss_row]
        for peer in peers:
            if isinstance(peer, PlainPeer | NullPeer):
                not_applicable(rows, peer, "n/a")
                continue
            if isinstance(peer, ExtractPeer):
                record(ctx, peer, rows[:2], functools.partial(extract_times, ctx, peer, ds))
                not_applicable(rows[2:], peer, "n/a")
                continue
            record(ctx, peer, rows, functools.partial(mount_times, ctx, peer, ds))


def extract_times(ctx: Context, peer: ExtractPeer, ds: Dataset) -> list[list[float]]:
    cold = []
    for _ in range(ctx.cfg.cold_reps):
        if ctx.drop_caches:
            try_drop_caches()
        cold.append(peer.extract(ds))
    return [cold, [peer.extract(ds)]]  # warm: once (extracting 100k files is slow)


def mount_times(ctx: Context, peer: Peer, ds: Dataset) -> list[list[float]]:
    cold: list[float] = []
    warm: list[float] = []
    rss: list[float] = []
    for _ in range(ctx.cfg.cold_reps):
        for is_cold, into in ((True, cold), (False, warm)):
            with peer.mounted(ds, cold=is_cold) as mount:
                into.append(mount.ready_s)
                peak = peak_rss_mib(mount.pid)
                if peak is not None:
                    rss.append(peak)
    return [cold, warm, rss]


def wl_listing(ctx: Context, peers: list[Peer], data: Datasets) -> None:
    """(b) `find -ls` and `ls -lR` over the whole mount, cold (fresh mount) and warm."""
    for count in ctx.cfg.listing_counts:
        ds = data.small[count]
        label = count_label(count)
        for tool, argv in (("find -ls", ["find", "{root}", "-ls"]),
                           ("ls -lR", ["ls", "-lR", "{root}"])):
            slug = tool.split()[0]
            rows = [ctx.table.row(f"b.{slug}.{state}.{count}",
                                  f"(b) `{tool}`, {label} files, {state}", "s")
                    for state in ("cold", "warm")]
            for peer in peers:
                def op(mount: Mount, argv: list[str] = argv) -> float:
                    return timed_command(ctx, [a.format(root=mount.root) for a in argv])

                record(ctx, peer, rows,
                       functools.partial(cold_and_warm, ctx, peer, ds, op))


def wl_read_all(ctx: Context, peers: list[Peer], data: Datasets) -> None:
    """(c) one process walks the tree and reads every file, cold and warm."""
    ds = data.small[ctx.cfg.read_count]
    label = count_label(ctx.cfg.read_count)
    size = count_label(ctx.cfg.small_size // 1024)
    rows = [ctx.table.row(f"c.read.{state}", f"(c) read all {label} x {size} KiB files "
                          f"(one process), {state}", "s") for state in ("cold", "warm")]

    def op(mount: Mount) -> float:
        return in_worker(ctx, "walk", root=str(mount.root))["seconds"]

    for peer in peers:
        record(ctx, peer, rows, functools.partial(cold_and_warm, ctx, peer, ds, op))


def wl_big(ctx: Context, peers: list[Peer], data: Datasets) -> None:
    """(d) one large file: first byte, sequential cold/warm, random and backwards preads."""
    assert data.big is not None
    ds = data.big
    rel = ds.path("assets/big.bin")
    mib = ctx.cfg.big_mib
    rows = [
        ctx.table.row("d.ttfb", f"(d) {mib} MiB file: time to first byte, cold", "s"),
        ctx.table.row("d.seq.cold", f"(d) {mib} MiB file: sequential read, cold", "MiB/s"),
        ctx.table.row("d.seq.warm", f"(d) {mib} MiB file: sequential read, warm", "MiB/s"),
        ctx.table.row("d.seq.again", f"(d) {mib} MiB file: sequential read, warm again "
                      "(pages already re-read once)", "MiB/s"),
        ctx.table.row("d.random.cold", f"(d) {mib} MiB file: {ctx.cfg.random_reads} random + "
                      f"{ctx.cfg.random_reads} backwards 4 KiB preads, cold", "s"),
        ctx.table.row("d.rss", f"(d) {mib} MiB file: daemon peak RSS", "MiB"),
    ]
    for peer in peers:
        record(ctx, peer, rows, functools.partial(big_runs, ctx, peer, ds, rel))
    floor_rows = [
        ctx.table.row("d.floor.cold", f"(d) {mib} MiB BLOB inflate+sha256 in-process "
                      "(floor for cold reads), archive cold", "MiB/s"),
        ctx.table.row("d.floor.warm", f"(d) {mib} MiB BLOB inflate+sha256 in-process, "
                      "archive warm", "MiB/s"),
    ]
    for peer in peers:
        if peer.name == "acxfs" and not peer.absent:
            record(ctx, peer, floor_rows, lambda: inflate_floor(ctx, ds, rel))
        else:
            not_applicable(floor_rows, peer, "—")


def big_runs(ctx: Context, peer: Peer, ds: Dataset, rel: str) -> list[list[float]]:
    ttfb: list[float] = []
    cold: list[float] = []
    warm: list[float] = []
    again: list[float] = []
    rand: list[float] = []
    rss: list[float] = []
    mib = ctx.cfg.big_mib
    per_mount = max(1, math.ceil(ctx.cfg.warm_reps / ctx.cfg.cold_reps))

    def note_rss(mount: Mount) -> None:
        peak = peak_rss_mib(mount.pid)
        if peak is not None:
            rss.append(peak)

    for _ in range(ctx.cfg.cold_reps):
        with peer.mounted(ds, cold=True) as mount:
            ttfb.append(in_worker(ctx, "first_byte", path=str(mount.root / rel))["seconds"])
            note_rss(mount)
        with peer.mounted(ds, cold=True) as mount:
            path = str(mount.root / rel)
            cold.append(mib / in_worker(ctx, "sequential", path=path)["seconds"])
            for _ in range(per_mount):
                warm.append(mib / in_worker(ctx, "sequential", path=path)["seconds"])
            # The first re-read of a page moves it to the kernel's active list, a cost per
            # page (FUSE caches 4 KiB pages, ext4 large folios); the next read is steady.
            again.append(mib / in_worker(ctx, "sequential", path=path)["seconds"])
            note_rss(mount)
        with peer.mounted(ds, cold=True) as mount:
            path = str(mount.root / rel)
            rand.append(in_worker(ctx, "random", path=path,
                                  count=ctx.cfg.random_reads)["seconds"])
            note_rss(mount)
    return [ttfb, cold, warm, again, rand, [max(rss)] if rss else []]


def inflate_floor(ctx: Context, ds: Dataset, rel: str) -> list[list[float]]:
    """Inflate + sha256 the file's BLOB straight from SQLite, 256 KiB steps (as acxfs reads)."""
    cold: list[float] = []
    warm: list[float] = []
    for _ in range(max(ctx.cfg.cold_reps, 3)):
        if ctx.drop_caches:
            try_drop_caches()
        cold.append(ctx.cfg.big_mib / inflate_and_hash(ds.acx, [rel]))
        warm.append(ctx.cfg.big_mib / inflate_and_hash(ds.acx, [rel]))
    return [cold, warm]


def inflate_and_hash(acx: Path, names: Sequence[str]) -> float:
    """Seconds to inflate and hash the named sqlar rows (zlib or stored) in this process."""
    conn = sqlite3.connect(f"file:{acx}?mode=ro&immutable=1", uri=True)
    try:
        start = time.perf_counter()
        for name in names:
            rowid, size = conn.execute("SELECT rowid, sz FROM sqlar WHERE name=?",
                                       (name,)).fetchone()
            hasher = hashlib.sha256()
            with conn.blobopen("sqlar", "data", rowid, readonly=True) as blob:
                stored = len(blob)
                inflater = zlib.decompressobj() if stored < size else None
                while chunk := blob.read(STEP):
                    if inflater is None:
                        hasher.update(chunk)
                        continue
                    while chunk:  # bounded output, as acxfs.content.cache inflates
                        hasher.update(inflater.decompress(chunk, STEP))
                        chunk = inflater.unconsumed_tail
                if inflater is not None:
                    hasher.update(inflater.flush())
            hasher.digest()
        return time.perf_counter() - start
    finally:
        conn.close()


def wl_alternate(ctx: Context, peers: list[Peer], data: Datasets) -> None:
    """(e) two large files read alternately in 1 MiB steps; acxfs's inflation counter."""
    assert data.big is not None
    ds = data.big
    a, b = ds.path("assets/alt-a.bin"), ds.path("assets/alt-b.bin")
    mib = ctx.cfg.alt_mib
    rows = [ctx.table.row(f"e.alt.{state}", f"(e) two {mib} MiB files alternately in 1 MiB "
                          f"steps, {state}", "s") for state in ("cold", "warm")]
    inflations = ctx.table.row("e.inflations", "(e) files inflated by the daemon for those "
                               "2 files (user.acx.stats blobs_inflated after cold + warm)",
                               "count")
    for peer in peers:
        def op(mount: Mount) -> float:
            return in_worker(ctx, "alternate", first=str(mount.root / a),
                             second=str(mount.root / b))["seconds"]

        if not isinstance(peer, AcxfsPeer):
            record(ctx, peer, rows, functools.partial(cold_and_warm, ctx, peer, ds, op))
            not_applicable([inflations], peer, "—")
            continue
        record(ctx, peer, [*rows, inflations],
               functools.partial(acxfs_alternate, ctx, peer, ds, op))


def acxfs_alternate(ctx: Context, peer: Peer, ds: Dataset, op: Op) -> list[list[float]]:
    cold: list[float] = []
    warm: list[float] = []
    counts: list[float] = []
    per_mount = max(1, math.ceil(ctx.cfg.warm_reps / ctx.cfg.cold_reps))
    for _ in range(ctx.cfg.cold_reps):
        with peer.mounted(ds, cold=True) as mount:
            cold.append(op(mount))
            for _ in range(per_mount):
                warm.append(op(mount))
            stats = json.loads(os.getxattr(mount.root, "user.acx.stats"))
            counts.append(float(stats["blobs_inflated"]))
    return [cold, warm, counts]


def wl_parallel(ctx: Context, peers: list[Peer], data: Datasets) -> None:
    """(f) 2 and 4 reader processes over all small files (each takes every n-th file)."""
    ds = data.small[ctx.cfg.read_count]
    list_file = ctx.cfg.work / "data" / ds.name / "files.txt"
    list_file.write_text("\n".join(ds.files) + "\n")
    label = count_label(ctx.cfg.read_count)
    for readers in ctx.cfg.readers:
        rows = [ctx.table.row(f"f.par{readers}.{state}", f"(f) {readers} parallel readers over "
                              f"{label} files, {state}", "s") for state in ("cold", "warm")]

        def op(mount: Mount, readers: int = readers) -> float:
            return in_worker(ctx, "parallel", root=str(mount.root), list_file=str(list_file),
                             readers=readers)["seconds"]

        for peer in peers:
            record(ctx, peer, rows, functools.partial(cold_and_warm, ctx, peer, ds, op))


def wl_verify(ctx: Context, peers: list[Peer], data: Datasets) -> None:
    """`acxfs verify --deep` on one skill with many 4 KiB reference files (the whole command)."""
    assert data.verify is not None
    ds = data.verify
    label = count_label(ctx.cfg.verify_files)
    row = ctx.table.row("v.deep", f"`acxfs verify --deep`, one skill with {label} x 4 KiB "
                        "files (whole command)", "s")
    floor = ctx.table.row("v.floor", f"inflate+sha256 of those {label} BLOBs in-process "
                          "(floor)", "s")
    for peer in peers:
        if peer.name != "acxfs" or peer.absent:
            not_applicable([row, floor], peer, "—")
            continue

        def measure() -> list[list[float]]:
            reps = 1 if ctx.cfg.quick else 5
            runs = [timed_command(ctx, [tool("acxfs"), "verify", "--deep", str(ds.acx)])
                    for _ in range(reps)]
            floors = [inflate_and_hash(ds.acx, ds.files) for _ in range(reps)]
            return [runs, floors]

        record(ctx, peer, [row, floor], measure)


def wl_build(ctx: Context, peers: list[Peer], data: Datasets) -> None:
    """What it cost to make each input: generating files, acxfs pack, zip."""
    sets = [*data.small.values()] + [d for d in (data.big, data.verify) if d is not None]
    for ds in sets:
        rows = {
            "plain": ctx.table.row(f"p.gen.{ds.name}", f"(build) write {ds.name} as plain "
                                   "files (generator)", "s"),
            "acxfs": ctx.table.row(f"p.pack.{ds.name}", f"(build) `acxfs pack --sqlar-dirs` "
                                   f"{ds.name} ({len(ds.files)} files, "
                                   f"{ds.total_bytes / MiB:.0f} MiB)", "s"),
            "fuse-zip": ctx.table.row(f"p.zip.{ds.name}", f"(build) zip {ds.name} "
                                      "(Python zipfile, level 6)", "s"),
        }
        values = {"plain": ds.build.get("generate"), "acxfs": ds.build.get("pack"),
                  "fuse-zip": ds.build.get("zip")}
        for key, row in rows.items():
            for peer in peers:
                value = values[key] if peer.name == key else None
                row.cells[peer.name] = Cell([value]) if value is not None else Cell(note="—")


WORKLOADS: dict[str, Callable[[Context, list[Peer], Datasets], None]] = {
    "a": wl_mount, "b": wl_listing, "c": wl_read_all, "d": wl_big, "e": wl_alternate,
    "f": wl_parallel, "v": wl_verify, "p": wl_build,
}


# --- targets ------------------------------------------------------------------------------


def ratio_text(value: float | None, reference: float | None) -> str:
    if value is None or reference is None or reference == 0:
        return "n/a"
    return f"{value / reference:.2f}x"


def fmt(value: float | None, unit: str = "") -> str:
    if value is None:
        return "n/a"
    text = f"{value:.3g}" if abs(value) < 1000 else f"{value:.0f}"
    return f"{text} {unit}".strip()


def evaluate_targets(cfg: Config, table: Table) -> list[Target]:
    """The issue's targets for acxfs (libfuse2), then again for the libfuse3 backend if it ran."""
    targets = evaluate_targets_for(cfg, table, "acxfs")
    row = table.get("c.read.warm") or table.get("d.seq.warm") or table.get("a.mount.warm.1000")
    if row is not None and row.median("acxfs libfuse3") is not None:
        for target in evaluate_targets_for(cfg, table, "acxfs libfuse3"):
            targets.append(Target(f"[--backend libfuse3] {target.goal}", target.figure,
                                  target.met))
    return targets


def evaluate_targets_for(cfg: Config, table: Table, subject: str) -> list[Target]:
    targets: list[Target] = []

    def med(key: str, peer: str) -> float | None:
        row = table.get(key)
        if peer == "acxfs":
            peer = subject
        value = row.median(peer) if row else None
        if value is None and row is not None and subject != "acxfs" and peer == subject:
            value = row.median("acxfs")  # rows only the default backend measures (verify)
        return value

    def both(*checks: bool | None) -> bool | None:
        if any(c is False for c in checks):
            return False
        return None if any(c is None for c in checks) else True

    def le(a: float | None, b: float | None, factor: float = 1.0) -> bool | None:
        return None if a is None or b is None else a <= b * factor

    if "a" in cfg.workloads:
        n = max(cfg.mount_counts)
        acx, rat = med(f"a.mount.warm.{n}", "acxfs"), med(f"a.mount.warm.{n}", "ratarmount")
        acx_c, rat_c = med(f"a.mount.cold.{n}", "acxfs"), med(f"a.mount.cold.{n}", "ratarmount")
        targets.append(Target(
            f"mount of a {count_label(n)}-file cartridge: ready no later than ratarmount, "
            "and under 2 s",
            f"warm {fmt(acx, 's')} vs ratarmount {fmt(rat, 's')}; cold {fmt(acx_c, 's')} vs "
            f"{fmt(rat_c, 's')}",
            both(le(acx, rat), le(acx, 2.0), le(acx_c, rat_c), le(acx_c, 2.0))))
    if "d" in cfg.workloads:
        acx, plain = med("d.seq.warm", "acxfs"), med("d.seq.warm", "plain")
        again, plain_again = med("d.seq.again", "acxfs"), med("d.seq.again", "plain")
        targets.append(Target(
            f"warm {cfg.big_mib} MiB sequential read within 1.5x of the plain directory",
            f"{fmt(acx, 'MiB/s')} vs plain {fmt(plain, 'MiB/s')} "
            f"(time ratio {ratio_text(plain, acx)}); read again {fmt(again, 'MiB/s')} vs "
            f"{fmt(plain_again, 'MiB/s')} ({ratio_text(plain_again, again)})",
            None if acx is None or plain is None else plain / acx <= 1.5))
    if "c" in cfg.workloads:
        acx, plain = med("c.read.warm", "acxfs"), med("c.read.warm", "plain")
        null, single = med("c.read.warm", "nullfs"), med("c.read.warm", "nullfs -s")
        targets.append(Target(
            f"warm read of all {count_label(cfg.read_count)} small files within 5x of plain",
            f"{fmt(acx, 's')} vs plain {fmt(plain, 's')} = {ratio_text(acx, plain)}; "
            f"nullfs floor {fmt(null, 's')} = {ratio_text(null, plain)} of plain, "
            f"{fmt(single, 's')} = {ratio_text(single, plain)} single-threaded",
            le(acx, plain, 5.0)))
        acx, plain = med("c.read.cold", "acxfs"), med("c.read.cold", "plain")
        rat = med("c.read.cold", "ratarmount")
        targets.append(Target(
            f"cold read of all {count_label(cfg.read_count)} files: at least 3x faster than "
            "ratarmount, within 2x of plain cold",
            f"{fmt(acx, 's')}: ratarmount {fmt(rat, 's')} ({ratio_text(rat, acx)} slower), "
            f"plain {fmt(plain, 's')} ({ratio_text(acx, plain)})",
            both(le(acx, rat, 1 / 3), le(acx, plain, 2.0))))
    if "d" in cfg.workloads:
        acx, floor = med("d.seq.cold", "acxfs"), med("d.floor.cold", "acxfs")
        floor_warm = med("d.floor.warm", "acxfs")
        rss = med("d.rss", "acxfs")
        targets.append(Target(
            f"cold {cfg.big_mib} MiB sequential read at least 80 % of in-process inflate+sha256, "
            "daemon peak RSS under 100 MiB",
            f"{fmt(acx, 'MiB/s')} vs floor {fmt(floor, 'MiB/s')} archive cold "
            f"({ratio_text(acx, floor)}), {fmt(floor_warm, 'MiB/s')} archive warm "
            f"({ratio_text(acx, floor_warm)}); peak RSS {fmt(rss, 'MiB')}",
            both(None if acx is None or floor is None else acx >= 0.8 * floor,
                 le(rss, 100.0))))
    if "e" in cfg.workloads:
        count = med("e.inflations", "acxfs")
        targets.append(Target(
            "alternating two large files: no file inflated twice",
            f"blobs_inflated = {fmt(count)} for 2 files",
            None if count is None else count <= 2))
    if "b" in cfg.workloads:
        n = max(cfg.listing_counts)
        acx, rat = med(f"b.find.warm.{n}", "acxfs"), med(f"b.find.warm.{n}", "ratarmount")
        targets.append(Target(
            f"`find -ls` warm on {count_label(n)} files no slower than ratarmount",
            f"{fmt(acx, 's')} vs ratarmount {fmt(rat, 's')}", le(acx, rat)))
    if "v" in cfg.workloads:
        acx = med("v.deep", "acxfs")
        targets.append(Target(
            f"`acxfs verify --deep`, {count_label(cfg.verify_files)} x 4 KiB files: no slower "
            "than the Node.js reference (about 0.47 s on this machine)",
            f"{fmt(acx, 's')}", le(acx, 0.47)))
    return targets


# --- output -------------------------------------------------------------------------------


def cell_text(cell: Cell | None, unit: str) -> str:
    if cell is None:
        return "—"
    if cell.median is None:
        return cell.note or "—"
    value = cell.median
    if unit == "count":
        return f"{value:.0f}"
    return f"{value:.3g}" if value < 1000 else f"{value:.0f}"


def render(ctx: Context, peers: list[Peer], targets: list[Target], elapsed: float) -> str:
    cfg = ctx.cfg
    names = [p.name for p in peers]
    lines = [
        f"## acxfs benchmark ({'quick' if cfg.quick else 'full'} run, "
        f"{datetime_now()}, {elapsed / 60:.1f} min)",
        "",
        f"Medians of {cfg.cold_reps} cold run(s) (fresh mount each; {ctx.drop_note}) and "
        f"{cfg.warm_reps} warm run(s) (same mount). Host: {platform.node()}, "
        f"{os.cpu_count()} cores, Linux {platform.release()}, Python "
        f"{platform.python_version()}; acxfs at {ctx.revision}.",
        "",
        "| workload | unit | " + " | ".join(names) + " |",
        "|---|---|" + "---:|" * len(names),
    ]
    for row in ctx.table.rows.values():
        cells = [cell_text(row.cells.get(n), row.unit) for n in names]
        lines.append(f"| {row.label} | {row.unit} | " + " | ".join(cells) + " |")
    lines += ["", "### Targets", "", "| target | this run | met |",
              "|---|---|---|"]
    for target in targets:
        met = {True: "yes", False: "**no**", None: "cannot tell"}[target.met]
        lines.append(f"| {target.goal} | {target.figure} | {met} |")
    absent = [f"- {p.name}: {p.absent}" for p in peers if p.absent]
    if absent:
        lines += ["", "Absent peers:", *absent]
    return "\n".join(lines) + "\n"


def datetime_now() -> str:
    return time.strftime("%Y-%m-%d %H:%M", time.localtime())


def acxfs_revision() -> str:
    """The commit of the acxfs tree measured, with '+dirty' when it has local changes."""
    repo = SELF.parent.parent
    with contextlib.suppress(OSError, subprocess.SubprocessError):
        rev = subprocess.run(["git", "-C", str(repo), "rev-parse", "--short", "HEAD"],
                             capture_output=True, text=True, timeout=30, check=False).stdout
        dirty = subprocess.run(["git", "-C", str(repo), "status", "--porcelain", "acxfs"],
                               capture_output=True, text=True, timeout=30, check=False).stdout
        return rev.strip() + ("+dirty" if dirty.strip() else "")
    return "unknown"


def peer_versions() -> dict[str, str]:
    found: dict[str, str] = {}
    probes = {"sqlite3": ["sqlite3", "--version"], "ratarmount": ["ratarmount", "--version"],
              "fuse-zip": ["fuse-zip", "-V"], "acxfs": ["acxfs", "--version"]}
    for name, argv in probes.items():
        if shutil.which(argv[0]) is None:
            continue
        with contextlib.suppress(OSError, subprocess.SubprocessError):
            done = subprocess.run(argv, capture_output=True, text=True, timeout=30, check=False)
            text = (done.stdout + done.stderr).strip().splitlines()
            found[name] = next((t for t in text if name in t), text[0] if text else "")
    return found


def write_json(ctx: Context, peers: list[Peer], targets: list[Target], data: Datasets,
               elapsed: float, complete: bool = True) -> None:
    cfg = ctx.cfg
    doc = {
        "complete": complete,
        "markdown": render(ctx, peers, targets, elapsed),
        "config": {k: (str(v) if isinstance(v, Path) else v) for k, v in asdict(cfg).items()},
        "host": {"node": platform.node(), "cores": os.cpu_count(), "kernel": platform.release(),
                 "python": platform.python_version()},
        "versions": peer_versions(),
        "acxfs_revision": ctx.revision,
        "page_cache": ctx.drop_note,
        "elapsed_seconds": elapsed,
        "peers": {p.name: {"available": p.absent is None, "absent": p.absent} for p in peers},
        "datasets": {d.name: {"files": len(d.files), "bytes": d.total_bytes, "build": d.build,
                              "acx_bytes": d.acx.stat().st_size, "zip_bytes": d.zip.stat().st_size}
                     for d in [*data.small.values(), data.big, data.verify] if d is not None},
        "rows": [
            {"key": r.key, "label": r.label, "unit": r.unit,
             "cells": {n: {"median": c.median, "values": c.values, "note": c.note}
                       for n, c in r.cells.items()}}
            for r in ctx.table.rows.values()
        ],
        "targets": [asdict(t) for t in targets],
    }
    cfg.json_path.parent.mkdir(parents=True, exist_ok=True)
    cfg.json_path.write_text(json.dumps(doc, indent=2))


# --- main ---------------------------------------------------------------------------------


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description="Benchmark acxfs against a plain directory, sqlite3 -Ax, ratarmount, "
        "fuse-zip and a do-nothing FUSE filesystem on the same synthetic skills.",
        epilog="example:\n  python scripts/bench.py --quick --json bench-out/quick.json",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--quick", action="store_true",
                        help="small sizes and few repetitions (CI smoke test, < 3 minutes)")
    parser.add_argument("--json", default="bench-out/bench.json", metavar="PATH",
                        help="where to write every run as JSON (default: bench-out/bench.json)")
    parser.add_argument("--work", default="bench-out/work", metavar="DIR",
                        help="data, mountpoints and the isolated acxfs trust store "
                        "(default: bench-out/work; datasets are reused across runs)")
    parser.add_argument("--install-peers", action="store_true",
                        help="install missing peers (pip ratarmount, apt fuse-zip, sqlite3)")
    parser.add_argument("--peers", metavar="LIST",
                        help=f"comma-separated subset of: {','.join(PEER_NAMES)}")
    parser.add_argument("--workloads", metavar="LETTERS",
                        help="subset of a,b,c,d,e,f,v (verify --deep),p (build costs); "
                        "default: all")
    parser.add_argument("--reps", type=int, metavar="N",
                        help="cold and warm repetitions (default: 3/3, quick 1/1)")
    parser.add_argument("--rebuild", action="store_true", help="regenerate and repack datasets")
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    return parser.parse_args(argv)


def setup_trust(ctx: Context) -> None:
    """An isolated trust store with a local key: bench cartridges verify as 'local'."""
    trust = Path(ctx.env["ACXFS_TRUST_DIR"])
    if not (trust / "keys" / "local.pem").exists():
        run_checked([tool("acxfs"), "keygen"], env=ctx.env)


def compile_acxfs(ctx: Context) -> None:
    """Byte-compile the acxfs package as `pip install` does for a regular install (ratarmount
    is measured installed that way): an editable install run with PYTHONDONTWRITEBYTECODE
    would otherwise compile its sources at every command, some 40-60 ms each here."""
    spec = importlib.util.find_spec("acxfs")
    if spec is None or spec.origin is None:
        return
    package = Path(spec.origin).parent
    done = subprocess.run([sys.executable, "-m", "compileall", "-q", str(package)],
                          capture_output=True, text=True, check=False, timeout=300)
    ctx.log(f"byte-compiled {package}" if done.returncode == 0 else
            f"could not byte-compile {package}: {done.stderr.strip()[-200:]}")


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    if args.worker:
        return worker_main(args.worker)
    cfg = make_config(args)
    started = time.perf_counter()
    cfg.work.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ, ACXFS_TRUST_DIR=str(cfg.work / "trust"),
               XDG_STATE_HOME=str(cfg.work / "state"))
    drop_ok, drop_note = try_drop_caches()

    def log(message: str) -> None:
        print(f"[{time.perf_counter() - started:7.1f}s] {message}", file=sys.stderr, flush=True)

    ctx = Context(cfg, env, Table(), drop_ok, drop_note, log, acxfs_revision())
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    try:
        compile_acxfs(ctx)
        setup_trust(ctx)
        peers = make_peers(ctx)
        for peer in peers:
            log(f"peer {peer.name}: {'absent: ' + peer.absent if peer.absent else 'ready'}")
        data = build_datasets(ctx)
        for letter in cfg.workloads:
            if letter in WORKLOADS:
                log(f"workload {letter}")
                WORKLOADS[letter](ctx, peers, data)
                # Partial results survive an interrupted (long) run.
                write_json(ctx, peers, evaluate_targets(cfg, ctx.table), data,
                           time.perf_counter() - started, complete=False)
    finally:
        cleanup_mounts()
    elapsed = time.perf_counter() - started
    targets = evaluate_targets(cfg, ctx.table)
    print(render(ctx, peers, targets, elapsed))
    write_json(ctx, peers, targets, data, elapsed)
    log(f"wrote {cfg.json_path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
