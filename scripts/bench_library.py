"""The skills library at scale, side by side in one run: N single-skill bundles installed as

    library             `acxfs add` into the library: one daemon, a link per skill and agent
    per-bundle mounts   one `acxfs mount` (one daemon) per bundle at ~/.claude/skills/<skill>
    plain copies        `acxfs extract --skill` of each into ~/.agents/skills/<skill> (the floor)

For each N (default 10, 50, 200) it measures the daemons' RSS (VmRSS, summed over daemons)
after start-up and after reading every SKILL.md, start-up until every link resolves, adding one
more small bundle (its full check included), and a cold read of every SKILL.md through the
agent directories. A Markdown table of medians goes to stdout, every raw figure to `--json`.

Invariant: nothing outside one temporary directory is touched. Every column runs with its own
HOME, XDG_* directories and trust store inside it, and on any exit (failure, Ctrl-C, SIGTERM)
every daemon started there is stopped, every mount there unmounted and the directory removed.

    python3 -m scripts.bench_library --quick              # CI smoke test, under a minute
    python3 -m scripts.bench_library --json bench-out/library.json
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import json
import os
import platform
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from scripts.bench.results import Cell
from scripts.bench.system import tool, try_drop_caches
from scripts.liveness import status_kib

REPO = Path(__file__).resolve().parent.parent
PUBLISHER = "io.github.bench"
COLUMNS = ("library", "per-bundle mounts", "plain copies")
MEASURES = (  # key, label, unit
    ("install", "install all N (once)", "s"),
    ("daemons", "daemons serving", "count"),
    ("rss_up", "daemon RSS after up", "MiB"),
    ("rss_read", "daemon RSS after reading every SKILL.md", "MiB"),
    ("up", "up until every link resolves", "s"),
    ("add", "add one more bundle (full check)", "s"),
    ("read", "cold read of every SKILL.md", "s"),
)


class BenchError(Exception):
    """A column could not be measured (a command failed, a mount never came up)."""


@dataclass(frozen=True)
class Config:
    sizes: tuple[int, ...]
    reps: int
    quick: bool
    timeout: float  # seconds for one command or one wait
    json_path: Path | None
    work: Path
    keep: bool
    columns: tuple[str, ...]  # slugs of the columns to run


Results = dict[tuple[int, str, str], Cell]  # (N, measure, column)


@dataclass(frozen=True)
class Bundle:
    skill: str
    path: Path
    skill_md: bytes


# --- system -------------------------------------------------------------------------------


def run(args: Sequence[str], env: dict[str, str], timeout: float) -> str:
    try:
        done = subprocess.run(list(args), env=env, capture_output=True, text=True, check=False,
                              timeout=timeout, stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired as exc:
        raise BenchError(f"acxfs {args[1]}: timeout > {timeout:.0f} s") from exc
    if done.returncode != 0:
        lines = (done.stderr or done.stdout).strip().splitlines()
        raise BenchError(f"acxfs {args[1]} exited {done.returncode}: "
                         f"{lines[-1] if lines else 'no output'}")
    return done.stdout


def timed(action: Callable[[], object]) -> float:
    start = time.perf_counter()
    action()
    return time.perf_counter() - start


def mounts_under(root: Path) -> list[Path]:
    """FUSE mounts at or below `root`, deepest first."""
    found = []
    with open("/proc/mounts", encoding="utf-8") as handle:
        for line in handle:
            parts = line.split()
            path = Path(parts[1].replace("\\040", " "))
            if parts[2].startswith("fuse") and (path == root or root in path.parents):
                found.append(path)
    return sorted(found, key=lambda p: len(p.parts), reverse=True)


def unmount(path: Path) -> None:
    for flags in ("-u", "-uz"):
        if path not in mounts_under(path):
            return
        subprocess.run(["fusermount", flags, str(path)], capture_output=True, check=False,
                       timeout=60)


def daemons(root: Path) -> list[int]:
    """Live processes with /dev/fuse open whose HOME lies under `root`: the FUSE daemons a
    column started (no other process of this machine has that HOME)."""
    prefix = f"HOME={root}/".encode()
    pids = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        try:
            environ = Path(f"/proc/{entry}/environ").read_bytes().split(b"\0")
            if not any(item.startswith(prefix) for item in environ):
                continue
            fds = os.listdir(f"/proc/{entry}/fd")
            if any(os.readlink(f"/proc/{entry}/fd/{fd}") == "/dev/fuse" for fd in fds):
                pids.append(int(entry))
        except OSError:
            continue
    return pids


def rss_mib(pids: Iterable[int]) -> float:
    return sum(status_kib(pid, "VmRSS") or 0 for pid in pids) / 1024


def wait_until(ready: Callable[[], bool], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not ready():
        if time.monotonic() > deadline:
            raise BenchError(f"{what} after {timeout:.0f} s")
        time.sleep(0.002)


def stop_daemons(root: Path, timeout: float = 30.0) -> None:
    """Unmount everything under `root`, then end its daemons (SIGTERM, then SIGKILL)."""
    for path in mounts_under(root):
        unmount(path)
    with contextlib.suppress(BenchError):
        wait_until(lambda: not daemons(root), timeout, "daemons still running")
    for sig in (signal.SIGTERM, signal.SIGKILL):
        for pid in daemons(root):
            with contextlib.suppress(OSError):
                os.kill(pid, sig)
        with contextlib.suppress(BenchError):
            wait_until(lambda: not daemons(root), 5, "daemons still running")


def remove_tree(path: Path) -> None:
    """rmtree that also removes read-only directories (the library's store is read-only)."""
    for dirpath, _dirs, _files in os.walk(path):
        with contextlib.suppress(OSError):
            os.chmod(dirpath, 0o700)
    shutil.rmtree(path, ignore_errors=True)


# --- bundles and homes --------------------------------------------------------------------


def isolated_env(root: Path, trust: Path) -> dict[str, str]:
    """This interpreter's environment, with HOME, XDG_* and the trust store under `root`."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ACXFS_", "XDG_"))}
    home = root / "home"
    dirs = {"HOME": home, "XDG_DATA_HOME": home / ".local" / "share",
            "XDG_STATE_HOME": home / ".local" / "state", "XDG_CONFIG_HOME": home / ".config",
            "XDG_CACHE_HOME": home / ".cache", "XDG_RUNTIME_DIR": root / "run"}
    for name, path in dirs.items():
        path.mkdir(parents=True, exist_ok=True, mode=0o700)
        env[name] = str(path)
    env["ACXFS_TRUST_DIR"] = str(trust)
    return env


def skill_files(skill: str, index: int) -> dict[str, bytes]:
    """A small, realistic skill: SKILL.md with front matter, one reference, one script."""
    body = "".join(f"{step}. Step {step} of the {skill} procedure: check the input, act, and "
                   f"report what changed (variant {index}).\n" for step in range(1, 13))
    return {
        "SKILL.md": (f"---\nname: {skill}\ndescription: Benchmark skill number {index}; use it "
                     f"when a library benchmark needs a skill.\n---\n# {skill}\n\n{body}"
                     ).encode(),
        "references/guide.md": (f"# Guide to {skill}\n\n" + body * 4).encode(),
        "scripts/check.sh": f"#!/bin/sh\necho {skill} ok\n".encode(),
    }


def build_bundles(base: Path, env: dict[str, str], count: int, timeout: float) -> list[Bundle]:
    """`count` single-skill cartridges signed with this run's local key."""
    run([tool("acxfs"), "keygen"], env, timeout)
    bundles = []
    for index in range(1, count + 1):
        skill = f"bench-skill-{index:04d}"
        for rel, data in skill_files(skill, index).items():
            (base / "src" / skill / rel).parent.mkdir(parents=True, exist_ok=True)
            (base / "src" / skill / rel).write_bytes(data)
        bundles.append(Bundle(skill, base / "bundles" / f"{skill}.acx",
                              skill_files(skill, index)["SKILL.md"]))
    (base / "bundles").mkdir()
    with ThreadPoolExecutor(max_workers=os.cpu_count() or 2) as pool:
        list(pool.map(lambda b: run([tool("acxfs"), "pack", str(base / "src" / b.skill), "-o",
                                     str(b.path), "--publisher", PUBLISHER], env, timeout),
                      bundles))
    return bundles


# --- the three ways to install ------------------------------------------------------------


class Column:
    """One way of installing N bundles, in its own isolated home under `root`."""

    name = ""
    slug = ""  # short: the library's control socket path must stay under 108 bytes
    has_daemon = True

    def __init__(self, root: Path, trust: Path, timeout: float) -> None:
        self.root = root
        self.env = isolated_env(root, trust)
        self.home = Path(self.env["HOME"])
        self.timeout = timeout
        self.bundles: list[Bundle] = []

    def acxfs(self, *args: str) -> str:
        return run([tool("acxfs"), *args], self.env, self.timeout)

    def skill_md(self, bundle: Bundle) -> Path:
        return self.home / ".claude" / "skills" / bundle.skill / "SKILL.md"

    def install(self, bundles: list[Bundle]) -> float | None:
        """Install every bundle (timed when it is a separate step); the daemons end down."""
        self.bundles = bundles
        return None

    def up(self) -> None:
        """Start serving every installed bundle; returns once every skill is visible."""

    def add(self, bundle: Bundle) -> None:
        """Install one more bundle, until it is visible."""
        raise NotImplementedError

    def undo_add(self, bundle: Bundle) -> None:
        raise NotImplementedError

    def down(self) -> None:
        stop_daemons(self.root, self.timeout)

    def stop(self) -> None:
        """On any exit: nothing of this column left running or mounted."""
        stop_daemons(self.root)

    def resolves(self, bundle: Bundle) -> bool:
        return self.skill_md(bundle).parent.is_dir()


class LibraryColumn(Column):
    name = "library"
    slug = "lib"

    def links(self, bundle: Bundle) -> list[Path]:
        return [self.home / d / "skills" / bundle.skill for d in (".agents", ".claude")]

    def resolves(self, bundle: Bundle) -> bool:
        return all(link.is_symlink() and link.is_dir() for link in self.links(bundle))

    def install(self, bundles: list[Bundle]) -> float | None:
        self.bundles = bundles
        self.acxfs("up")  # `add` starts the daemon itself; starting it first times only the add
        took = timed(lambda: self.acxfs("add", *(str(b.path) for b in bundles)))
        self.down()
        return took

    def up(self) -> None:
        self.acxfs("up")
        wait_until(lambda: all(self.resolves(b) for b in self.bundles), self.timeout,
                   "links not resolving")

    def add(self, bundle: Bundle) -> None:
        self.acxfs("add", str(bundle.path))
        if not self.resolves(bundle):
            raise BenchError(f"acxfs add returned before {bundle.skill} was linked")

    def undo_add(self, bundle: Bundle) -> None:
        self.acxfs("remove", bundle.skill)

    def down(self) -> None:
        self.acxfs("down")
        super().down()

    def stop(self) -> None:
        with contextlib.suppress(BenchError):
            self.acxfs("down")
        super().stop()


class MountsColumn(Column):
    name = "per-bundle mounts"
    slug = "mnt"

    def mountpoint(self, bundle: Bundle) -> Path:
        return self.skill_md(bundle).parent

    def mount(self, bundle: Bundle) -> None:
        self.mountpoint(bundle).mkdir(parents=True, exist_ok=True)
        self.acxfs("mount", str(bundle.path), str(self.mountpoint(bundle)))

    def resolves(self, bundle: Bundle) -> bool:
        return self.mountpoint(bundle) in mounts_under(self.mountpoint(bundle))

    def up(self) -> None:
        for bundle in self.bundles:
            self.mount(bundle)
        wait_until(lambda: all(self.resolves(b) and os.listdir(self.mountpoint(b))
                               for b in self.bundles), self.timeout, "mounts not up")

    def add(self, bundle: Bundle) -> None:
        self.mount(bundle)
        wait_until(lambda: self.resolves(bundle), self.timeout, "mount not up")

    def undo_add(self, bundle: Bundle) -> None:
        unmount(self.mountpoint(bundle))

    def down(self) -> None:
        with ThreadPoolExecutor(max_workers=8) as pool:
            list(pool.map(unmount, mounts_under(self.home)))
        super().down()


class CopiesColumn(Column):
    name = "plain copies"
    slug = "cp"
    has_daemon = False

    def skill_md(self, bundle: Bundle) -> Path:
        return self.home / ".agents" / "skills" / bundle.skill / "SKILL.md"

    def install(self, bundles: list[Bundle]) -> float | None:
        self.bundles = bundles
        start = time.perf_counter()
        for bundle in bundles:
            self.add(bundle)
        return time.perf_counter() - start

    def add(self, bundle: Bundle) -> None:
        self.skill_md(bundle).parent.parent.mkdir(parents=True, exist_ok=True)
        self.acxfs("extract", "--skill", bundle.skill, str(bundle.path),
                   str(self.skill_md(bundle).parent))

    def undo_add(self, bundle: Bundle) -> None:
        shutil.rmtree(self.skill_md(bundle).parent)


COLUMN_TYPES: tuple[type[Column], ...] = (LibraryColumn, MountsColumn, CopiesColumn)


# --- measuring ----------------------------------------------------------------------------


def read_every_skill_md(column: Column) -> float:
    """Seconds to read every SKILL.md through the agent directory; checks the bytes after."""
    paths = [column.skill_md(b) for b in column.bundles]
    start = time.perf_counter()
    got = [path.read_bytes() for path in paths]
    took = time.perf_counter() - start
    for bundle, data in zip(column.bundles, got, strict=True):
        if data != bundle.skill_md:
            raise BenchError(f"{bundle.skill}/SKILL.md read back different bytes")
    return took


def one_rep(column: Column, n: int, extra: Bundle, results: Results, notes: list[str]) -> None:
    """Up, RSS, drop caches, cold read, RSS, add one more, down."""
    def put(measure: str, value: float) -> None:
        results.setdefault((n, measure, column.name), Cell()).values.append(value)

    if column.has_daemon:
        put("up", timed(column.up))
        pids = daemons(column.root)
        if not pids:
            raise BenchError("no daemon found (no process with /dev/fuse open and this HOME)")
        put("daemons", len(pids))
        put("rss_up", rss_mib(pids))
    # The mount is fresh, so the kernel's FUSE caches hold nothing but the looked-up skill
    # directories; drop_caches evicts those too (dentries and inodes), and the page cache.
    dropped, why = try_drop_caches()
    if not dropped and why not in notes:
        notes.append(why)
    put("read", read_every_skill_md(column))
    if column.has_daemon:
        put("rss_read", rss_mib(daemons(column.root)))
    put("add", timed(lambda: column.add(extra)))
    column.undo_add(extra)
    if column.has_daemon:
        column.down()


def bench_size(n: int, columns: list[Column], bundles: list[Bundle], reps: int,
               results: Results, notes: list[str], log: Callable[[str], None]) -> dict[str, str]:
    """Every column at N bundles; returns why each failed column failed."""
    broken: dict[str, str] = {}

    def attempt(column: Column, what: str, step: Callable[[], None]) -> None:
        if column.name in broken:
            return
        log(f"N={n} {column.name}: {what}")
        try:
            step()
        except BenchError as exc:
            broken[column.name] = str(exc)
            log(f"N={n} {column.name}: failed: {exc}")
            column.stop()

    def install(column: Column) -> None:
        took = column.install(bundles[:n])
        cell = results.setdefault((n, "install", column.name), Cell(note="= up"))
        if took is not None:
            cell.values.append(took)

    try:
        for column in columns:
            attempt(column, "install", functools.partial(install, column))
        for rep in range(reps):  # interleaved, so drift hits every column alike
            for column in columns:
                attempt(column, f"rep {rep + 1}/{reps}",
                        functools.partial(one_rep, column, n, bundles[-1], results, notes))
    finally:
        for column in columns:
            column.stop()
    return broken


def bench(cfg: Config, base: Path, log: Callable[[str], None], results: Results,
          notes: list[str], failures: list[str]) -> None:
    """Fill `results` (what was measured before a failure or Ctrl-C stays there); page-cache
    notes go to `notes`, one line per failed column to `failures`."""
    trust = base / "trust"
    log(f"packing {max(cfg.sizes) + 1} single-skill bundles ...")
    bundles = build_bundles(base / "build", isolated_env(base / "build", trust),
                            max(cfg.sizes) + 1, cfg.timeout)
    for n in cfg.sizes:
        columns = [kind(base / f"n{n}-{kind.slug}", trust, cfg.timeout)
                   for kind in COLUMN_TYPES if kind.slug in cfg.columns]
        for name, reason in bench_size(n, columns, bundles, cfg.reps, results, notes,
                                       log).items():
            failures.append(f"N={n} {name}: {reason}")
            for key, _label, _unit in MEASURES:
                cell = results.setdefault((n, key, name), Cell())
                cell.note = cell.note if cell.values else "failed"


# --- output -------------------------------------------------------------------------------


def cell_text(results: Results, n: int, key: str, column: str, unit: str) -> str:
    cell = results.get((n, key, column))
    if column == "plain copies" and key in ("daemons", "rss_up", "rss_read", "up"):
        return "0" if key == "daemons" else "none" if key != "up" else "nothing to start"
    if cell is None or cell.median is None:
        return cell.note if cell else "not run"
    value = cell.median
    text = f"{value:.0f}" if unit == "count" or value >= 1000 else f"{value:.3g}"
    floor = results.get((n, key, "plain copies"))
    if key == "read" and column != "plain copies" and floor and floor.median:
        text += f" ({value / floor.median:.1f}x)"
    return text


def targets(results: Results, n: int) -> list[tuple[str, str, bool | None]]:
    """The issue's targets for the library at N: (goal, figure, met or None if unknown)."""
    def med(key: str, column: str = "library") -> float | None:
        cell = results.get((n, key, column))
        return cell.median if cell else None

    read, floor = med("read"), med("read", "plain copies")
    ratio = read / floor if read is not None and floor else None
    return [(goal, "n/a" if value is None else f"{value:.2f} {unit}",
             None if value is None else value < limit)
            for goal, value, unit, limit in (
                ("one daemon under 60 MiB RSS", med("rss_read"), "MiB", 60),
                ("`acxfs up` under 2 s", med("up"), "s", 2),
                ("`add` of one small bundle under 0.5 s", med("add"), "s", 0.5),
                ("cold SKILL.md scan within 3x of plain copies", ratio, "x", 3))]


def render(cfg: Config, results: Results, notes: list[str], failures: list[str], elapsed: float,
           rev: str) -> str:
    cache = "; ".join(notes) or ("page cache, dentries and inodes dropped (drop_caches=3) "
                                 "before every cold read")
    lines = [
        f"## acxfs skills library benchmark ({'quick' if cfg.quick else 'full'} run, "
        f"{time.strftime('%Y-%m-%d %H:%M')}, {elapsed / 60:.1f} min)", "",
        f"Medians of {cfg.reps} rep(s), columns interleaved. Each rep starts every daemon "
        "afresh (library: `acxfs up`; mounts: one `acxfs mount` per bundle), so the FUSE "
        f"kernel caches start empty; {cache}. RSS is VmRSS summed over the daemons. Host: "
        f"{platform.node()}, {os.cpu_count()} cores, Linux {platform.release()}, Python "
        f"{platform.python_version()}; acxfs at {rev}.", "",
        "| N | measure | unit | " + " | ".join(COLUMNS) + " |",
        "|---:|---|---|" + "---:|" * len(COLUMNS),
    ]
    for n in cfg.sizes:
        for key, label, unit in MEASURES:
            cells = [cell_text(results, n, key, c, unit) for c in COLUMNS]
            lines.append(f"| {n} | {label} | {unit} | " + " | ".join(cells) + " |")
    n = max(cfg.sizes)
    lines += ["", f"### Targets at N = {n} (library)", "", "| target | this run | met |",
              "|---|---|---|"]
    for goal, figure, met in targets(results, n):
        lines.append(f"| {goal} | {figure} | "
                     f"{ {True: 'yes', False: '**no**', None: 'cannot tell'}[met]} |")
    if failures:
        lines += ["", "Failed columns:", *(f"- {line}" for line in failures)]
    return "\n".join(lines) + "\n"


def revision() -> str:
    """The commit measured, '+dirty' when acxfs/ has local changes."""
    def git(*args: str) -> str:
        return subprocess.run(["git", "-C", str(REPO), *args], capture_output=True, text=True,
                              timeout=30, check=False).stdout.strip()

    with contextlib.suppress(OSError, subprocess.SubprocessError):
        dirty = "+dirty" if git("status", "--porcelain", "acxfs") else ""
        return (git("rev-parse", "--short", "HEAD") or "unknown") + dirty
    return "unknown"


def write_json(cfg: Config, results: Results, markdown: str, rev: str, complete: bool) -> None:
    if cfg.json_path is None:
        return
    doc = {
        "complete": complete, "acxfs_revision": rev, "markdown": markdown,
        "config": {"sizes": cfg.sizes, "reps": cfg.reps, "quick": cfg.quick},
        "host": {"node": platform.node(), "cores": os.cpu_count(),
                 "kernel": platform.release(), "python": platform.python_version()},
        "results": [{"n": n, "measure": key, "column": column, "values": cell.values,
                     "median": cell.median, "note": cell.note}
                    for (n, key, column), cell in results.items()],
    }
    cfg.json_path.parent.mkdir(parents=True, exist_ok=True)
    cfg.json_path.write_text(json.dumps(doc, indent=2))


def compile_acxfs() -> None:
    """Byte-compile acxfs as a regular install is: with PYTHONDONTWRITEBYTECODE an editable
    install would otherwise compile its sources at every command."""
    subprocess.run([sys.executable, "-m", "compileall", "-q", str(REPO / "acxfs")],
                   capture_output=True, check=False, timeout=300)


def parse_args(argv: Sequence[str] | None) -> Config:
    parser = argparse.ArgumentParser(
        description="N single-skill bundles as the acxfs skills library, as per-bundle "
        "acxfs mounts and as plain copies, side by side.",
        epilog="example:\n  python3 -m scripts.bench_library --sizes 10,50 --reps 5 "
        "--json bench-out/library.json", formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="N = 10, 1 rep (CI, < 60 s)")
    parser.add_argument("--sizes", metavar="LIST", help="bundle counts (default: 10,50,200)")
    parser.add_argument("--reps", type=int, metavar="R", help="repetitions (default: 3)")
    parser.add_argument("--json", metavar="FILE", help="write every raw figure there")
    parser.add_argument("--work", default=str(REPO / "bench-out"), metavar="DIR",
                        help="where the temporary run directory goes (default: bench-out; "
                        "not tmpfs, or drop_caches cannot make the copies cold)")
    parser.add_argument("--keep", action="store_true", help="keep the run directory")
    parser.add_argument("--columns", default="lib,mnt,cp", metavar="LIST",
                        help="subset of lib (library), mnt (per-bundle mounts), cp (plain "
                        "copies); default: all")
    args = parser.parse_args(argv)
    try:
        sizes = tuple(int(s) for s in args.sizes.split(",")) if args.sizes else (
            (10,) if args.quick else (10, 50, 200))
    except ValueError:
        parser.error(f"--sizes: not a list of numbers: {args.sizes}")
    if not sizes or min(sizes) < 1 or (args.reps is not None and args.reps < 1):
        parser.error("--sizes and --reps must be positive")
    columns = tuple(args.columns.split(","))
    if not set(columns) <= {kind.slug for kind in COLUMN_TYPES}:
        parser.error(f"--columns: not a subset of lib,mnt,cp: {args.columns}")
    return Config(sizes, args.reps or (1 if args.quick else 3), bool(args.quick),
                  30.0 if args.quick else 600.0, Path(args.json).resolve() if args.json
                  else None, Path(args.work).resolve(), bool(args.keep), columns)


def main(argv: Sequence[str] | None = None) -> int:
    cfg = parse_args(argv)
    started = time.perf_counter()

    def log(message: str) -> None:
        print(f"[{time.perf_counter() - started:6.1f}s] {message}", file=sys.stderr, flush=True)

    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    signal.signal(signal.SIGINT, signal.default_int_handler)  # even when started with it ignored
    cfg.work.mkdir(parents=True, exist_ok=True)
    base = Path(tempfile.mkdtemp(prefix="bl-", dir=cfg.work))
    rev = revision()
    results: Results = {}
    notes: list[str] = []
    failures: list[str] = []
    complete = False
    try:
        compile_acxfs()
        bench(cfg, base, log, results, notes, failures)
        complete = not failures
    except (BenchError, KeyboardInterrupt) as exc:
        failures.append(f"run stopped: {str(exc) or 'interrupted (Ctrl-C)'}")
    finally:
        stop_daemons(base)
        if cfg.keep:
            log(f"kept {base}")
        else:
            remove_tree(base)
    markdown = render(cfg, results, notes, failures, time.perf_counter() - started, rev)
    print(markdown)
    write_json(cfg, results, markdown, rev, complete)
    return 0 if complete else 1


if __name__ == "__main__":
    sys.exit(main())
