"""The commands that read a container without mounting it: verify, inspect, ls, cat, extract.

Each parses its arguments, calls the library and prints; `ls`, `cat` and `extract` see the
container only through a verified source, so every byte they print or write was verified.
"""

from __future__ import annotations

import argparse
import contextlib
import stat
import sys
from pathlib import Path

from acxfs import formats, views
from acxfs.cli.common import (
    SubParsers,
    add_command,
    policy_options,
    say,
    trust_of,
    trust_options,
)
from acxfs.cli.output import emit
from acxfs.container import Entry, Source
from acxfs.content.cache import process_cache
from acxfs.errors import EnvironmentProblem
from acxfs.safe.interrupts import stop_like_ctrl_c
from acxfs.text import printable
from acxfs.verdict import Verdict
from acxfs.views.extract import copy_verified, extract, refuse_existing


def open_container(args: argparse.Namespace) -> Source:
    """The source of `args.container` if it meets `args.min_trust`, reading through a new
    process's content store; a verdict below verified is said on stderr."""
    source, report = formats.open_source(args.container, trust_of(args), process_cache(),
                                          min_trust=args.min_trust)
    if report.verdict.status != "verified":
        say(f"acxfs: warning: {report.verdict.line}")
    return source


def add_commands(subs: SubParsers) -> None:
    p = add_command(subs, "verify",
                    "check a container's structure, signature, manifest, signer trust and "
                    "every byte of every file",
                    "acxfs verify research.acx --registry registry.json", cmd_verify)
    p.add_argument("container", metavar="CART")
    depth = p.add_mutually_exclusive_group()
    depth.add_argument("--quick", action="store_true",
                       help="only the check a mount makes before serving: structure, signature, "
                       "manifest and trust, no file content")
    depth.add_argument("--deep", action="store_true",
                       help="inflate and hash every file and re-derive the skill index (the "
                       "default; kept as a synonym)")
    p.add_argument("--json", action="store_true", help="print the result as JSON")
    trust_options(p)

    p = add_command(subs, "inspect",
                    "print a container's summary and skill index without inflating",
                    "acxfs inspect research.acx", cmd_inspect)
    p.add_argument("container", metavar="CART")
    p.add_argument("--json", action="store_true", help="print the result as JSON")
    trust_options(p)

    p = add_command(subs, "ls", "list a verified container's files (no content is read)",
                    "acxfs ls research.acx rom/skills", cmd_ls)
    p.add_argument("container", metavar="CART")
    p.add_argument("path", nargs="?", default="", metavar="PATH")
    p.add_argument("-l", "--long", action="store_true", help="show mode, size and digest")
    p.add_argument("--json", action="store_true",
                   help="print the entries as JSON, with mode, size and digest (docs/json.md)")
    policy_options(p)
    trust_options(p)

    p = add_command(subs, "cat", "print one file's verified bytes",
                    "acxfs cat research.acx rom/skills/expertise-designer/SKILL.md", cmd_cat)
    p.add_argument("container", metavar="CART")
    p.add_argument("path", metavar="PATH")
    policy_options(p)
    trust_options(p)

    p = add_command(subs, "extract", "write verified files into a new directory (all or nothing)",
                    "acxfs extract research.acx ./out --skill expertise-designer", cmd_extract)
    p.add_argument("container", metavar="CART")
    p.add_argument("dest", type=Path, metavar="DEST")
    p.add_argument("--skill", metavar="NAME", help="extract only rom/skills/NAME as DEST")
    policy_options(p)
    trust_options(p)


def verdict_facts(verdict: Verdict) -> list[str]:
    """The verified facts of `verdict`, one printable line each."""
    lines = []
    if verdict.keyid:
        lines.append(f"keyid: {verdict.keyid}")
    if verdict.publisher:
        lines.append(f"publisher: {verdict.publisher}")
    if verdict.signed_at:
        lines.append(f"signedAt: {verdict.signed_at}")
    return [printable(line) for line in lines]


def verdict_json(verdict: Verdict) -> dict[str, object]:
    return {
        "status": verdict.status, "trust": verdict.trust, "summary": verdict.summary,
        "line": verdict.line, "exitCode": verdict.exit_code, "keyid": verdict.keyid,
        "publisher": verdict.publisher, "signedAt": verdict.signed_at,
        "unverifiedSignature": verdict.unverified,
    }


def cmd_verify(args: argparse.Namespace) -> int:
    deep = not args.quick
    report = formats.check(args.container, trust_of(args), deep=deep)
    verdict = report.verdict
    if args.json:  # a refusal too: the document carries its exit code (docs/json.md)
        emit(verdict_json(verdict) | {"container": args.container, "format": report.format,
                                      "deep": deep, "warnings": report.warnings})
        return verdict.exit_code
    print(verdict.line)
    for line in verdict_facts(verdict):
        print(line)
    for warning in report.warnings:
        print(printable(f"warning: {warning}"))
    return verdict.exit_code


def cmd_inspect(args: argparse.Namespace) -> int:
    report = formats.check(args.container, trust_of(args))
    doc = formats.describe(report)
    code = report.verdict.exit_code if report.verdict.is_integrity_failure else 0
    if args.json:
        emit(doc | {"exitCode": code})
    else:
        sys.stdout.write(formats.render(report, doc))
    return code


def cmd_ls(args: argparse.Namespace) -> int:
    with contextlib.closing(open_container(args)) as source:
        path, entry = views.resolve(source, args.path)
        names = [path] if not entry.is_dir else [
            f"{path}/{n}" if path else n for n in source.tree.list(path)
        ]
        items = [(name, source.tree.lookup(name)) for name in names]
        if args.json:
            emit({"container": args.container, "path": path,
                  "entries": [_entry_json(name, item) for name, item in items if item]})
            return 0
        for name, item in items:
            assert item is not None
            shown = printable(name) + ("/" if item.is_dir else "")
            if args.long:
                digest = item.digest.hex() if item.digest else "-"
                print(f"{stat.filemode(item.mode)} {item.size:>10} {digest:64} {shown}")
            else:
                print(shown)
    return 0


def _entry_json(name: str, item: Entry) -> dict[str, object]:
    return {"path": name, "type": "directory" if item.is_dir else "file", "mode": item.mode,
            "size": item.size, "digest": item.digest.hex() if item.digest else None}


def cmd_cat(args: argparse.Namespace) -> int:
    with contextlib.closing(open_container(args)) as source:
        path, entry = views.resolve(source, args.path)
        if entry.is_dir:
            raise EnvironmentProblem(f"{path or '/'}: is a directory")
        copy_verified(source, entry, sys.stdout.buffer.write)
        sys.stdout.buffer.flush()
    return 0


def cmd_extract(args: argparse.Namespace) -> int:
    dest: Path = args.dest
    refuse_existing(dest)
    with contextlib.closing(open_container(args)) as source:
        root = views.skill_root(source, args.container, args.skill)
        with stop_like_ctrl_c():
            count = extract(source, dest, root)
    print(f"extracted {count} verified file{'' if count == 1 else 's'} to {dest}")
    return 0
