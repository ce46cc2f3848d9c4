"""`scripts.bench_library.link_layouts` runs Codex against every layout of links, checks that
each start listed every skill, prints one row per layout and leaves nothing behind."""

from __future__ import annotations

import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from scripts.bench_library.link_layouts import LAYOUTS
from tests.support.agent_setup import require

pytestmark = pytest.mark.slow


def test_link_layouts_benchmark_prints_every_layout_and_cleans_up(tmp_path: Path) -> None:
    require("codex")
    before = set(Path(tempfile.gettempdir()).glob("acxfs-links-*"))
    done = subprocess.run([sys.executable, "-m", "scripts.bench_library.link_layouts",
                           "--skills", "3", "--rounds", "1"], capture_output=True, text=True,
                          timeout=300, check=False, cwd=Path(__file__).parent.parent)
    assert done.returncode == 0, done.stderr
    rows = [line for line in done.stdout.splitlines() if line.startswith("| ")][1:]
    assert [row.split(" | ")[0].removeprefix("| ") for row in rows] == list(LAYOUTS)
    assert rows[0].endswith("| 1.00x |")
    assert set(Path(tempfile.gettempdir()).glob("acxfs-links-*")) == before
