"""The `acxfs` command: a skin over the library, one module per group of commands.

Every command parses its arguments, calls the library and prints; it returns an exit code,
and a library error becomes one line on stderr (see `acxfs.cli.common.run`), and with `--json`
also one error document on stdout (`acxfs.cli.output`), a usage error included.  `main(argv)`
runs one command in-process; `main_entry` is the console script, whose stdout and stderr
show what their encoding cannot hold as backslash escapes (never a UnicodeEncodeError).
"""

from __future__ import annotations

import argparse
import contextlib
import errno
import io
import os
import sys
from collections.abc import Sequence
from typing import cast

from acxfs import __version__
from acxfs.cli import (
    common,
    completion,
    library_cmds,
    mount_cmds,
    output,
    pack_cmds,
    publish_cmds,
    read_cmds,
    refresh_cmds,
    service_cmds,
    trust_cmds,
)
from acxfs.trust import store as trust_store


def build_parser() -> argparse.ArgumentParser:
    parser = common.Parser(
        prog="acxfs",
        description="Mount signed skill bundles (ACX cartridges, azphalt packages) read-only; "
        "every byte is verified against the signed manifest before it is served.",
        epilog="example:\n  acxfs mount research.acx ~/.claude/skills/expertise-designer",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"acxfs {__version__}")
    # Its parsers are `common.Parser`s (argparse makes them of the parent's class).
    subs = cast(common.SubParsers, parser.add_subparsers(dest="command", metavar="COMMAND"))
    subs.required = True
    read_cmds.add_commands(subs)
    pack_cmds.add_commands(subs)
    publish_cmds.add_commands(subs)
    trust_cmds.add_commands(subs)
    mount_cmds.add_commands(subs)
    library_cmds.add_commands(subs)
    refresh_cmds.add_commands(subs)
    service_cmds.add_commands(subs)
    completion.add_commands(subs, parser)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    if common.warn_once not in trust_store.warnings:
        trust_store.warnings.append(common.warn_once)
    parser = build_parser()
    words = list(sys.argv[1:] if argv is None else argv)
    try:
        args = parser.parse_args(words)
    except common.UsageError as exc:
        if output.wants_json(words):
            output.emit(output.error_doc(exc.line, common.EXIT_ENVIRONMENT))
        return common.EXIT_ENVIRONMENT
    except SystemExit as exc:
        return int(exc.code or 0) if isinstance(exc.code, int) else common.EXIT_ENVIRONMENT
    return common.run(args)


class _ClosedOutput(io.RawIOBase):
    """Stands in for a standard output the caller closed: writing to it fails like a write
    to a closed descriptor, so the command reports it instead of crashing on None."""

    def writable(self) -> bool:
        return True

    def write(self, data: object) -> int:
        raise OSError(errno.EBADF, "standard output is closed")


def escape_unencodable() -> None:
    """Text the standard streams' encoding cannot hold (a publisher name in Chinese on an
    ASCII terminal) is written as backslash escapes instead of ending the command."""
    for stream in (sys.stdout, sys.stderr):
        if isinstance(stream, io.TextIOWrapper):
            with contextlib.suppress(ValueError, OSError):  # a stream closed under us
                stream.reconfigure(errors="backslashreplace")


def main_entry() -> None:
    if sys.stdout is None:
        sys.stdout = io.TextIOWrapper(io.BufferedWriter(_ClosedOutput()), encoding="utf-8")
    escape_unencodable()
    code = main()
    # Exit without freeing a large verified tree object by object: the OS reclaims it at once.
    for stream in (sys.stdout, sys.stderr):  # None when the descriptor was closed (>&-)
        try:
            if stream is not None:
                stream.flush()
        except BrokenPipeError:
            pass
        except (OSError, ValueError) as exc:
            if stream is sys.stdout and code == 0 and sys.stderr is not None:
                reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else exc
                with contextlib.suppress(OSError, ValueError):
                    print(f"acxfs: error: cannot write the output ({reason})", file=sys.stderr,
                          flush=True)
            code = code or common.EXIT_ENVIRONMENT
    os._exit(code)
