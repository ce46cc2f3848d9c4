"""`acxfs refresh --every` takes an interval from 1 s to 30 d (or `off`): anything else is one
`acxfs: error:` line and exit 2, with the library's interval left as it was."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest

Cli = Callable[..., Any]


@pytest.mark.parametrize("every", ["0s", "0", "31d", "2592001", "721h", "99999999999999d",
                                   "-5s", "1w", ""])
def test_an_interval_outside_one_second_to_thirty_days_is_one_line_exit_2(
        run_cli: Cli, every: str) -> None:
    result = run_cli("refresh", f"--every={every}")
    assert result.code == 2, result
    lines = result.err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("acxfs: error: --every"), result.err
    assert "Traceback" not in result.err and result.out == ""
    assert json.loads(run_cli("list", "--json").out)["refreshEvery"] == 3600


@pytest.mark.parametrize(("every", "seconds"), [("1s", 1), ("30d", 2592000),
                                                ("2592000", 2592000), ("720h", 2592000)])
def test_the_bounds_themselves_are_accepted(run_cli: Cli, every: str, seconds: int) -> None:
    result = run_cli("refresh", "--every", every)
    assert result.code == 0, result
    assert json.loads(run_cli("list", "--json").out)["refreshEvery"] == seconds
