"""The side-by-side output of a run: the Markdown table of medians with the targets (stdout),
and the JSON file with every raw run, the configuration, host, versions and datasets.
"""

from __future__ import annotations

import contextlib
import json
import shutil
import subprocess
import time
from dataclasses import asdict
from pathlib import Path

from scripts.bench.context import Context
from scripts.bench.datasets import Datasets
from scripts.bench.peers import Peer
from scripts.bench.provenance import host_facts, host_line
from scripts.bench.results import Cell, Target


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
        f"## acxfs benchmark ({cfg.scale} run, "
        f"{datetime_now()}, {elapsed / 60:.1f} min)",
        "",
        f"Medians of {cfg.cold_reps} cold run(s) (fresh mount each; {ctx.drop_note}) and "
        f"{cfg.warm_reps} warm run(s) (same mount). {host_line(ctx.revision)}",
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
        "config": {"quick": cfg.quick,
                   **{k: (str(v) if isinstance(v, Path) else v) for k, v in asdict(cfg).items()}},
        "host": host_facts(),
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
