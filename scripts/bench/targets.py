"""The performance goals acxfs is scored against after every run (and again for the libfuse3
backend when it ran), each met, missed, or not decidable from this run's figures.
"""

from __future__ import annotations

from scripts.bench.config import Config
from scripts.bench.datasets import count_label
from scripts.bench.results import Table, Target


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
    """The issue's targets for acxfs (libfuse2), then again for each libfuse3 backend that ran."""
    targets = evaluate_targets_for(cfg, table, "acxfs")
    row = table.get("c.read.warm") or table.get("d.seq.warm") or table.get("a.mount.warm.1000")
    for peer, backend in (("acxfs libfuse3", "libfuse3"), ("acxfs lowlevel", "libfuse3-lowlevel")):
        if row is not None and row.median(peer) is not None:
            for target in evaluate_targets_for(cfg, table, peer):
                targets.append(Target(f"[--backend {backend}] {target.goal}", target.figure,
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
