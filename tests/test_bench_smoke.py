"""`python3 -m scripts.bench` runs: a smoke check for CI (speed is judged by people reading its
table)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent


@pytest.mark.fuse
@pytest.mark.slow
def test_quick_benchmark_runs_and_reports_every_peer(tmp_path: Path) -> None:
    out = tmp_path / "bench.json"
    done = subprocess.run(
        [sys.executable, "-m", "scripts.bench", "--quick", "--peers", "plain,acxfs",
         "--workloads", "a,e", "--work", str(tmp_path / "work"), "--json", str(out)],
        capture_output=True, text=True, timeout=600, cwd=REPO,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert "| workload |" in done.stdout and "acxfs" in done.stdout
    assert "ratarmount: not selected" in done.stdout  # absent peers are reported, not dropped
    doc = json.loads(out.read_text())
    assert doc
    assert "blobs_inflated = 2 for 2 files" in done.stdout
