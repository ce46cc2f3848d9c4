"""The cartridges a run publishes and each command it times.

A cartridge of a nominal size is one generated skill (SKILL.md and one incompressible asset of
random bytes, so deflate cannot shrink it) packed by `acxfs pack` and signed with the run's
local key in the publisher's HOME. Every command is a fresh process; a timed `acxfs add` runs
in a HOME of its own with the publisher's key pinned beforehand, untimed.

Invariant: every `acxfs add` is followed by `acxfs down` in its HOME (in a `finally`), and that
HOME, like every download, is removed once its round is measured.
"""

from __future__ import annotations

import hashlib
import os
import random
import shutil
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from scripts.bench.provenance import REPO
from scripts.bench.system import tool
from scripts.bench_library.config import BenchError
from scripts.bench_library.system import isolated_env, remove_tree

PUBLISHER = "io.github.bench"
VERSION = "1.0.0"
KIB = 1024


@dataclass(frozen=True)
class Cartridge:
    label: str  # "64 KiB"
    slug: str  # "64k", in repository and skill names
    path: Path
    size: int  # bytes of the .acx
    digest: str  # sha256:<hex> of the file: its layer's digest


def parse_size(text: str) -> int:
    """'64K', '8M', '1G' or bytes."""
    units = {"K": KIB, "M": KIB**2, "G": KIB**3}
    text = text.strip().upper().removesuffix("IB").removesuffix("B")
    if text and text[-1] in units:
        return int(text[:-1]) * units[text[-1]]
    return int(text)


def overhead(size: int) -> int:
    """About what SQLite's pages, the signed manifest and SKILL.md add to an asset of `size`."""
    return 60 * KIB + size // 1024


def size_label(size: int) -> tuple[str, str]:
    for unit, factor in (("GiB", KIB**3), ("MiB", KIB**2), ("KiB", KIB)):
        if size >= factor and size % factor == 0:
            return f"{size // factor} {unit}", f"{size // factor}{unit[0].lower()}"
    return f"{size} B", f"{size}b"


def run(args: Sequence[str], env: dict[str, str], timeout: float,
        cwd: Path | None = None) -> float:
    """Run one command to completion; its wall-clock seconds. BenchError when it fails."""
    start = time.perf_counter()
    try:
        done = subprocess.run(list(args), env=env, cwd=cwd, capture_output=True, text=True,
                              check=False, timeout=timeout, stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired as exc:
        raise BenchError(f"{' '.join(args[:2])}: timeout > {timeout:.0f} s") from exc
    elapsed = time.perf_counter() - start
    if done.returncode != 0:
        lines = (done.stderr or done.stdout).strip().splitlines()
        raise BenchError(f"{Path(args[0]).name} {args[1]} exited {done.returncode}: "
                         f"{lines[-1] if lines else 'no output'}")
    return elapsed


@dataclass
class Steps:
    """The commands of one run against the registry at `host`."""

    base: Path
    host: str
    timeout: float

    def __post_init__(self) -> None:
        self.publisher = isolated_env(self.base / "publisher", self.base / "publisher" / "trust")
        self.key = Path(self.publisher["ACXFS_TRUST_DIR"]) / "keys" / "local.pub.pem"
        self.homes = 0

    def ref(self, repo: str, tag: str | None = None) -> str:
        return f"oci+http://{self.host}/{repo}" + (f":{tag}" if tag else "")

    def source(self, cart: Cartridge) -> str:
        """The repository every fetch of `cart` reads (pushed once, by acxfs, at set-up)."""
        return f"bench/src-{cart.slug}"

    # ---- set-up, untimed

    def keygen(self) -> None:
        run([tool("acxfs"), "keygen"], self.publisher, self.timeout)

    def cartridge(self, size: int) -> Cartridge:
        label, slug = size_label(size)
        skill = f"bench-oci-{slug}"
        tree = self.base / "src" / skill
        (tree / "assets").mkdir(parents=True)
        (tree / "SKILL.md").write_text(
            f"---\nname: {skill}\ndescription: OCI benchmark skill of about {label}; use it "
            f"when a registry benchmark needs one.\n---\n# {skill}\n\nOne random asset.\n")
        (tree / "assets" / "data.bin").write_bytes(
            random.Random(size).randbytes(max(size - overhead(size), KIB)))
        path = self.base / "bundles" / f"{skill}-{VERSION}.acx"
        path.parent.mkdir(exist_ok=True)
        run([tool("acxfs"), "pack", str(tree), "-o", str(path), "--publisher", PUBLISHER,
             "--version", VERSION], self.publisher, self.timeout)
        data = path.read_bytes()
        cart = Cartridge(label, slug, path, len(data), "sha256:" + hashlib.sha256(data).hexdigest())
        run([tool("acxfs"), "push", str(path), self.ref(self.source(cart))], self.publisher,
            self.timeout)
        return cart

    def fresh_home(self) -> dict[str, str]:
        """A new HOME (XDG_*, trust store) with the publisher's key pinned."""
        self.homes += 1
        root = self.base / "homes" / f"h{self.homes:04d}"
        env = isolated_env(root, root / "trust")
        run([tool("acxfs"), "trust", "add", str(self.key), "--publisher", PUBLISHER], env,
            self.timeout)
        return env

    # ---- timed: each returns seconds

    def acxfs_push(self, cart: Cartridge, round_no: int) -> float:
        repo = f"bench/acxfs-{cart.slug}-{round_no}"  # a fresh repository: every blob uploads
        return run([tool("acxfs"), "push", str(cart.path), self.ref(repo)], self.publisher,
                   self.timeout)

    def oras_push(self, cart: Cartridge, round_no: int) -> float:
        target = f"{self.host}/bench/oras-{cart.slug}-{round_no}:{VERSION}"
        return run([sys.executable, "-m", "scripts.bench_oci.oras_peer", "push", self.host,
                    target, str(cart.path)], peer_env(), self.timeout, cwd=REPO)

    def acxfs_add(self, what: str) -> float:
        """`acxfs add WHAT` into a fresh HOME, then `acxfs down` there (untimed)."""
        env = self.fresh_home()
        try:
            return run([tool("acxfs"), "add", what], env, self.timeout)
        finally:
            try:
                run([tool("acxfs"), "down"], env, self.timeout)
            finally:
                remove_tree(Path(env["HOME"]).parent)

    def acxfs_add_oci(self, cart: Cartridge, round_no: int) -> float:
        return self.acxfs_add(self.ref(self.source(cart), VERSION))

    def acxfs_add_file(self, cart: Cartridge, round_no: int) -> float:
        return self.acxfs_add(str(cart.path))

    def oras_pull(self, cart: Cartridge, round_no: int) -> float:
        out = self.base / "pulls" / f"oras-{cart.slug}-{round_no}"
        try:
            elapsed = run([sys.executable, "-m", "scripts.bench_oci.oras_peer", "pull",
                           self.host, f"{self.host}/{self.source(cart)}:{VERSION}", str(out)],
                          peer_env(), self.timeout, cwd=REPO)
            expect_file(next(out.iterdir()), cart)
            return elapsed
        finally:
            shutil.rmtree(out, ignore_errors=True)

    def curl_blob(self, cart: Cartridge, round_no: int) -> float:
        out = self.base / "pulls" / f"curl-{cart.slug}-{round_no}"
        out.parent.mkdir(exist_ok=True)
        url = f"http://{self.host}/v2/{self.source(cart)}/blobs/{cart.digest}"
        try:
            elapsed = run(["curl", "-sSf", "-o", str(out), url], peer_env(), self.timeout)
            expect_file(out, cart)
            return elapsed
        finally:
            out.unlink(missing_ok=True)


def peer_env() -> dict[str, str]:
    """The environment of oras-py and curl: no proxy between them and loopback."""
    return {k: v for k, v in os.environ.items() if "proxy" not in k.lower()}


def expect_file(path: Path, cart: Cartridge) -> None:
    if path.stat().st_size != cart.size:
        raise BenchError(f"{path.name}: {path.stat().st_size} bytes, not {cart.size}")
