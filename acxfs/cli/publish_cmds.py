"""`acxfs push`, `acxfs publish` and `acxfs withdraw`: publish a bundle `verify` accepts to an
OCI registry or an ACX registry directory, and record a release's lifecycle in the latter.

Invariant: each command parses its arguments, makes one call into the library
(`acxfs.sources.oci.push`, `acxfs.sources.registry_writer`, `acxfs.sources.registry_status`)
and prints the one line it returns (with `--json`, its document); nothing here speaks to a
registry itself.
"""

from __future__ import annotations

import argparse
import datetime as dt
import os

from acxfs.cli.common import SubParsers, add_command, say, trust_of, trust_options
from acxfs.cli.output import emit
from acxfs.errors import EnvironmentProblem
from acxfs.sources import registry_status, registry_writer
from acxfs.sources.http import DEFAULT_TIMEOUT, Http
from acxfs.sources.oci.push import push
from acxfs.sources.oci.reference import parse_ref, version_tag
from acxfs.trust.store import load_trust


def add_commands(subs: SubParsers) -> None:
    p = add_command(
        subs, "push", "publish a verified bundle to an OCI registry (tagged with its signed "
        "version; the DSSE envelope attached as a referrer)",
        "acxfs push research-1.2.0.acx oci://ghcr.io/me/research\n"
        "  acxfs push research-1.2.0.acx oci://registry.example.com/skills/research:latest\n"
        "  acxfs push tools.azp oci+http://127.0.0.1:5000/tools    # plain HTTP: loopback only\n"
        "credentials: docker's config.json ($DOCKER_CONFIG or ~/.docker; credHelpers, "
        "credsStore, auths)", cmd_push)
    p.add_argument("bundle", metavar="BUNDLE")
    p.add_argument("ref", metavar="oci://HOST[:PORT]/REPO[:TAG]")
    p.add_argument("--timeout", type=float, default=DEFAULT_TIMEOUT, metavar="S",
                   help="seconds without an answer before giving up, per connect and read "
                   "(default: 30)")
    p.add_argument("--json", action="store_true", help="print the result as JSON (docs/json.md)")
    trust_options(p)
    add_registry_commands(subs)


def cmd_push(args: argparse.Namespace) -> int:
    if args.timeout <= 0:
        raise EnvironmentProblem("--timeout: not a positive number of seconds")
    ref = parse_ref(args.ref)
    pushed = push(args.bundle, ref, trust_of(args), Http(timeout=args.timeout))
    if args.json:
        tags = [version_tag(pushed.version)]
        if ref.tag is not None and ref.tag not in tags:
            tags.append(ref.tag)
        emit({"reference": pushed.ref.text, "repository": pushed.ref.key,
              "digest": pushed.ref.digest, "identity": pushed.identity,
              "version": pushed.version, "tags": tags})
        return 0
    print(pushed.line)
    return 0


def add_registry_commands(subs: SubParsers) -> None:
    p = add_command(
        subs, "publish", "copy a verified cartridge to its coordinate in an ACX registry "
        "directory and regenerate its index.json as the standard's builder does",
        "acxfs publish research-1.2.0.acx --registry ./skills-registry\n"
        "  serve it: any static HTTPS host (the directory as is), or a git repository", cmd_publish)
    p.add_argument("bundle", metavar="CART")
    p.add_argument("--registry", required=True, metavar="DIR",
                   help="the registry directory (made if missing; a clone of the standard's "
                   "repository: its registry/)")
    p.add_argument("--json", action="store_true", help="print the result as JSON")
    group = p.add_argument_group("trust (of the check before publishing)")
    group.add_argument("--trust-registry", action="append", default=[], metavar="FILE",
                       help="an acx.trust-registry/1 file to trust for this command (repeatable)")
    group.add_argument("--trust-key", action="append", default=[], metavar="FILE",
                       help="an Ed25519 public key (SPKI PEM) to trust for this command")

    p = add_command(
        subs, "withdraw", "record a release's lifecycle in an ACX registry's status.json "
        "(revoked, withdrawn and yanked releases are pulled from libraries on update)",
        "acxfs withdraw io.github.me/research@1.2.0 --registry ./skills-registry "
        "--status revoked --reason 'leaks the API token'", cmd_withdraw)
    p.add_argument("coordinate", metavar="PUBLISHER/ID@VERSION")
    p.add_argument("--registry", required=True, metavar="DIR", help="the registry directory")
    p.add_argument("--status", required=True, choices=registry_status.STATUSES)
    p.add_argument("--reason", required=True, metavar="TEXT", help="10 to 1000 characters")
    p.add_argument("--successor", metavar="VERSION",
                   help="the release that replaces it (required with --status superseded)")
    p.add_argument("--advisory", metavar="URL", help="an https:// advisory to link")
    p.add_argument("--json", action="store_true", help="print the result as JSON")


def cmd_publish(args: argparse.Namespace) -> int:
    trust = load_trust(args.trust_registry, args.trust_key)
    done = registry_writer.publish(args.bundle, args.registry, trust)
    for warning in done.warnings:
        say(f"acxfs: warning: {warning}")
    if args.json:
        emit({"name": done.name, "version": done.version, "path": done.path,
              "digest": done.digest, "bytes": done.size, "written": done.written,
              "indexWritten": done.index_written, "warnings": done.warnings})
    else:
        print(done.line)
    return 0


def clock() -> dt.datetime:
    """Now, or `SOURCE_DATE_EPOCH` (seconds) for a reproducible ledger."""
    epoch = os.environ.get("SOURCE_DATE_EPOCH")
    if epoch is None:
        return dt.datetime.now(dt.UTC)
    try:
        return dt.datetime.fromtimestamp(int(epoch), dt.UTC)
    except (ValueError, OverflowError, OSError):
        raise EnvironmentProblem(f"SOURCE_DATE_EPOCH={epoch!r}: not a number of seconds") \
            from None


def cmd_withdraw(args: argparse.Namespace) -> int:
    done = registry_status.withdraw(args.coordinate, args.registry, args.status, args.reason,
                                    args.successor, clock(), args.advisory)
    if args.json:
        emit({"name": done.name, "version": done.version, "status": done.status,
              "asked": done.asked, "recordedAt": done.recorded_at,
              "successor": done.successor, "changed": done.changed})
    else:
        print(done.line)
    return 0
