"""`python3 -m scripts.bench_library --quick` runs every column and prints one table of the right
shape, the agents' start-up rows and where the library's gap to plain copies lies included,
leaving no mount, daemon or file behind (the figures themselves are judged by people). A
start-up row holds figures wherever the pinned agent is installed (always under CI=true);
elsewhere it says the agent is absent."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from scripts.agent_runs.runs import agent_problem
from scripts.bench_library.config import STARTUP_AGENTS

REPO = Path(__file__).resolve().parent.parent
COLUMNS = ["library", "library, directories whole", "per-bundle mounts", "copies behind links",
           "plain copies"]
STARTING = ("library", "library, directories whole", "copies behind links",
            "plain copies")  # the columns agents start with
DAEMONS = ("library", "library, directories whole", "per-bundle mounts")
MEASURES = ["install all N (once)", "daemons serving", "daemon RSS after up",
            "daemon RSS after reading every SKILL.md", "up until every link resolves",
            "add one more bundle (full check)", "cold read of every SKILL.md"]
STARTUP = {f"{name} start-up to {until}, {temperature}": slug
           for slug, name, until in STARTUP_AGENTS for temperature in ("cold", "warm")}
QUICK_AGENTS = ("claude", "codex")  # whose start-up --quick measures; the others are "not run"
RATIO = re.compile(r"^\d+\.\d\dx$")
NUMBER = re.compile(r"^\d+(\.\d+)?(e[-+]\d+)?( \(\d+(\.\d+)?x\))?$")


@pytest.mark.fuse
@pytest.mark.slow
def test_quick_library_benchmark_prints_every_column_and_cleans_up(tmp_path: Path) -> None:
    out = tmp_path / "library.json"
    # A short work directory: the library's control socket path must fit in 108 bytes.
    with tempfile.TemporaryDirectory(prefix="blq") as work:
        done = subprocess.run(
            [sys.executable, "-m", "scripts.bench_library", "--quick", "--work", work,
             "--json", str(out)],
            capture_output=True, text=True, timeout=240, cwd=REPO,
        )
        assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
        assert list(Path(work).iterdir()) == []  # the run directory is gone
        assert work not in Path("/proc/mounts").read_text()
    lines = done.stdout.splitlines()
    header = "| N | measure | unit | " + " | ".join(COLUMNS) + " |"
    assert header in lines
    rows = [line.split(" | ") for line in lines if line.startswith("| 10 | ")]
    assert [row[1] for row in rows] == MEASURES + list(STARTUP)
    cells = {row[1]: dict(zip(COLUMNS, [c.rstrip(" |") for c in row[3:]], strict=True))
             for row in rows}
    assert cells["daemons serving"] == {"library": "1", "library, directories whole": "1",
                                        "per-bundle mounts": "10", "copies behind links": "0",
                                        "plain copies": "0"}
    for column in COLUMNS:
        measure = "cold read of every SKILL.md"
        assert NUMBER.match(cells[measure][column]), (measure, column, cells[measure])
        measure = "add one more bundle (full check)"
        if column == "copies behind links":
            assert cells[measure][column] == "not measured", cells[measure]
        else:
            assert NUMBER.match(cells[measure][column]), (measure, column, cells[measure])
    for measure in MEASURES[2:6]:
        for column in DAEMONS:
            assert NUMBER.match(cells[measure][column]), (measure, column, cells[measure])
    for measure, agent in STARTUP.items():
        assert cells[measure]["per-bundle mounts"] == "not measured"
        if agent not in QUICK_AGENTS:
            assert {cells[measure][column] for column in STARTING} == {"not run"}
            continue
        for column in STARTING:
            if agent_problem(agent) and os.environ.get("CI") != "true":
                assert cells[measure][column].startswith("absent: "), cells[measure]
            else:
                assert NUMBER.match(cells[measure][column]), (measure, column, cells[measure])
    assert "### Where the library's gap lies at N = 10" in lines
    split = {row[0].lstrip("| "): row[1:] for row in (line.split(" | ") for line in lines)
             if len(row) == 4 and all(RATIO.match(c.rstrip(" |")) for c in row[1:])}
    assert "cold read of every SKILL.md" in split, split
    assert "Failed columns" not in done.stdout
    doc = json.loads(out.read_text())
    assert doc["complete"] is True
    measured = {(r["column"], r["measure"]) for r in doc["results"] if r["values"]}
    assert {(c, "read") for c in COLUMNS} <= measured
