"""Test support: the independent .azp writer, demo data, agents, the library's paths, attackers.

Nothing here is a test. Every module is importable as ``tests.support.<name>`` from the
repository root (pytest and mypy start there). The helpers the scripts share with the tests (the
cartridge writer, real mounts, hostile inputs) live in ``scripts/``, which never imports
``tests``. The real
artifacts the tests read live in ``tests/fixtures/`` (``FIXTURES``), inside the repository, so a
clone runs its tests alone.
"""

from __future__ import annotations

from pathlib import Path

REPO = Path(__file__).resolve().parent.parent.parent
FIXTURES = REPO / "tests" / "fixtures"
REAL = FIXTURES / "real"
