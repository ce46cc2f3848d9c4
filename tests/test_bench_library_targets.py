"""The library benchmark scores each goal of the issue against its limit: a worst median over
1.10x of plain copies is **no**, and the worst single round, which has no limit, is reported
without a verdict (never "yes" whatever it measured)."""

from __future__ import annotations

from scripts.bench.results import Cell
from scripts.bench_library.config import Results
from scripts.bench_library.report import NOT_SCORED, targets

N = 200


def _startups(library: list[float], copies: list[float]) -> Results:
    results: Results = {}
    for agent in ("claude", "codex"):
        for temperature in ("cold", "warm"):
            key = f"start_{agent}_{temperature}"
            results[(N, key, "library")] = Cell(values=list(library))
            results[(N, key, "plain copies")] = Cell(values=list(copies))
    return results


def _start_up_rows(library: list[float], copies: list[float]
                   ) -> tuple[tuple[str, str], tuple[str, str], dict[str, tuple[str, str]]]:
    """The (figure, verdict) of the worst median and of the worst round, and every row's."""
    got = {goal: (figure, verdict) for goal, figure, verdict in
           targets(_startups(library, copies), N)}
    median = next(v for goal, v in got.items() if "(worst median)" in goal)
    worst = next(v for goal, v in got.items() if "worst single round" in goal)
    return median, worst, got


def test_a_slow_start_up_is_scored_no_and_its_worst_round_is_not_scored() -> None:
    median, worst, _ = _start_up_rows([2.0, 3.0, 2.0], [1.0, 1.0, 1.0])
    assert median == ("2.00 x", "**no**")
    assert worst == ("3.00 x", NOT_SCORED)


def test_a_start_up_within_the_goal_is_met_and_unmeasured_goals_cannot_be_told() -> None:
    median, worst, got = _start_up_rows([1.05, 1.0, 1.0], [1.0, 1.0, 1.0])
    assert median == ("1.00 x", "yes")
    assert worst == ("1.05 x", NOT_SCORED)
    assert got["`acxfs up` under 1 s"] == ("n/a", "cannot tell")
