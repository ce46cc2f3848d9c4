"""A command line builds the parser of its command's module alone (`acxfs.cli.COMMANDS`): the
table names every command of every module, the command then parses and helps exactly as in the
whole parser, and a command outside the library never loads it."""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

import pytest

from acxfs.cli import COMMANDS, build_parser
from tests.support import REPO


def _subcommands(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    found = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    assert len(found) == 1
    return dict(found[0].choices)


def _helps(parser: argparse.ArgumentParser, prefix: str = "") -> dict[str, str]:
    """The help text of `parser`'s every command, nested ones included, by its words."""
    found: dict[str, str] = {}
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                found[f"{prefix}{name}"] = sub.format_help()
                found |= _helps(sub, f"{prefix}{name} ")
    return found


WHOLE = _subcommands(build_parser())


def test_the_table_names_every_command_in_the_order_of_help() -> None:
    assert list(WHOLE) == [name for names in COMMANDS.values() for name in names]
    for module, names in COMMANDS.items():
        for name in names:
            assert WHOLE[name].get_default("handler").__module__ == f"acxfs.cli.{module}"


@pytest.mark.parametrize("command", list(WHOLE))
def test_a_command_parses_and_helps_as_in_the_whole_parser(command: str) -> None:
    alone = build_parser(command)
    module = next(m for m, names in COMMANDS.items() if command in names)
    expected = list(WHOLE) if module == "completion" else list(COMMANDS[module])
    assert list(_subcommands(alone)) == expected
    whole_helps = _helps(build_parser())
    assert {k: v for k, v in whole_helps.items() if k.split()[0] in expected} == _helps(alone)


def test_keygen_and_pack_never_load_the_library(tmp_path: Path) -> None:
    skill = tmp_path / "hello"
    skill.mkdir()
    (skill / "SKILL.md").write_text("---\nname: hello\ndescription: Says hello.\n---\n\nHi.\n")
    script = (
        "import sys\n"
        "from acxfs.cli import main\n"
        f"assert main(['keygen', {str(tmp_path / 'k.pem')!r}]) == 0\n"
        f"assert main(['pack', {str(skill)!r}, '-o', {str(tmp_path / 'h.acx')!r},"
        f" '--publisher', 'io.github.example', '--key', {str(tmp_path / 'k.pem')!r}]) == 0\n"
        "print(sorted(m for m in sys.modules if m.startswith('acxfs.library')))\n"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          timeout=60, cwd=REPO)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[-1] == "[]"
    assert (tmp_path / "h.acx").stat().st_size > 0
