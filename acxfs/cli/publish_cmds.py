"""`acxfs push`: publish a bundle `verify` accepts to an OCI registry.

Invariant: the command parses its arguments, makes one call into `acxfs.sources.oci.push`,
and prints the one line it returns (with `--json`, its document); nothing here speaks to the
registry itself.
"""

from __future__ import annotations

import argparse

from acxfs.cli.common import SubParsers, add_command, trust_of, trust_options
from acxfs.cli.output import emit
from acxfs.errors import EnvironmentProblem
from acxfs.sources.http import DEFAULT_TIMEOUT, Http
from acxfs.sources.oci.push import push
from acxfs.sources.oci.reference import parse_ref, version_tag


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
