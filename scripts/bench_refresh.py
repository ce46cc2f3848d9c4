"""`python3 -m scripts.bench_refresh`: what keeping the library current costs, in one table.

Row 1: seconds from publication (a withdrawal written to the registry's status.json) until the
skill links are gone in all of 3 HOMEs whose daemons check every 2 s (`acxfs refresh --every
2s`), the median of `--rounds` rounds (each with fresh HOMEs and a fresh registry).  Rows 2-5:
the bytes one check of an unchanged registry costs, for an index of 1 and of 1000 cartridges,
without conditional requests (the first check, the conditional-request cache emptied) and with
them (the second): as `acxfs refresh --json` counts them (`bytes`: body bytes received), and
as the server counts them (every byte it wrote: status lines, headers and bodies), with the
requests and their status codes.

The registry is served by a `http.server.SimpleHTTPRequestHandler` on 127.0.0.1 in this
process (it answers `If-Modified-Since` with 304, like `python -m http.server`), wrapped to
count what it writes.

Invariant: everything lives in one temporary directory (`--work` or a new one) that is
removed on any exit, with every HOME's daemon stopped (`acxfs down`) first; the network is
loopback only.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import http.server
import io
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from acxfs import formats
from acxfs.trust.policy import TrustContext
from scripts.mounting import acxfs

PUBLISHER = "io.github.bench"
ID = "research"
SKILL = "bench-skill"
HOMES = 3
DEADLINE = 120.0  # seconds a round may wait for the links to go
T1, T2 = "2026-11-20T00:00:00.000Z", "2026-11-21T00:00:00.000Z"


class BenchError(Exception):
    """A step of the benchmark failed (one line)."""


# --- the registry and its server ---------------------------------------------------------------


@dataclass
class Counted:
    """What the server wrote: (path, status) per request, and every byte."""

    requests: list[tuple[str, int]] = field(default_factory=list)
    written: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)

    def snapshot(self) -> tuple[int, int]:
        with self.lock:
            return len(self.requests), self.written


class _CountingWriter(io.RawIOBase):
    def __init__(self, inner: Any, counted: Counted) -> None:
        self.inner, self.counted = inner, counted

    def writable(self) -> bool:
        return True

    def write(self, data: Any) -> int:
        written: int = self.inner.write(data)
        with self.counted.lock:
            self.counted.written += len(data)
        return written

    def flush(self) -> None:
        self.inner.flush()


@contextlib.contextmanager
def serving(root: Path, counted: Counted) -> Iterator[str]:
    """The directory `root` over HTTP on 127.0.0.1; yields its base URL."""

    class Handler(http.server.SimpleHTTPRequestHandler):
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, directory=str(root), **kwargs)

        def setup(self) -> None:
            super().setup()
            self.wfile = _CountingWriter(self.wfile, counted)  # type: ignore[assignment]

        def log_request(self, code: int | str = "-", size: int | str = "-") -> None:
            with counted.lock:
                counted.requests.append((self.path, int(code)))

        def log_message(self, format: str, *args: Any) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/"
    finally:
        server.shutdown()
        server.server_close()


def entry(version: str, rom: str, size: int, ident: str = ID) -> dict[str, Any]:
    """An index entry as the ACX registry builder writes it."""
    return {
        "id": ident, "slug": f"{PUBLISHER}__{ident}",
        "path": f"cartridges/{PUBLISHER}/{ident}/{version}/cartridge.acx", "name": ident.title(),
        "publisher": PUBLISHER, "role": "software_engineer", "provider": "claude",
        "model": "claude-sonnet-5", "version": version, "description": f"{ident} agent",
        "license": "Apache-2.0", "authors": [{"name": PUBLISHER}], "tags": [ident],
        "homepage": None, "trust": "portable", "trustStatus": "warning", "specClean": True,
        "romHash": rom, "digest": rom, "bytes": size, "capabilities": [], "level": None,
        "levelClaim": {}, "registryStatus": {"status": "active", "reason": None,
                                             "recordedAt": None, "successor": None,
                                             "advisory": None},
        "latest": False,
    }


@dataclass(frozen=True)
class Cartridge:
    file: Path
    version: str
    rom: str

    def status(self, status: str, reason: str) -> dict[str, Any]:
        return {"artifact": {"artifactType": "agent", "publisherId": PUBLISHER, "id": ID,
                             "version": self.version, "digest": self.rom},
                "status": status, "reason": reason, "recordedAt": "2026-11-01T00:00:00Z"}


def publish(root: Path, cart: Cartridge, *, fillers: int, status: list[dict[str, Any]],
            at: str) -> None:
    """The registry at `root`: the cartridge at its coordinate, an index of it and `fillers`
    other cartridges, and a status ledger."""
    target = root / entry(cart.version, cart.rom, 0)["path"]
    target.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(cart.file, target)
    size = cart.file.stat().st_size
    cartridges = [entry(cart.version, cart.rom, size)]
    for n in range(fillers):
        ident = f"filler-{n:04d}"
        rom = "sha256:" + hashlib.sha256(ident.encode()).hexdigest()
        cartridges.append(entry("1.0.0", rom, size, ident))
    index = {"schemaVersion": "acx.registry-index/1", "generatedAt": at,
             "artifactCount": len(cartridges), "count": len(cartridges),
             "cartridges": cartridges, "workflowCount": 0, "workflows": [],
             "agentGraphCount": 0, "agentGraphs": [], "templateCount": 0, "templates": []}
    (root / "index.json").write_text(json.dumps(index, indent=2) + "\n")
    ledger = {"schemaVersion": "acx.registry-status/1", "updatedAt": at, "entries": status}
    (root / "status.json").write_text(json.dumps(ledger, indent=2) + "\n")


# --- machines ----------------------------------------------------------------------------------


@dataclass
class Home:
    root: Path

    @property
    def env(self) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("XDG_", "ACXFS_"))}
        env.update({"HOME": str(self.root / "home"), "ACXFS_TRUST_DIR": str(self.root / "t"),
                    "XDG_CONFIG_HOME": str(self.root / "c"),
                    "XDG_STATE_HOME": str(self.root / "s"),
                    "XDG_CACHE_HOME": str(self.root / "k")})
        return env

    @property
    def link(self) -> Path:
        return self.root / "home" / ".claude" / "skills" / SKILL

    @property
    def http_cache(self) -> Path:
        return self.root / "home" / ".local" / "share" / "acxfs" / "http-cache"

    def run(self, *args: object, codes: tuple[int, ...] = (0,)) -> str:
        done = acxfs(*args, env=self.env, timeout=120)
        if done.returncode not in codes:
            raise BenchError(f"acxfs {' '.join(map(str, args))}: exit {done.returncode}: "
                             f"{(done.stderr or done.stdout).strip()[-300:]}")
        return done.stdout


def make_home(root: Path) -> Home:
    for name in ("home", "c", "s", "k"):
        (root / name).mkdir(parents=True, exist_ok=True)
    return Home(root)


def signed(work: Path) -> tuple[Home, Cartridge]:
    signer = make_home(work / "signer")
    signer.run("keygen")
    skill = work / "src" / SKILL
    skill.mkdir(parents=True)
    (skill / "SKILL.md").write_text(f"---\nname: {SKILL}\ndescription: a skill to measure."
                                    f"\n---\n\n# {SKILL}\n\nRelease 1.0.0.\n")
    out = work / "research-1.0.0.acx"
    signer.run("pack", skill, "-o", out, "--publisher", PUBLISHER, "--id", ID,
               "--version", "1.0.0")
    rom = formats.identity(formats.check(str(out), TrustContext())).release
    return signer, Cartridge(out, "1.0.0", rom)


def install(home: Home, cart: Cartridge, base: str, every: str) -> None:
    home.run("trust", "add", cart.file)
    home.run("add", f"{PUBLISHER}/{ID}", "--from", base)
    home.run("refresh", "--every", every)


# --- the measurements --------------------------------------------------------------------------


def withdrawal_round(work: Path, cart: Cartridge, started: list[Home]) -> float:
    """Seconds from a withdrawal written to status.json until the links are gone in every
    one of HOMES homes checking every 2 s."""
    root = work / "registry"
    publish(root, cart, fillers=0, status=[], at=T1)
    with serving(root, Counted()) as base:
        homes = [make_home(work / f"h{n}") for n in range(HOMES)]
        for home in homes:
            started.append(home)
            install(home, cart, base, "2s")
        withdrawn = cart.status("withdrawn", "withdrawn by the benchmark")
        publish(root, cart, fillers=0, status=[withdrawn], at=T2)
        published = time.monotonic()
        while any(os.path.lexists(h.link) for h in homes):
            if time.monotonic() - published > DEADLINE:
                raise BenchError(f"links still there {DEADLINE:g} s after the withdrawal")
            time.sleep(0.05)
        took = time.monotonic() - published
        for home in homes:
            home.run("down")
    return took


@dataclass(frozen=True)
class Check:
    client_bytes: int
    server_bytes: int
    requests: list[tuple[str, int]]


def check_costs(work: Path, cart: Cartridge, fillers: int,
                started: list[Home]) -> tuple[Check, Check]:
    """One check of an unchanged registry without conditional requests, then with them."""
    root = work / "registry"
    publish(root, cart, fillers=fillers, status=[], at=T1)
    # Published a minute ago: a Last-Modified within a second of the answer's Date is no
    # validator (the file may change again within that second), and the registry measured
    # here is one that stopped changing.
    published = time.time() - 60
    for path in root.rglob("*"):
        os.utime(path, (published, published))
    counted = Counted()
    with serving(root, counted) as base:
        home = make_home(work / "h")
        started.append(home)
        install(home, cart, base, "off")
        shutil.rmtree(home.http_cache, ignore_errors=True)
        found = []
        for _ in range(2):
            asked, wrote = counted.snapshot()
            doc = json.loads(home.run("refresh", "--json", codes=(0, 1)))
            if doc["failed"]:
                raise BenchError(f"the check failed: {doc['failed']}")
            n, total = counted.snapshot()
            found.append(Check(int(doc["bytes"]), total - wrote, counted.requests[asked:n]))
        home.run("down")
    return found[0], found[1]


def table(latency: list[float], costs: dict[int, tuple[Check, Check]]) -> str:
    def asked(c: Check) -> str:
        return ", ".join(f"{p.lstrip('/')} {s}" for p, s in c.requests)

    rows = [("measure", "figure", "detail"),
            ("publication → links gone, 3 HOMEs, --every 2s",
             f"{statistics.median(latency):.1f} s",
             "median of " + ", ".join(f"{t:.1f}" for t in latency))]
    for n, (first, second) in sorted(costs.items()):
        for label, c in (("no conditional requests", first), ("conditional (304)", second)):
            rows.append((f"one check, index of {n} cartridge{'s' if n > 1 else ''}, {label}",
                         f"{c.client_bytes} B",
                         f"server wrote {c.server_bytes} B: {asked(c)}"))
    widths = [max(len(r[i]) for r in rows) for i in range(3)]
    lines = [" | ".join(cell.ljust(w) for cell, w in zip(r, widths, strict=True)).rstrip()
             for r in rows]
    lines.insert(1, "-+-".join("-" * w for w in widths))
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python3 -m scripts.bench_refresh",
                                     description=__doc__.split("\n\n")[0] if __doc__ else "")
    parser.add_argument("--rounds", type=int, default=3, help="withdrawal rounds (median)")
    parser.add_argument("--sizes", default="1,1000",
                        help="index sizes in cartridges, comma-separated (default 1,1000)")
    parser.add_argument("--work", type=Path,
                        help="where the run's own directory goes (removed at the end)")
    args = parser.parse_args(argv)
    sizes = [int(s) for s in args.sizes.split(",")]
    if args.rounds < 1 or any(s < 1 for s in sizes):
        parser.error("--rounds and --sizes take positive numbers")
    work = Path(tempfile.mkdtemp(prefix="brf", dir=args.work))
    started: list[Home] = []
    try:
        _, cart = signed(work)
        latency = [withdrawal_round(work / f"r{n}", cart, started) for n in range(args.rounds)]
        costs = {n: check_costs(work / f"c{n}", cart, n - 1, started) for n in sizes}
    except BenchError as exc:
        print(f"bench_refresh: error: {exc}", file=sys.stderr)
        return 1
    finally:
        for home in started:
            with contextlib.suppress(subprocess.SubprocessError, OSError):
                acxfs("down", env=home.env, timeout=60)
        shutil.rmtree(work, ignore_errors=True)
    print(table(latency, costs))
    return 0


if __name__ == "__main__":
    sys.exit(main())
