"""The `trust` commands: pin a signer's key, list what is trusted, remove a pin.

Each parses its arguments, calls the trust store or the format table and prints; a key is
pinned only as `acxfs.formats.pin_from` allows (never the key of a tampered or unsigned
container).
"""

from __future__ import annotations

import argparse

from acxfs import formats
from acxfs.cli.common import SubParsers, add_command, say
from acxfs.errors import EnvironmentProblem
from acxfs.library.manager import Library
from acxfs.paths import trust_dir
from acxfs.text import printable
from acxfs.trust.store import list_pins, load_trust, remove_pin


def add_commands(subs: SubParsers) -> None:
    p = add_command(subs, "trust", "manage the trust store (pinned keys)",
                    "acxfs trust add research.acx", cmd_trust_help)
    actions = p.add_subparsers(dest="trust_command", metavar="ACTION")
    q = add_command(actions, "add", "pin the signer key of a container, or a public key file",
                    "acxfs trust add research.acx\n"
                    "  acxfs trust add key.pub.pem --publisher com.example", cmd_trust_add)
    q.add_argument("source", metavar="CART|PKG|PUB.pem")
    q.add_argument("--publisher", metavar="ID",
                   help="the one publisher the key is trusted for (default: a container's "
                   "signed publisher; required for a key file and for a container whose "
                   "signed statement names none)")
    add_command(actions, "list", "list pinned keys", "acxfs trust list", cmd_trust_list)
    q = add_command(actions, "remove", "remove a pinned key",
                    "acxfs trust remove ed25519:ab12...", cmd_trust_remove)
    q.add_argument("keyid", metavar="KEYID")


def cmd_trust_help(args: argparse.Namespace) -> int:
    raise EnvironmentProblem("trust needs an action: add, list or remove")


def cmd_trust_add(args: argparse.Namespace) -> int:
    keyid, publisher, path, replaced = formats.pin_from(args.source, args.publisher)
    print(f"pinned {keyid}")
    print(printable(f"publisher: {publisher}"))
    if replaced is not None:
        print(f"replaces its pin for publisher {replaced}")
    print(f"stored in {path}")
    Library(note=say).reload()
    return 0


def cmd_trust_list(args: argparse.Namespace) -> int:
    ctx = load_trust()
    for pin in list_pins():
        print(printable(f"{pin.keyid}  pinned  publisher={pin.publisher}"))
    for record in ctx.registry:
        print(printable(f"{record.keyid}  registry  publisher={record.publisher} "
                        f"status={record.status} ({record.source})"))
    for keyid in ctx.local:
        print(f"{keyid}  local")
    print(f"trust store: {trust_dir()}")
    return 0


def cmd_trust_remove(args: argparse.Namespace) -> int:
    if not remove_pin(args.keyid):
        raise EnvironmentProblem(f"no pinned key {args.keyid}")
    print(f"removed {args.keyid}")
    Library(note=say).reload()
    return 0
