"""What every `acxfs` command shares: options, the trust store, messages and exit codes.

Invariant: a command's failure reaches the user as one line on stderr (`acxfs: error: ...`,
or the spec's verdict line and what to do next) and one exit code from `EXIT_*` or the
verdict, never as a traceback, and with `--json` also as its error document on stdout;
every line that carries text from a container or a path goes through `printable`.
"""

from __future__ import annotations

import argparse
import contextlib
import errno
import os
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, NoReturn, TypeAlias

from acxfs.cli import output
from acxfs.errors import (
    AcxfsError,
    EnvironmentProblem,
    RefusedError,
    TamperError,
    UntrustedError,
)
from acxfs.text import printable
from acxfs.trust.policy import TrustContext
from acxfs.trust.store import load_trust

if TYPE_CHECKING:
    from acxfs.verdict import Verdict

Handler = Callable[[argparse.Namespace], int]
SubParsers: TypeAlias = "argparse._SubParsersAction[argparse.ArgumentParser]"

EXIT_INPUT = 1  # the input is not a container acxfs accepts
EXIT_ENVIRONMENT = 2  # usage, a missing file, no FUSE, the system refused
EXIT_TAMPERED = 5  # the bytes differ from what was signed
EXIT_INTERRUPTED = 130  # Ctrl-C, SIGTERM or SIGHUP


class UsageError(SystemExit):
    """argparse refused the command line: `line` is the error line it printed."""

    def __init__(self, line: str) -> None:
        super().__init__(EXIT_ENVIRONMENT)
        self.line = line


class Parser(argparse.ArgumentParser):
    """argparse's parser (and its subcommands'), whose usage error keeps its line, so a
    command line asking for `--json` gets its error document too."""

    def error(self, message: str) -> NoReturn:
        self.print_usage(sys.stderr)
        line = printable(f"{self.prog}: error: {message}")
        print(line, file=sys.stderr)
        raise UsageError(line)


def add_command(subs: SubParsers, name: str, summary: str, example: str,
                handler: Handler) -> argparse.ArgumentParser:
    """A subcommand with its one-line summary, an example in its help, and its handler."""
    parser: argparse.ArgumentParser = subs.add_parser(
        name, help=summary, description=summary,
        epilog="example:\n  " + example, formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.set_defaults(handler=handler)
    return parser


def trust_options(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("trust")
    group.add_argument("--registry", action="append", default=[], metavar="FILE",
                       help="an acx.trust-registry/1 file to trust for this command (repeatable)")
    group.add_argument("--trust-key", action="append", default=[], metavar="FILE",
                       help="an Ed25519 public key (SPKI PEM, or SPKI DER in base64) to trust "
                       "for this command")


def policy_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--min-trust", choices=["verified", "portable", "legacy"],
                        default="verified",
                        help="lowest verdict to serve (default: verified, i.e. trusted or local)")


def trust_of(args: argparse.Namespace) -> TrustContext:
    """The trust store plus the registries and keys named by `trust_options`."""
    return load_trust(args.registry, args.trust_key)


def say(message: str) -> None:
    """One line for the user on stderr, made printable."""
    print(printable(message), file=sys.stderr)


_WARNED: set[str] = set()


def warn_once(message: str) -> None:
    """One line on stderr (`acxfs: warning: ...`), said once per process."""
    if message in _WARNED:
        return
    _WARNED.add(message)
    if sys.stderr is not None:
        with contextlib.suppress(OSError, ValueError):
            print(printable(f"acxfs: warning: {message}"), file=sys.stderr, flush=True)


def advice(verdict: Verdict, container: str, mounting: bool = True) -> list[str]:
    """How to proceed after a refusal, for the user to read (`mounting`: said to `mount`;
    otherwise to a command that reads the container without mounting it)."""
    verb = "mount" if mounting else "read"
    if verdict.trust == "portable" and not verdict.unverified:
        lines = ["acxfs: refused: the signature is valid but its signer is not trusted here"]
        if verdict.keyid:
            lines.append(f"  keyid: {verdict.keyid}")
        if verdict.publisher:
            lines.append(f"  publisher: {verdict.publisher}")
        lines.append(f"  to trust this signer: acxfs trust add {container}")
        lines.append(f"  to {verb} it once without trusting it: add --min-trust portable")
        return lines
    if verdict.trust == "legacy" or verdict.unverified:
        return ["acxfs: refused: no trusted signature; "
                f"--min-trust legacy {verb}s it and still checks each file against its recorded "
                "digest (this catches corruption, not tampering)"]
    if verdict.is_integrity_failure:
        return [f"acxfs: refused: this container will not be {'mounted' if mounting else 'read'}"]
    return []


def describe_os_error(exc: OSError) -> str:
    """One line for an OSError: the path it concerns (if any) and the system's reason."""
    reason = exc.strerror or str(exc)
    if exc.filename is None:
        return f"cannot write the output ({reason})" if exc.errno in (
            errno.ENOSPC, errno.EBADF, errno.EDQUOT) else reason
    return f"{os.fsdecode(exc.filename)}: {reason}"


def run(args: argparse.Namespace) -> int:
    """Run the parsed command; a failure becomes its line on stderr and its exit code, and
    with `--json` also its error document on stdout (`acxfs.cli.output`)."""
    as_json = getattr(args, "json", False) is True
    with output.reserved(as_json):
        code, line = _run(args)
    if as_json and line is not None:
        with contextlib.suppress(OSError, ValueError):  # a closed stdout: the line was said
            output.emit(output.error_doc(line, code))
    return code


def _fail(line: str, code: int) -> tuple[int, str]:
    """Say `line` on stderr; the exit code and the line as said."""
    shown = printable(line)
    print(shown, file=sys.stderr)
    return code, shown


def _run(args: argparse.Namespace) -> tuple[int, str | None]:
    """The command's exit code, and the one line its failure said (None: it did not fail)."""
    handler: Handler = args.handler
    try:
        return int(handler(args)), None
    except UntrustedError as exc:
        verdict = exc.verdict
        failed = _fail(verdict.line, verdict.exit_code)
        for line in advice(verdict, getattr(args, "container", ""),
                           getattr(args, "mounting", False)):
            say(line)
        return failed
    except TamperError as exc:
        return _fail(f"acxfs: error: {exc} (tampered: the bytes differ from what was signed)",
                     EXIT_TAMPERED)
    except EnvironmentProblem as exc:
        return _fail(f"acxfs: error: {exc}", EXIT_ENVIRONMENT)
    except RefusedError as exc:
        return _fail(f"acxfs: error: {exc}", exc.exit_code)
    except AcxfsError as exc:  # an input acxfs does not accept
        return _fail(f"acxfs: error: {exc}", EXIT_INPUT)
    except KeyboardInterrupt:
        return _fail("acxfs: interrupted", EXIT_INTERRUPTED)
    except BrokenPipeError:
        return 0, None
    except OSError as exc:  # the system refused a file or the output: say which, no traceback
        return _fail(f"acxfs: error: {describe_os_error(exc)}", EXIT_ENVIRONMENT)
