"""`python3 -m scripts.bench_oci` at its smallest (one 64 KiB cartridge, one round) prints one
table with a push row and a fetch row, a figure in every cell a command fills, and leaves no
process, mount or file behind (the figures themselves are judged by people)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
COLUMNS = ["acxfs", "acxfs from disk", "oras-py", "curl"]
EXPECTED = {  # row -> the columns with a figure; the others hold "—"
    "push": {"acxfs", "oras-py"},
    "fetch / install": set(COLUMNS),
}
SECONDS = re.compile(r"^\d+\.\d+ s$")


def processes_naming(path: str) -> list[int]:
    """Live processes whose command line or environment names `path`."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            seen = (entry / "cmdline").read_bytes() + (entry / "environ").read_bytes()
        except OSError:
            continue
        if path.encode() in seen:
            found.append(int(entry.name))
    return found


@pytest.mark.fuse
@pytest.mark.slow
def test_smallest_oci_benchmark_prints_every_row_and_cleans_up() -> None:
    # A short work directory: the library's control socket path must fit in 108 bytes.
    with tempfile.TemporaryDirectory(prefix="boq") as work:
        done = subprocess.run(
            [sys.executable, "-m", "scripts.bench_oci", "--sizes", "64K", "--rounds", "1",
             "--work", work], capture_output=True, text=True, timeout=240, cwd=REPO)
        assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
        assert list(Path(work).iterdir()) == []  # the run directory is gone
        assert work not in Path("/proc/mounts").read_text()
        assert processes_naming(work) == []  # no registry, no daemon left running
    lines = done.stdout.splitlines()
    assert "| cartridge | | " + " | ".join(COLUMNS) + " |" in lines
    rows = [[c.strip() for c in line.strip("|").split("|")] for line in lines
            if line.startswith("| 64 KiB ")]
    assert [row[1] for row in rows] == list(EXPECTED)
    for row in rows:
        cells = dict(zip(COLUMNS, row[2:], strict=True))
        for column, value in cells.items():
            if column in EXPECTED[row[1]]:
                assert SECONDS.match(value), (row[1], column, value)
            else:
                assert value == "—", (row[1], column, value)
    assert "median of 1 rounds" in done.stdout
