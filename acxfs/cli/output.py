"""`--json`: a command's answer as one JSON document on stdout (docs/json.md).

Invariant: while a command runs with `--json`, stdout carries exactly one JSON document and
nothing else: whatever else the command or the library prints goes to stderr (`reserved`),
and the document goes to the stdout the command started with (`emit`). A failure is the
document `{"error": LINE, "exit": N}`, LINE being the one line stderr carries and N the exit
code, the same as without `--json` (`acxfs.cli.common.run` writes it, for every command).
stderr carries what it would without `--json`: notes, warnings, the error line.
"""

from __future__ import annotations

import contextlib
import json
import sys
from collections.abc import Iterator, Sequence
from typing import TextIO

_STDOUT: list[TextIO] = []  # the stdout of each command running with --json, innermost last


def wants_json(argv: Sequence[str]) -> bool:
    """Whether a command line asks for JSON (before it is parsed: a usage error's answer)."""
    return "--json" in argv[:argv.index("--")] if "--" in argv else "--json" in argv


def dumps(doc: object) -> str:
    """The document as acxfs writes it: indented, ASCII only (every control character and
    every non-ASCII character escaped, so no byte of a container reaches a terminal)."""
    return json.dumps(doc, indent=2, ensure_ascii=True) + "\n"


def emit(doc: object) -> None:
    """Write `doc` as the command's one JSON document."""
    stream = _STDOUT[-1] if _STDOUT else sys.stdout
    stream.write(dumps(doc))
    stream.flush()


def error_doc(line: str, code: int) -> dict[str, object]:
    """The document of a command that failed with the one line `line` and exit `code`."""
    return {"error": line, "exit": code}


@contextlib.contextmanager
def reserved(as_json: bool) -> Iterator[None]:
    """With `as_json`, hold stdout for `emit`: anything else printed meanwhile goes to stderr."""
    if not as_json:
        yield
        return
    _STDOUT.append(sys.stdout)
    try:
        with contextlib.redirect_stdout(sys.stderr):
            yield
    finally:
        _STDOUT.pop()
