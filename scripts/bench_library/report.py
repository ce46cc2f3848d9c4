"""The output of a library benchmark: the Markdown table (medians per N, measure and column,
reads and agent start-ups also as a multiple of plain copies), the targets at the largest N,
and the JSON file.
"""

from __future__ import annotations

import json
import os
import time

from scripts.bench.provenance import host_facts, host_line
from scripts.bench_library.config import COLUMNS, MEASURES, STARTUP_MEASURES, Config, Results
from scripts.bench_library.startup import round_ratios

STARTUP_KEYS = {key for key, _, _ in STARTUP_MEASURES}
GATED = ("start_claude_", "start_codex_")  # the agents the start-up goal names


def cell_text(results: Results, n: int, key: str, column: str, unit: str) -> str:
    cell = results.get((n, key, column))
    if column == "plain copies" and key in ("daemons", "rss_up", "rss_read", "up"):
        return "0" if key == "daemons" else "none" if key != "up" else "nothing to start"
    if column == "per-bundle mounts" and key in STARTUP_KEYS:
        return "not measured"
    if cell is None or cell.median is None:
        return cell.note if cell else "not run"
    value = cell.median
    text = f"{value:.0f}" if unit == "count" or value >= 1000 else f"{value:.3g}"
    floor = results.get((n, key, "plain copies"))
    if key in ("read", *STARTUP_KEYS) and column != "plain copies" and floor and floor.median:
        text += f" ({value / floor.median:.{2 if key in STARTUP_KEYS else 1}f}x)"
    return text


def measures_at(results: Results, n: int) -> list[tuple[str, str, str]]:
    """The rows of N: every measure, and the start-up ones where they were run."""
    ran = any(key in STARTUP_KEYS for (size, key, _) in results if size == n)
    return [*MEASURES, *(STARTUP_MEASURES if ran else ())]


VERDICTS = {True: "yes", False: "**no**", None: "cannot tell"}
NOT_SCORED = "not a goal"  # the verdict of a row the issue reports but sets no limit for


def targets(results: Results, n: int) -> list[tuple[str, str, str]]:
    """The issue's targets for the library at N: (goal, figure, verdict). A goal's verdict is
    yes, **no**, or cannot tell (no figure); a row with no limit is reported, never scored."""
    def med(key: str, column: str = "library") -> float | None:
        cell = results.get((n, key, column))
        return cell.median if cell else None

    def ratio(key: str) -> float | None:
        value, floor = med(key), med(key, "plain copies")
        return value / floor if value is not None and floor else None

    gated = sorted(key for key in STARTUP_KEYS if key.startswith(GATED))
    started = [r for key in gated if (r := ratio(key)) is not None]
    rounds = round_ratios(results, n, gated)
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
        f"kernel caches start empty; {cache}. RSS is VmRSS summed over the daemons. "
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
    lines += ["", f"### Targets at N = {n} (library)", "", "| target | this run | met |",
              "|---|---|---|"]
    for goal, figure, verdict in targets(results, n):
        lines.append(f"| {goal} | {figure} | {verdict} |")
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
