"""`python3 -m scripts.bench_refresh` at its smallest (one withdrawal round, an index of one
cartridge) prints one table with the latency row and both check rows, a figure in each, the
conditional check answered 304, and leaves no directory, mount or daemon behind (the figures
themselves are judged by people)."""

from __future__ import annotations

import re
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from tests.test_bench_oci_smoke import processes_naming

REPO = Path(__file__).resolve().parent.parent


@pytest.mark.fuse
@pytest.mark.slow
def test_smallest_refresh_benchmark_prints_every_row_and_cleans_up() -> None:
    # A short work directory: the library's control socket path must fit in 108 bytes.
    with tempfile.TemporaryDirectory(prefix="brs") as work:
        done = subprocess.run(
            [sys.executable, "-m", "scripts.bench_refresh", "--rounds", "1", "--sizes", "1",
             "--work", work], capture_output=True, text=True, timeout=300, cwd=REPO)
        assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
        assert list(Path(work).iterdir()) == []
        assert work not in Path("/proc/mounts").read_text()
        assert processes_naming(work) == []
    rows = [line.split(" | ") for line in done.stdout.splitlines() if " | " in line]
    assert rows[0][:2] == ["measure".ljust(len(rows[0][0])), "figure".ljust(len(rows[0][1]))]
    latency, first, second = rows[1:]
    assert latency[0].startswith("publication") and re.fullmatch(r"\d+\.\d s", latency[1].strip())
    assert "no conditional" in first[0] and "conditional (304)" in second[0]
    assert int(first[1].strip().removesuffix(" B")) > 0
    assert second[1].strip() == "0 B"
    assert "index.json 304" in second[2] and "index.json 200" in first[2]
