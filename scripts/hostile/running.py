"""`acxfs.cli.main(argv)` run in-process with its output captured as bytes and text.

`run_main` never raises: an exception that escapes acxfs (the fuzzing invariant says none may)
is caught and returned as the run's traceback, with no exit code.
"""

from __future__ import annotations

import contextlib
import dataclasses
import io
import sys
import traceback

# ============================================================================ running acxfs


@dataclasses.dataclass
class Run:
    """One in-process `acxfs.cli.main(argv)`: exit code (None: it raised), output, traceback."""

    argv: list[str]
    code: int | None
    out: str
    err: str
    raw: bytes
    tb: str | None


def run_main(argv: list[str]) -> Run:
    from acxfs.cli import main

    out, err = io.BytesIO(), io.BytesIO()
    text_out = io.TextIOWrapper(out, encoding="utf-8", write_through=True)
    text_err = io.TextIOWrapper(err, encoding="utf-8", write_through=True)
    saved = sys.stdout, sys.stderr
    sys.stdout, sys.stderr = text_out, text_err
    code: int | None
    tb = None
    try:
        code = main(argv)
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else 2
    except BaseException:  # the invariant: this never happens
        code = None
        tb = traceback.format_exc()
    finally:
        with contextlib.suppress(Exception):
            text_out.flush()
            text_err.flush()
        sys.stdout, sys.stderr = saved
    raw = out.getvalue()
    return Run(argv, code, raw.decode("utf-8", "replace"),
               err.getvalue().decode("utf-8", "replace"), raw, tb)
