"""The `trust` commands: pin a signer's key, list what is trusted, remove a pin.

Each parses its arguments, calls the trust store or the format table and prints; a key is
pinned only as `acxfs.formats.pin_from` allows (never the key of a tampered or unsigned
container).
"""

from __future__ import annotations

import argparse

from acxfs import formats
from acxfs.cli.common import SubParsers, add_command, say
from acxfs.cli.output import emit
from acxfs.errors import EnvironmentProblem
from acxfs.library.manager import Library
from acxfs.paths import trust_dir
from acxfs.safe.inputs import open_input
from acxfs.sources.http import Http
from acxfs.sources.policy import Rule, load_policy
from acxfs.sources.registry import INDEX_LIMIT
from acxfs.text import printable
from acxfs.trust import registries
from acxfs.trust.store import list_pins, load_trust, remove_pin


def add_commands(subs: SubParsers) -> None:
    p = add_command(subs, "trust", "manage the trust store (pinned keys)",
                    "acxfs trust add research.acx", cmd_trust_help)
    actions = p.add_subparsers(dest="trust_command", metavar="ACTION")
    q = add_command(actions, "add", "pin the signer key of a container or a public key file, "
                    "or install a trust registry",
                    "acxfs trust add research.acx\n"
                    "  acxfs trust add key.pub.pem --publisher com.example\n"
                    "  acxfs trust add fleet.registry.json       # an acx.trust-registry/1 file\n"
                    "  acxfs trust add --from https://skills.example.com/trust/registry.json",
                    cmd_trust_add)
    q.add_argument("source", nargs="?", metavar="CART|PKG|PUB.pem|REGISTRY.json")
    q.add_argument("--from", dest="url", metavar="URL",
                   help="fetch a trust registry file from this https:// URL (16 MiB at most)")
    q.add_argument("--publisher", metavar="ID",
                   help="the one publisher the key is trusted for (default: a container's "
                   "signed publisher; required for a key file and for a container whose "
                   "signed statement names none)")
    q = add_command(actions, "list", "list pinned keys, registry keys, the local key and the "
                    "policy", "acxfs trust list\n  acxfs trust list --json", cmd_trust_list)
    q.add_argument("--json", action="store_true", help="print it as JSON (docs/json.md)")
    q = add_command(actions, "remove", "remove a pinned key, or an installed trust registry",
                    "acxfs trust remove ed25519:ab12...\n  acxfs trust remove fleet-registry",
                    cmd_trust_remove)
    q.add_argument("keyid", metavar="KEYID|REGISTRY_ID")


def cmd_trust_help(args: argparse.Namespace) -> int:
    raise EnvironmentProblem("trust needs an action: add, list or remove")


def cmd_trust_add(args: argparse.Namespace) -> int:
    if (args.url is None) == (args.source is None):
        raise EnvironmentProblem("trust add takes a file, or --from URL")
    if args.url is not None:
        data = Http().fetch(args.url, limit=INDEX_LIMIT).body
        return _install_registry(data, args.url)
    head = _head(args.source)
    if head is not None and registries.is_registry(head):
        return _install_registry(head, args.source)
    keyid, publisher, path, replaced = formats.pin_from(args.source, args.publisher)
    print(f"pinned {keyid}")
    print(printable(f"publisher: {publisher}"))
    if replaced is not None:
        print(f"replaces its pin for publisher {replaced}")
    print(f"stored in {path}")
    Library(note=say).reload()
    return 0


def _head(path: str) -> bytes | None:
    """The bytes of a file small enough to be a trust registry (else None)."""
    try:
        with open_input(path) as f:
            data = f.read(INDEX_LIMIT + 1)
    except OSError:
        return None
    return data if len(data) <= INDEX_LIMIT else None


def _install_registry(data: bytes, source: str) -> int:
    if not registries.is_registry(data):
        raise EnvironmentProblem(f"{source}: not an acx.trust-registry/1 file")
    registry_id, path, keys = registries.install_registry(data, source)
    print(printable(f"installed trust registry {registry_id} ({len(keys)} keys)"))
    for key in keys:
        print(printable(f"  {key.keyid}  publisher={key.publisher} status={key.status}"))
    print(f"stored in {path}")
    Library(note=say).reload()
    return 0


def _key_json(keyid: str, kind: str, publisher: str | None = None, status: str | None = None,
              source: str | None = None) -> dict[str, object]:
    return {"keyid": keyid, "kind": kind, "publisher": publisher, "status": status,
            "source": source}


def _rule_json(rule: Rule) -> dict[str, object]:
    def listed(value: tuple[str, ...] | None) -> list[str] | None:
        return None if value is None else list(value)
    return {"file": rule.path, "sources": listed(rule.sources),
            "publishers": listed(rule.publishers), "keyids": listed(rule.keyids),
            "localFiles": rule.files, "withdrawn": rule.withdrawn,
            "maxIndexAgeDays": rule.max_index_age_days}


def _trust_json() -> dict[str, object]:
    ctx = load_trust()
    keys = [_key_json(pin.keyid, "pinned", pin.publisher, source=pin.source)
            for pin in list_pins()]
    keys += [_key_json(r.keyid, "registry", r.publisher, r.status, r.source)
             for r in ctx.registry]
    keys += [_key_json(keyid, "local") for keyid in ctx.local]
    return {"trustStore": str(trust_dir()), "keys": keys,
            "policy": [_rule_json(rule) for rule in load_policy(trust_dir()).rules]}


def cmd_trust_list(args: argparse.Namespace) -> int:
    if args.json:
        emit(_trust_json())
        return 0
    ctx = load_trust()
    for pin in list_pins():
        print(printable(f"{pin.keyid}  pinned  publisher={pin.publisher}"))
    for record in ctx.registry:
        print(printable(f"{record.keyid}  registry  publisher={record.publisher} "
                        f"status={record.status} ({record.source})"))
    for keyid in ctx.local:
        print(f"{keyid}  local")
    print(f"trust store: {trust_dir()}")
    rules = load_policy(trust_dir()).rules
    for rule in rules:
        for line in rule.describe():
            print(printable(line))
    if not rules:
        print("policy: none (no limit on sources, publishers, keys or files)")
    return 0


def cmd_trust_remove(args: argparse.Namespace) -> int:
    if not args.keyid.startswith("ed25519:") and registries.remove_registry(args.keyid):
        print(printable(f"removed trust registry {args.keyid}"))
        Library(note=say).reload()
        return 0
    if not remove_pin(args.keyid):
        raise EnvironmentProblem(f"no pinned key {args.keyid}")
    print(f"removed {args.keyid}")
    Library(note=say).reload()
    return 0
