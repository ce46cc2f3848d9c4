"""The command line: every subcommand documented, errors as one line, no tracebacks."""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

import pytest

from acxfs import __version__
from acxfs.cli import build_parser

README = (Path(__file__).resolve().parent.parent / "README.md").read_text()


def _commands() -> list[list[str]]:
    found: list[list[str]] = []

    def walk(parser: argparse.ArgumentParser, prefix: list[str]) -> None:
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                for name, sub in action.choices.items():
                    found.append([*prefix, name])
                    walk(sub, [*prefix, name])

    walk(build_parser(), [])
    return found


@pytest.mark.parametrize("command", _commands(), ids=" ".join)
def test_every_subcommand_has_help_with_an_example(run_cli, command) -> None:
    result = run_cli(*command, "--help")
    assert result.code == 0
    assert "example:" in result.out and "acxfs " in result.out.split("example:")[1]


@pytest.mark.parametrize("command", _commands(), ids=" ".join)
def test_every_subcommand_is_in_the_readme(command) -> None:
    assert f"acxfs {' '.join(command)}" in README or (
        command[0] == "trust" and "acxfs trust add / list / remove" in README)


def test_version(run_cli) -> None:
    assert run_cli("--version").out.strip() == f"acxfs {__version__}"


def test_missing_file_is_one_line_exit_2(run_cli, tmp_path) -> None:
    result = run_cli("verify", tmp_path / "nope.acx")
    assert result.code == 2
    assert result.err.strip().count("\n") == 0 and result.err.startswith("acxfs: error:")


def test_console_script_runs_without_traceback(tmp_path) -> None:
    done = subprocess.run([sys.executable, "-m", "acxfs", "verify", str(tmp_path / "x")],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 2 and "Traceback" not in done.stderr
