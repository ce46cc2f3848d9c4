"""The `acxfs` command: a skin over the library, one module per group of commands.

Every command parses its arguments, calls the library and prints; it returns an exit code,
and a library error becomes one line on stderr (see `acxfs.cli.common.run`), and with `--json`
also one error document on stdout (`acxfs.cli.output`), a usage error included.  `main(argv)`
runs one command in-process; `main_entry` is the console script, whose stdout and stderr
show what their encoding cannot hold as backslash escapes (never a UnicodeEncodeError).
A command line that names a command builds the parser of that command's module alone, so a
command loads what it runs and not the rest of acxfs (`pack` never loads the library);
`COMMANDS` says which module adds which command, and the tests hold it to the modules.
"""

from __future__ import annotations

import argparse
import contextlib
import errno
import importlib
import io
import os
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING, cast

from acxfs import __version__
from acxfs.cli import common, output
from acxfs.trust import store as trust_store

# The command modules are imported by `build_parser` as a command line needs them; named here
# as well, so that the import graph (scripts.import_graph, tests/test_layout.py) sees them.
if TYPE_CHECKING:
    from acxfs.cli import (  # noqa: F401
        completion,
        library_cmds,
        mount_cmds,
        pack_cmds,
        publish_cmds,
        read_cmds,
        refresh_cmds,
        repair_cmds,
        service_cmds,
        status_cmds,
        trust_cmds,
    )

# Each module of acxfs.cli and the commands its `add_commands` adds, in the order of `--help`.
COMMANDS: dict[str, tuple[str, ...]] = {
    "read_cmds": ("verify", "inspect", "ls", "cat", "extract"),
    "pack_cmds": ("keygen", "pack"),
    "publish_cmds": ("push", "publish", "withdraw"),
    "trust_cmds": ("trust",),
    "mount_cmds": ("mount", "umount"),
    "status_cmds": ("status",),
    "library_cmds": ("add", "update", "revert", "list", "remove", "up", "sync", "down",
                     "layout"),
    "repair_cmds": ("repair",),
    "refresh_cmds": ("refresh",),
    "service_cmds": ("service",),
    "completion": ("completion",),  # it reads the whole parser: it needs every module
}
_MODULE_OF = {command: module for module, names in COMMANDS.items() for command in names}


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The parser of every command, or with `command` (a command's name) of the commands of
    its module only (importing no other command module)."""
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
    only = _MODULE_OF.get(command or "")
    if only == "completion":
        only = None
    for name in COMMANDS:
        if only is not None and name != only:
            continue
        module = importlib.import_module(f"acxfs.cli.{name}")
        if name == "completion":
            module.add_commands(subs, parser)
        else:
            module.add_commands(subs)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    if common.warn_once not in trust_store.warnings:
        trust_store.warnings.append(common.warn_once)
    words = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser(words[0] if words else None)
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
