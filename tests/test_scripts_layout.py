"""The shape of scripts/: no file over 550 lines, and nothing there imports the test suite.

The scripts stand alone (the tests import from scripts/, never the reverse), so an import of
`tests` from any module under scripts/ is found here, however it is spelled: `import tests`,
`import tests.support`, `from tests import x`, `from tests.support.y import z`, or a dynamic
`importlib.import_module("tests...")`.
"""

from __future__ import annotations

import ast
from pathlib import Path

SCRIPTS = Path(__file__).resolve().parent.parent / "scripts"
MAX_FILE_LINES = 550
FORBIDDEN_ROOT = "tests"


def _files() -> list[Path]:
    """Every file under scripts/ but Python's caches."""
    return sorted(path for path in SCRIPTS.rglob("*")
                  if path.is_file() and "__pycache__" not in path.parts)


def _imports_of_tests(text: str, filename: str = "<test>") -> list[str]:
    """`line name` of every import of the `tests` package (or a module inside it) in `text`."""
    found = []
    for node in ast.walk(ast.parse(text, filename)):
        names: list[str] = []
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0:
            names = [node.module or ""]
        elif isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Constant):
            called = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(
                node.func, "id", "")
            if called in ("import_module", "__import__") and isinstance(node.args[0].value, str):
                names = [node.args[0].value]
        found += [f"{getattr(node, 'lineno', 0)} {name}" for name in names
                  if name.split(".")[0] == FORBIDDEN_ROOT]
    return found


def test_no_file_under_scripts_is_over_550_lines() -> None:
    long = {str(path.relative_to(SCRIPTS)): n for path in _files()
            if (n := len(path.read_text(encoding="utf-8").splitlines())) > MAX_FILE_LINES}
    assert long == {}


def test_no_module_under_scripts_imports_tests() -> None:
    found = [f"{path.relative_to(SCRIPTS)}:{hit}" for path in _files() if path.suffix == ".py"
             for hit in _imports_of_tests(path.read_text(encoding="utf-8"), str(path))]
    assert found == []


def test_an_import_of_tests_is_found_however_it_is_spelled() -> None:
    text = ("import os\nimport tests.support\nfrom tests import x\n"
            "from tests.support.hostile import mutators as m\nimport json, tests\n"
            "def f():\n    from tests.support import cartwriter\n"
            "    return importlib.import_module('tests.support.demo')\n")
    assert _imports_of_tests(text) == [
        "2 tests.support", "3 tests", "4 tests.support.hostile", "5 tests", "7 tests.support",
        "8 tests.support.demo"]


def test_names_that_only_start_like_tests_are_not_imports_of_it() -> None:
    text = ("import testsuite\nfrom scripts import tests_helper\nfrom . import tests\n"
            "from scripts.hostile import mutators\nlabel = 'tests.support'\n")
    assert _imports_of_tests(text) == []
