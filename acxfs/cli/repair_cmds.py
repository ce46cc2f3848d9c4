"""`acxfs repair`: rebuild a damaged library from its store and the links acxfs made.

Invariant: it parses its arguments, makes one call into `acxfs.library.repair`, and prints
what it returns.  It has a module of its own because repairing checks every stored bundle
(the formats load); the other library commands (`acxfs.cli.library_cmds`) need not.
"""

from __future__ import annotations

import argparse

from acxfs.cli.common import SubParsers, add_command, say
from acxfs.library.manager import Library
from acxfs.library.repair import repair


def add_commands(subs: SubParsers) -> None:
    add_command(subs, "repair", "rebuild a damaged library from its store and the links acxfs "
                "made (the damaged file is kept beside it; docs/library.md)", "acxfs repair",
                cmd_repair)


def cmd_repair(args: argparse.Namespace) -> int:
    return repair(Library.for_command(say))
