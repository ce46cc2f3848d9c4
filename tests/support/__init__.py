"""Test support: independent writers of both formats, real mounts, hostile inputs, demo data.

Nothing here is a test. Every module is importable as ``tests.support.<name>`` from the
repository root (pytest, mypy and ``python -m scripts.fuzz`` all start there). The real
artifacts the tests read live in ``tests/fixtures/`` (``FIXTURES``), inside the repository, so a
clone runs its tests alone.
"""

from __future__ import annotations

from pathlib import Path

REPO = Path(__file__).resolve().parent.parent.parent
FIXTURES = REPO / "tests" / "fixtures"
REAL = FIXTURES / "real"
