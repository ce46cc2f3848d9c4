"""The output of a library benchmark: the Markdown table (medians per N, measure and column,
reads and agent start-ups also as a multiple of plain copies), where the library's gap to plain
copies lies (the links and layout, which the copies behind links have too, or the daemon), the
targets at the largest N, and the JSON file.
"""

from __future__ import annotations

import json
import os
import time

from scripts.bench.provenance import host_facts, host_line
from scripts.bench_library.config import (
    COLUMNS,
    COPIES,
    LIBRARIES,
    LIBRARY,
    LINKED,
    MEASURES,
    MOUNTS,
    NO_DAEMON,
    STARTUP_MEASURES,
    Config,
    Results,
)
from scripts.bench_library.startup import round_ratios

STARTUP_KEYS = {key for key, _, _ in STARTUP_MEASURES}
GATED = ("start_claude_", "start_codex_")  # the agents the start-up goal names


def cell_text(results: Results, n: int, key: str, column: str, unit: str) -> str:
    cell = results.get((n, key, column))
    if column in NO_DAEMON and key in ("daemons", "rss_up", "rss_read", "up"):
        return "0" if key == "daemons" else "none" if key != "up" else "nothing to start"
    if (column == MOUNTS and key in STARTUP_KEYS) or (column == LINKED and key == "add"):
        return "not measured"
    if cell is None or cell.median is None:
        return cell.note if cell else "not run"
    value = cell.median
    text = f"{value:.0f}" if unit == "count" or value >= 1000 else f"{value:.3g}"
    floor = results.get((n, key, COPIES))
    if key in ("read", *STARTUP_KEYS) and column != COPIES and floor and floor.median:
        text += f" ({value / floor.median:.{2 if key in STARTUP_KEYS else 1}f}x)"
    return text


def measures_at(results: Results, n: int) -> list[tuple[str, str, str]]:
    """The rows of N: every measure, and the start-up ones where they were run."""
    ran = any(key in STARTUP_KEYS for (size, key, _) in results if size == n)
    return [*MEASURES, *(STARTUP_MEASURES if ran else ())]


GAP_COLUMNS = ("library / plain copies", "copies behind links / plain copies",
               "library / copies behind links")


def gap(results: Results, n: int) -> list[tuple[str, list[str]]]:
    """Each read and start-up row at N that the library, the copies behind links and plain
    copies all measured: (label, the three ratios of medians of GAP_COLUMNS). The second is
    what the links and layout cost without FUSE; the third, what the daemon adds to them."""
    rows = []
    for key, label, _unit in measures_at(results, n):
        if key != "read" and key not in STARTUP_KEYS:
            continue
        lib, ln, cp = (results.get((n, key, c)) for c in (LIBRARY, LINKED, COPIES))
        medians = [c.median if c else None for c in (lib, ln, cp)]
        if None in medians or 0 in medians:
            continue
        a, b, c = (m for m in medians if m is not None)
        rows.append((label, [f"{x:.2f}x" for x in (a / c, b / c, a / b)]))
    return rows


VERDICTS = {True: "yes", False: "**no**", None: "cannot tell"}
NOT_SCORED = "not a goal"  # the verdict of a row the issue reports but sets no limit for


def targets(results: Results, n: int, library: str = LIBRARY) -> list[tuple[str, str, str]]:
    """The issue's targets for the library column `library` at N: (goal, figure, verdict). A
    goal's verdict is yes, **no**, or cannot tell (no figure); a row with no limit is
    reported, never scored."""
    def med(key: str, column: str = library) -> float | None:
        cell = results.get((n, key, column))
        return cell.median if cell else None

    def ratio(key: str) -> float | None:
        value, floor = med(key), med(key, COPIES)
        return value / floor if value is not None and floor else None

    gated = sorted(key for key in STARTUP_KEYS if key.startswith(GATED))
    started = [r for key in gated if (r := ratio(key)) is not None]
    rounds = round_ratios(results, n, gated, library)
    rows: tuple[tuple[str, float | None, str, float | None], ...] = (
        ("one daemon under 60 MiB RSS", med("rss_read"), "MiB", 60),
        ("`acxfs up` under 1 s", med("up"), "s", 1),
        ("`add` of one small bundle under 0.5 s", med("add"), "s", 0.5),
        ("cold SKILL.md scan within 3x of plain copies", ratio("read"), "x", 3),
        ("Claude Code and Codex start-up within 1.10x of plain copies, cold and warm "
         "(worst median)", max(started, default=None), "x", 1.10),
        ("Claude Code and Codex start-up, worst single round", max(rounds, default=None),
         "x", None))
    return [(goal, "n/a" if value is None else f"{value:.2f} {unit}",
             NOT_SCORED if limit is None else VERDICTS[None if value is None
                                                       else value <= limit])
            for goal, value, unit, limit in rows]


def render(cfg: Config, results: Results, notes: list[str], failures: list[str], elapsed: float,
           rev: str) -> str:
    cache = "; ".join(notes) or ("page cache, dentries and inodes dropped (drop_caches=3) "
                                 "before every cold read")
    lines = [
        f"## acxfs skills library benchmark ({'quick' if cfg.quick else 'full'} run, "
        f"{time.strftime('%Y-%m-%d %H:%M')}, {elapsed / 60:.1f} min)", "",
        f"Medians of {cfg.reps} rep(s), columns interleaved. Each rep starts every daemon "
        "afresh (library: `acxfs up`; mounts: one `acxfs mount` per bundle), so the FUSE "
        "kernel caches start empty; copies behind links are plain copies at the real paths "
        "of the library's links, behind links like its, with no daemon; "
        f"{cache}. RSS is VmRSS summed over the daemons. "
        "Start-up (largest N): from the agent's start to its first model request, headless "
        "against a loopback mock, every skill checked to be listed; cold is after `acxfs down`, "
        "`acxfs up` and a cache drop, warm right after; one unmeasured start first, then "
        f"{cfg.reps} interleaved round(s). Load average at the end: {os.getloadavg()[0]:.1f}. "
        f"{host_line(rev)}", "",
        "| N | measure | unit | " + " | ".join(COLUMNS) + " |",
        "|---:|---|---|" + "---:|" * len(COLUMNS),
    ]
    for n in cfg.sizes:
        for key, label, unit in measures_at(results, n):
            cells = [cell_text(results, n, key, c, unit) for c in COLUMNS]
            lines.append(f"| {n} | {label} | {unit} | " + " | ".join(cells) + " |")
    n = max(cfg.sizes)
    split = gap(results, n)
    if split:
        lines += ["", f"### Where the library's gap lies at N = {n}", "",
                  "Ratios of medians: the copies behind links have the library's links and "
                  "layout but no daemon, so their ratio to plain copies is what the links and "
                  "the depth of the real paths cost, and the library's ratio to them what the "
                  "FUSE daemon adds.", "",
                  "| measure | " + " | ".join(GAP_COLUMNS) + " |",
                  "|---|" + "---:|" * len(GAP_COLUMNS)]
        lines += [f"| {label} | " + " | ".join(ratios) + " |" for label, ratios in split]
    for library in LIBRARIES:
        if not any(size == n and column == library for size, _, column in results):
            continue
        lines += ["", f"### Targets at N = {n} ({library})", "", "| target | this run | met |",
                  "|---|---|---|"]
        lines += [f"| {goal} | {figure} | {verdict} |"
                  for goal, figure, verdict in targets(results, n, library)]
    if failures:
        lines += ["", "Failed columns:", *(f"- {line}" for line in failures)]
    return "\n".join(lines) + "\n"


def write_json(cfg: Config, results: Results, markdown: str, rev: str, complete: bool) -> None:
    if cfg.json_path is None:
        return
    doc = {
        "complete": complete, "acxfs_revision": rev, "markdown": markdown,
        "config": {"sizes": cfg.sizes, "reps": cfg.reps, "quick": cfg.quick},
        "host": host_facts(),
        "results": [{"n": n, "measure": key, "column": column, "values": cell.values,
                     "median": cell.median, "note": cell.note}
                    for (n, key, column), cell in results.items()],
    }
    cfg.json_path.parent.mkdir(parents=True, exist_ok=True)
    cfg.json_path.write_text(json.dumps(doc, indent=2))
