"""The timed workloads, one function per letter of `--workloads`: (a) mount, (b) listing,
(c) reading every small file, (d) one large file, (e) two large files alternately, (f) parallel
readers, (v) `acxfs verify --deep`, (p) what building each input cost.

Each fills its rows of the table with one cell per peer.
"""

from __future__ import annotations

import functools
import json
import os
from collections.abc import Callable

from scripts.bench.config import MiB
from scripts.bench.context import Context
from scripts.bench.datasets import Dataset, Datasets, count_label
from scripts.bench.floor import inflate_and_hash, inflate_floor
from scripts.bench.measuring import Op, cold_and_warm, not_applicable, record, warm_per_mount
from scripts.bench.peers import AcxfsPeer, ExtractPeer, Mount, NullPeer, Peer, PlainPeer
from scripts.bench.results import Cell
from scripts.bench.system import peak_rss_mib, timed_command, tool, try_drop_caches
from scripts.bench.worker import in_worker


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
        for command, argv in (("find -ls", ["find", "{root}", "-ls"]),
                              ("ls -lR", ["ls", "-lR", "{root}"])):
            slug = command.split()[0]
            rows = [ctx.table.row(f"b.{slug}.{state}.{count}",
                                  f"(b) `{command}`, {label} files, {state}", "s")
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
    per_mount = warm_per_mount(ctx)

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
    """Cold and warm runs, and the daemon's inflation counter after each mount's runs."""
    counts: list[float] = []

    def count_inflations(mount: Mount) -> None:
        stats = json.loads(os.getxattr(mount.root, "user.acx.stats"))
        counts.append(float(stats["blobs_inflated"]))

    cold, warm = cold_and_warm(ctx, peer, ds, op, after=count_inflations)
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
