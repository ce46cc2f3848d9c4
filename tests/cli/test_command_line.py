"""The command line: every subcommand documented, errors as one line, no tracebacks."""

from __future__ import annotations

import argparse
import os
import subprocess
import sys

import pytest

from acxfs import __version__
from acxfs.cli import build_parser
from tests.support import REPO

README = (REPO / "README.md").read_text()


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


def _one_error_line(done: subprocess.CompletedProcess[str]) -> str:
    assert "Traceback" not in done.stderr, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, lines
    assert lines[0].startswith("acxfs: error: "), lines
    return lines[0]


def _acxfs(*argv: object, stdout: int | None = subprocess.PIPE,
           timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "acxfs", *map(str, argv)], stdout=stdout,
                          stderr=subprocess.PIPE, text=True, timeout=timeout, check=False)


def test_files_the_system_refuses_are_one_line_without_traceback(tmp_path) -> None:
    (tmp_path / "afile").write_text("x\n")
    (tmp_path / "adir").mkdir()
    cases = [
        (["keygen", "/proc/acxfs-test/k.pem"], "/proc/acxfs-test"),
        (["keygen", tmp_path / "afile" / "k.pem"], "afile"),
        (["keygen", tmp_path / "adir", "--force"], "adir"),
    ]
    for argv, named in cases:
        done = _acxfs(*argv)
        assert done.returncode == 2, (argv, done.stderr)
        assert named in _one_error_line(done)


def test_output_that_cannot_be_written_is_one_line(make_cartridge, trusted_registry) -> None:
    cart = make_cartridge()
    with open("/dev/full", "w") as full:
        done = _acxfs("verify", cart, "--registry", trusted_registry, stdout=full.fileno())
    assert done.returncode == 2
    assert "No space left on device" in _one_error_line(done)
    closed = subprocess.run(
        f"{sys.executable} -m acxfs verify --json {cart} --registry {trusted_registry} >&-",
        shell=True, capture_output=True, text=True, timeout=60, check=False)
    assert closed.returncode == 2
    assert "standard output is closed" in _one_error_line(closed)


def test_fifo_inputs_are_refused_without_waiting_for_a_writer(make_cartridge, tmp_path) -> None:
    cart = make_cartridge()
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    for argv in (["verify", fifo], ["verify", cart, "--registry", fifo],
                 ["verify", cart, "--trust-key", fifo], ["trust", "add", fifo],
                 ["pack", tmp_path, "-o", tmp_path / "x.acx", "--publisher", "io.github.me",
                  "--key", fifo]):
        done = _acxfs(*argv, timeout=30)  # a blocking open would hang until the timeout
        assert done.returncode == 2, (argv, done.stderr)
        assert "not a regular file" in _one_error_line(done), argv
