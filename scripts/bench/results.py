"""The measurements of a run: one row per workload figure, one cell per peer holding every
measured value (or why nothing was measured), and the performance targets judged from them.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field


@dataclass
class Cell:
    """One peer's runs of one row; `note` replaces the value when nothing was measured."""

    values: list[float] = field(default_factory=list)
    note: str = ""

    @property
    def median(self) -> float | None:
        return statistics.median(self.values) if self.values else None


@dataclass
class Row:
    key: str
    label: str
    unit: str
    cells: dict[str, Cell] = field(default_factory=dict)

    def median(self, peer: str) -> float | None:
        cell = self.cells.get(peer)
        return cell.median if cell else None


@dataclass
class Target:
    """One performance goal and whether this run meets it (None: cannot tell)."""

    goal: str
    figure: str
    met: bool | None


@dataclass
class Table:
    rows: dict[str, Row] = field(default_factory=dict)

    def row(self, key: str, label: str, unit: str) -> Row:
        if key not in self.rows:
            self.rows[key] = Row(key, label, unit)
        return self.rows[key]

    def get(self, key: str) -> Row | None:
        return self.rows.get(key)
