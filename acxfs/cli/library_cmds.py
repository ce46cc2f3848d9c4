"""`acxfs add`, `update`, `revert`, `remove`, `list`, `up`, `down` and `repair`: the skills
library.

Invariant: each command parses its arguments, makes one call into `acxfs.library`, and prints
what it returns; nothing here touches the store, the links or the daemon itself.
"""

from __future__ import annotations

import argparse
import json

from acxfs.cli.common import SubParsers, add_command, say
from acxfs.library.agents import AGENTS, agent_names
from acxfs.library.manager import Library
from acxfs.library.repair import repair
from acxfs.library.report import describe_library, render_library

_AGENT_HELP = "; ".join(f"{a.name}: ~/{a.directory}" for a in AGENTS)


def add_commands(subs: SubParsers) -> None:
    p = add_command(
        subs, "add", "install signed bundles into the skills library, for every agent",
        "acxfs add research.acx                  # ~/.agents/skills and ~/.claude/skills\n"
        "  acxfs add tools.acx --agent codex       # ~/.codex/skills only", cmd_add)
    p.add_argument("bundles", nargs="+", metavar="BUNDLE", help="an .acx cartridge or .azp package")
    p.add_argument("--agent", action="append", choices=agent_names(), metavar="NAME",
                   help=f"link for this agent only (repeatable; default: agents and claude). "
                   f"{_AGENT_HELP}")
    p.add_argument("--allow-downgrade", action="store_true",
                   help="install a version below the highest one ever installed, or another "
                   "release under a version number already installed")
    p = add_command(subs, "update", "install newer versions of installed bundles (links "
                    "re-pointed in one rename each; the previous revision kept)",
                    "acxfs update research-1.3.0.acx", cmd_update)
    p.add_argument("bundles", nargs="+", metavar="BUNDLE")
    p.add_argument("--allow-downgrade", action="store_true",
                   help="allow a version below the floor, or another release under one number")
    p = add_command(subs, "revert", "serve the previous revision of installed bundles again",
                    "acxfs revert io.github.me/research", cmd_revert)
    p.add_argument("names", nargs="+", metavar="IDENTITY|SKILL")
    p = add_command(subs, "list", "show the library: bundles, skills, links, what is served",
                    "acxfs list\n  acxfs list --json", cmd_list)
    p.add_argument("--json", action="store_true", help="print it as JSON (docs/library.md)")
    p = add_command(subs, "remove", "uninstall bundles: their links, their store files",
                    "acxfs remove io.github.me/research\n  acxfs remove expertise-designer",
                    cmd_remove)
    p.add_argument("names", nargs="+", metavar="IDENTITY|SKILL")
    p.add_argument("--forget", action="store_true",
                   help="also forget the version floor (a later add may install any version)")
    p = add_command(subs, "up", "start the library daemon (every installed bundle, checked)",
                    "acxfs up\n  acxfs up -f          # in the foreground (a service)", cmd_up)
    p.add_argument("-f", "--foreground", action="store_true", help="serve in the foreground")
    p.add_argument("--reload", action="store_true",
                   help="have the running daemon re-check every bundle against the trust store")
    add_command(subs, "down", "stop the library daemon (links dangle until acxfs up)",
                "acxfs down", cmd_down)
    add_command(subs, "repair", "rebuild a damaged library from its store and the links acxfs "
                "made (the damaged file is kept beside it; docs/library.md)", "acxfs repair",
                cmd_repair)


def _library() -> Library:
    return Library(say=print, note=say)


def cmd_add(args: argparse.Namespace) -> int:
    return _library().add(args.bundles, args.agent, allow_downgrade=args.allow_downgrade)


def cmd_update(args: argparse.Namespace) -> int:
    return _library().add(args.bundles, None, allow_downgrade=args.allow_downgrade,
                          update_only=True)


def cmd_revert(args: argparse.Namespace) -> int:
    return _library().revert(args.names)


def cmd_list(args: argparse.Namespace) -> int:
    library = _library()
    doc = describe_library(library)
    if args.json:
        print(json.dumps(doc, indent=2, ensure_ascii=True))
    else:
        print(render_library(doc), end="")
    return 0


def cmd_remove(args: argparse.Namespace) -> int:
    return _library().remove(args.names, forget=args.forget)


def cmd_up(args: argparse.Namespace) -> int:
    return _library().up(foreground=args.foreground, reload=args.reload)


def cmd_down(args: argparse.Namespace) -> int:
    return _library().down()


def cmd_repair(args: argparse.Namespace) -> int:
    return repair(_library())
