"""`acxfs push`: publish a bundle `verify` accepts to an OCI registry.

Invariant: the command parses its arguments, makes one call into `acxfs.sources.oci.push`,
and prints the one line it returns; nothing here speaks to the registry itself.
"""

from __future__ import annotations

import argparse

from acxfs.cli.common import SubParsers, add_command, trust_of, trust_options
from acxfs.errors import EnvironmentProblem
from acxfs.sources.http import DEFAULT_TIMEOUT, Http
from acxfs.sources.oci.push import push
from acxfs.sources.oci.reference import parse_ref


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
    trust_options(p)


def cmd_push(args: argparse.Namespace) -> int:
    if args.timeout <= 0:
        raise EnvironmentProblem("--timeout: not a positive number of seconds")
    ref = parse_ref(args.ref)
    pushed = push(args.bundle, ref, trust_of(args), Http(timeout=args.timeout))
    print(pushed.line)
    return 0
