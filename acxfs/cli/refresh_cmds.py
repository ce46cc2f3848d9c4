"""`acxfs refresh`: check the sources now, set how often the daemon checks them, and set
what a newer release does to each bundle.

Invariant: each form parses its arguments, makes one call into
`acxfs.library.updates.refresh`, and prints what it returns.
"""

from __future__ import annotations

import argparse
import os
import re

from acxfs.cli.common import SubParsers, add_command, say
from acxfs.cli.output import emit
from acxfs.errors import EnvironmentProblem
from acxfs.library.manager import Library
from acxfs.library.store.state import LONGEST_REFRESH, SHORTEST_REFRESH, UPDATE_MODES
from acxfs.library.updates import refresh
from acxfs.library.updates.remote import Options
from acxfs.sources.http import DEFAULT_TIMEOUT
from acxfs.text import printable

UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400}
DURATION = re.compile(r"([0-9]{1,12})([smhd]?)")
SHORTEST, LONGEST = SHORTEST_REFRESH, LONGEST_REFRESH  # the intervals `--every` accepts


def parse_duration(text: str) -> int | None:
    """`30s`, `15m`, `1h`, `1d` (a bare number is seconds), from 1 s to 30 d, or `off`
    (None)."""
    if text == "off":
        return None
    match = DURATION.fullmatch(text.strip())
    if match is None:
        raise EnvironmentProblem(f"--every {printable(text)}: not a duration (30s, 15m, 1h, "
                                 "1d) or off")
    seconds = int(match.group(1)) * UNITS[match.group(2) or "s"]
    if not SHORTEST <= seconds <= LONGEST:
        raise EnvironmentProblem(f"--every {printable(text)}: not between 1s and 30d (or off)")
    return seconds


def add_commands(subs: SubParsers) -> None:
    p = add_command(
        subs, "refresh", "check the sources of installed bundles now (as the daemon does on "
        "its timer); exit 1 when an update waits",
        "acxfs refresh                          # one check now: what changed, what waits\n"
        "  acxfs refresh --every 15m              # the daemon checks every 15 min (default 1h)\n"
        "  acxfs refresh --every off              # the daemon checks nothing\n"
        "  acxfs refresh --updates auto io.github.me/research   # it updates itself", cmd_refresh)
    p.add_argument("names", nargs="*", metavar="IDENTITY|SKILL",
                   help="with --updates: the bundles whose mode it sets")
    p.add_argument("--every", metavar="DURATION",
                   help="how often the library daemon checks: 30s, 15m, 1h, 1d (1s to 30d), or off "
                   "(kept in the library; in force at once and after a restart)")
    p.add_argument("--updates", choices=UPDATE_MODES,
                   help="what a newer release at its source does to each named bundle: auto "
                   "(installed), notify (shown by acxfs list), off (nothing); a withdrawal, yank "
                   "or revocation unlinks it in every mode")
    p.add_argument("--timeout", type=float, default=DEFAULT_TIMEOUT, metavar="S",
                   help="seconds without an answer before giving up, per connect and read "
                   "(default: 30)")
    p.add_argument("--offline", action="store_true",
                   default=os.environ.get("ACXFS_OFFLINE") == "1",
                   help="check nothing (also ACXFS_OFFLINE=1)")
    p.add_argument("--json", action="store_true", help="print the result as JSON "
                   "(docs/library.md)")
    p.add_argument("--scheduled", action="store_true", help=argparse.SUPPRESS)


def cmd_refresh(args: argparse.Namespace) -> int:
    library = Library.for_command(say)
    if args.every is not None or args.updates is not None:
        if args.json:
            raise EnvironmentProblem("--json reports a check; --every and --updates print "
                                     "one line")
        if args.every is not None:
            seconds = parse_duration(args.every)
            refresh.set_interval(library, seconds)
            library.say("the library daemon checks the sources " +
                        ("never (acxfs refresh checks now)" if seconds is None
                         else f"every {args.every}"))
        if args.updates is not None:
            if not args.names:
                raise EnvironmentProblem("--updates MODE takes the bundles it applies to")
            for identity in refresh.set_mode(library, args.names, args.updates):
                library.say(f"{identity}: updates {args.updates}")
        return 0
    if args.names:
        raise EnvironmentProblem("name bundles only with --updates MODE (refresh checks all)")
    if args.timeout <= 0:
        raise EnvironmentProblem("--timeout: not a positive number of seconds")
    if args.offline:
        if args.json:
            emit(refresh.Round().to_doc())
        else:
            library.say("offline: no source checked")
        return 0
    options = Options(policy=library.policy, timeout=args.timeout)
    result = refresh.Refresher(library, options, warn_only=library.policy.warn_withdrawn) \
        .run(scheduled=args.scheduled)
    if args.json:
        emit(result.to_doc())
    else:
        for line in result.lines(changes_only=args.scheduled):
            library.say(line)
        if not args.scheduled:
            library.say(f"checked {len(result.checked)} of "
                        f"{len(result.checked) + len(result.failed) + len(result.skipped)} "
                        f"sources ({result.received} bytes received)")
    return 1 if result.waiting else 0
