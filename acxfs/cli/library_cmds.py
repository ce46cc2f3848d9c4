"""`acxfs add`, `update`, `revert`, `remove`, `list`, `sync`, `up` and `down`: the skills
library and its projects.

Invariant: each command parses its arguments, makes one call into `acxfs.library`, and prints
what it returns; nothing here touches the store, the links or the daemon itself.  What only
some command lines reach is imported by the helper that reaches it: the projects (`--project`,
`sync`: `_projects`) and the sources (`--from`, `oci://`, `update`: `_options`, `_fetch`,
`cmd_update`), so that `add` of a file, `list`, `remove`, `up` and `down` load neither
(`tests/cli/test_library_commands_load_what_they_use.py`).
"""

from __future__ import annotations

import argparse
import os
from typing import TYPE_CHECKING

from acxfs.cli.common import SubParsers, add_command, say
from acxfs.cli.output import emit
from acxfs.errors import EnvironmentProblem
from acxfs.library.links.agents import agent_names, help_table
from acxfs.library.manager import Library
from acxfs.library.report import describe_library, render_library
from acxfs.library.store.state import UPDATE_MODES
from acxfs.paths import trust_dir
from acxfs.sources.http import DEFAULT_TIMEOUT
from acxfs.sources.oci.reference import is_oci, parse_ref
from acxfs.sources.policy import load_policy
from acxfs.sources.spec import is_registry, normalise

if TYPE_CHECKING:
    from acxfs.library.projects.project import Projects
    from acxfs.library.updates import remote

_PROJECT_HELP = ("the project directory DIR instead of the user library: links in "
                 "DIR/.agents/skills and DIR/.claude/skills, entries in DIR/acxfs.lock")


def _project_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--project", metavar="DIR", help=_PROJECT_HELP)


_KEY_CHANGE_HELP = ("accept a bundle signed by another key of the publisher its identity was "
                    "installed from (the identity is bound to the new key from then on)")


def add_commands(subs: SubParsers) -> None:
    p = add_command(
        subs, "add", "install signed bundles into the skills library, for every agent",
        "acxfs add research.acx                  # ~/.agents/skills and ~/.claude/skills\n"
        "  acxfs add tools.acx --agent gemini      # ~/.gemini/skills only\n"
        "  acxfs add --project . research.acx      # ./.claude/skills, ./.agents/skills and "
        "./acxfs.lock", cmd_add)
    p.epilog = (f"{p.epilog}\n"
                "  acxfs add io.github.me/research --from https://skills.example.com/registry/\n"
                "  acxfs add io.github.me/research@1.2.0 --from ~/src/acx    # a registry clone\n"
                "  acxfs add com.example.skills --from azphalt+https://pkgs.example.com/\n"
                "  acxfs add oci://ghcr.io/me/research          # its highest release tag\n"
                "  acxfs add --project . oci://ghcr.io/me/research:1.2.0\n"
                "  acxfs add oci://registry.example.com/skills/tools@sha256:<digest>"
                f"\n\n{help_table()}")
    _project_option(p)
    p.add_argument("bundles", nargs="+", metavar="BUNDLE|NAME",
                   help="an .acx cartridge or .azp package, or oci://HOST/REPO[:TAG|@DIGEST]; "
                   "with --from: PUBLISHER/ID[@VERSION] or an azphalt package ID[@VERSION]")
    p.add_argument("--agent", action="append", choices=agent_names(), metavar="NAME",
                   help="link into this agent's own skill directory only (repeatable; "
                   "default: agents and claude; the table below)")
    p.add_argument("--allow-downgrade", action="store_true",
                   help="install a version below the highest one ever installed, or another "
                   "release under a version number already installed")
    p.add_argument("--allow-key-change", action="store_true", help=_KEY_CHANGE_HELP)
    p.add_argument("--updates", choices=UPDATE_MODES,
                   help="what a newer release at its source does: auto (the daemon installs "
                   "it), notify (acxfs list shows it; the default), off; acxfs refresh "
                   "--updates MODE NAME changes it later")
    source_options(p)
    p = add_command(subs, "update", "install newer versions of installed bundles (links "
                    "re-pointed in one rename each; the previous revision kept)",
                    "acxfs update research-1.3.0.acx          # a file\n"
                    "  acxfs update --project . research-1.3.0.acx\n"
                    "  acxfs update                              # all installed from a source\n"
                    "  acxfs update io.github.me/research --check  # exit 1: an update waits\n"
                    "  acxfs update io.github.me/research --from ~/mirror/acx", cmd_update)
    _project_option(p)
    p.add_argument("bundles", nargs="*", metavar="BUNDLE|IDENTITY",
                   help="bundle files; or identities installed from a source (none: all)")
    p.add_argument("--allow-downgrade", action="store_true",
                   help="allow a version below the floor, or another release under one number")
    p.add_argument("--allow-key-change", action="store_true", help=_KEY_CHANGE_HELP)
    p.add_argument("--check", action="store_true",
                   help="change nothing; say what update would do; exit 1 if anything")
    p.add_argument("--json", action="store_true",
                   help="with --check: print it as JSON (docs/json.md)")
    source_options(p)
    p = add_command(subs, "revert", "serve the previous revision of installed bundles again",
                    "acxfs revert io.github.me/research", cmd_revert)
    p.add_argument("names", nargs="+", metavar="IDENTITY|SKILL")
    p = add_command(subs, "list", "show the library: bundles, skills, links, what is served",
                    "acxfs list\n  acxfs list --json", cmd_list)
    p.add_argument("--json", action="store_true", help="print it as JSON (docs/library.md)")
    p = add_command(subs, "remove", "uninstall bundles: their links, their store files",
                    "acxfs remove io.github.me/research\n  acxfs remove expertise-designer\n"
                    "  acxfs remove --project . io.github.me/research  # and from ./acxfs.lock\n"
                    "  acxfs remove --project ~/old-checkout  # unlink it here, forget it",
                    cmd_remove)
    _project_option(p)
    p.add_argument("names", nargs="*", metavar="IDENTITY|SKILL")
    p.add_argument("--forget", action="store_true",
                   help="also forget the version floor and the publisher the identity is bound "
                   "to (a later add may install any version, from any publisher)")
    p = add_command(subs, "up", "start the library daemon (every installed bundle, checked)",
                    "acxfs up\n  acxfs up -f          # in the foreground (a service)", cmd_up)
    p.add_argument("-f", "--foreground", action="store_true", help="serve in the foreground")
    p.add_argument("--reload", action="store_true",
                   help="have the running daemon re-check every bundle against the trust store")
    p = add_command(subs, "sync", "make this machine match a project's acxfs.lock (verified "
                    "bundles from the store or --from directories, links, git exclude lines)",
                    "acxfs sync                              # the project in .\n"
                    "  acxfs sync --from vendor/skills && acxfs sync --check   # in CI\n"
                    "  acxfs sync --from https://mirror.example.com/reg/  # by the lock's path\n"
                    "  acxfs sync --from oci://mirror.example.com/skills/research  # by digest",
                    cmd_sync)
    p.add_argument("--project", metavar="DIR", default=".",
                   help="the project directory (default: .)")
    p.add_argument("--from", dest="sources", action="append", default=[], metavar="DIR",
                   help="a directory holding bundles the lock names, or a registry (a "
                   "directory with index.json, https://BASE/, azphalt+https://BASE/, "
                   "oci://HOST/REPO) to fetch them from by the lock's path or manifest digest "
                   "(repeatable)")
    p.add_argument("--check", action="store_true",
                   help="change nothing: say how this machine differs from the lock (exit 1 "
                   "if it does)")
    p.add_argument("--json", action="store_true",
                   help="with --check: print the differences as JSON (docs/json.md)")
    p.add_argument("--offline", action="store_true",
                   default=os.environ.get("ACXFS_OFFLINE") == "1",
                   help="no network: the store and directories only (also ACXFS_OFFLINE=1)")
    add_command(subs, "down", "stop the library daemon (links dangle until acxfs up)",
                "acxfs down", cmd_down)
    p = add_command(subs, "layout", "serve agents' skill directories whole (one link each, as "
                    "fast as plain copies) or as directories of links",
                    "acxfs layout whole --agent agents --agent claude", cmd_layout)
    p.add_argument("how", nargs="?", choices=["whole", "links"],
                   help="whole: the directory becomes one link to a read-only view of its "
                   "skills (it then holds nothing else: only a directory that is absent or "
                   "holds only acxfs's links can be); links: a directory of one link per "
                   "skill again; none: say how each is served")
    p.add_argument("--agent", action="append", choices=agent_names(), metavar="NAME",
                   help="the agent whose skill directory it is (repeatable; default: agents "
                   "and claude, as for add)")


def source_options(p: argparse.ArgumentParser) -> None:
    group = p.add_argument_group("sources")
    group.add_argument("--from", dest="source", metavar="SOURCE",
                       help="a registry directory or clone, https://BASE/ of one, "
                       "azphalt+https://BASE/, or oci://HOST/REPO (plain http:// and oci+http:// "
                       "only for loopback)")
    group.add_argument("--timeout", type=float, default=DEFAULT_TIMEOUT, metavar="S",
                       help="seconds without an answer before giving up, per connect and read "
                       "(default: 30)")
    group.add_argument("--offline", action="store_true",
                       default=os.environ.get("ACXFS_OFFLINE") == "1",
                       help="no network: directories and the store only (also ACXFS_OFFLINE=1)")
    group.add_argument("--allow-withdrawn", action="store_true",
                       help="install a release its source withdrew, yanked or revoked")
    group.add_argument("--allow-stale", action="store_true",
                       help="accept an index or ledger older than the one accepted before")


def _options(args: argparse.Namespace) -> remote.Options:
    """How this command reads its sources (the sources' modules load here)."""
    from acxfs.library.updates import remote
    if args.timeout <= 0:
        raise EnvironmentProblem("--timeout: not a positive number of seconds")
    return remote.Options(policy=load_policy(trust_dir()), timeout=args.timeout,
                          offline=args.offline,
                          allow_withdrawn=args.allow_withdrawn, allow_stale=args.allow_stale,
                          allow_key_change=args.allow_key_change)


def _fetch(library: Library, names: list[str], source: str | None,
           args: argparse.Namespace) -> remote.Fetch | None:
    """What `add` fetches: each NAME[@VERSION] from `source`; with no source, the OCI
    references among `names`, each by its tag or digest (none: the highest release tag).
    None: nothing to fetch, and the sources' modules are not loaded."""
    refs = names if source is not None else [n for n in names if is_oci(n)]
    if not refs:
        return None
    from acxfs.library.updates import remote
    requests: list[tuple[str, str | None, str]] = []
    for text in refs:
        if source is not None:
            requests.append((*remote.split_name(text), source))
        else:
            ref = parse_ref(text)
            requests.append(("", ref.digest or ref.tag, ref.key))
    return remote.Fetch(requests, remote.Sources(_options(args), cache=library.paths.http_cache),
                        library.paths, library.note)


def _library() -> Library:
    return Library.for_command(say)


def _projects(library: Library) -> Projects:
    """The projects of `library` (their modules, and the sources a lock may name, load
    here)."""
    from acxfs.library.projects.project import Projects
    return Projects(library)


def cmd_add(args: argparse.Namespace) -> int:
    library = _library()
    if args.updates is not None and args.project is not None:
        raise EnvironmentProblem("--updates is for the user library: a project moves only "
                                 "with its acxfs.lock")
    files = [b for b in args.bundles if not is_oci(b)] if args.source is None else []
    fetch = _fetch(library, args.bundles, args.source, args)
    if files:
        library.policy.check_files()
    if args.project is not None:
        return _projects(library).add(args.project, files, args.agent,
                                      allow_downgrade=args.allow_downgrade, remote=fetch)
    return library.add(files, args.agent, allow_downgrade=args.allow_downgrade,
                       allow_key_change=args.allow_key_change, remote=fetch,
                       updates=args.updates)


def cmd_update(args: argparse.Namespace) -> int:
    library = _library()
    files = [b for b in args.bundles if os.path.isfile(b)]
    if files and len(files) == len(args.bundles) and args.source is None and not args.check:
        library.policy.check_files()
        if args.project is not None:
            return _projects(library).add(args.project, args.bundles, None,
                                          allow_downgrade=args.allow_downgrade,
                                          update_only=True)
        return library.add(args.bundles, None, allow_downgrade=args.allow_downgrade,
                           update_only=True, allow_key_change=args.allow_key_change)
    if files:
        raise EnvironmentProblem(f"{files[0]}: a file; update takes either files, or "
                                 "identities installed from a source (with --from, --check)")
    if args.project is not None:
        raise EnvironmentProblem("update --project takes bundle files")
    from acxfs.library.updates import updates  # an update from sources: see _options
    if args.json:
        if not args.check:
            raise EnvironmentProblem("--json reports what update --check finds; add --check")
        work = updates.survey(library, args.bundles, args.source, _options(args),
                              library.policy.warn_withdrawn)
        emit(updates.check_doc(work))
        return 1 if work.changes else 0
    return updates.update(library, args.bundles, args.source, _options(args), args.check,
                          args.allow_downgrade, warn_only=library.policy.warn_withdrawn)


def cmd_sync(args: argparse.Namespace) -> int:
    if args.check:
        if args.sources:
            raise EnvironmentProblem("--check changes nothing: it takes no --from")
        if args.json:
            found = _projects(_library()).differences(args.project)
            emit({"project": str(found.root), "matches": not found.lines,
                  "bundles": found.bundles, "skills": found.skills,
                  "differences": found.lines, "exitCode": 1 if found.lines else 0})
            return 1 if found.lines else 0
        return _projects(_library()).check(args.project)
    if args.json:
        raise EnvironmentProblem("--json is for sync --check (sync itself reports as it goes)")
    library = _library()
    for source in args.sources:
        if is_oci(source):
            library.policy.check_source(parse_ref(source).key)
        elif is_registry(source):
            library.policy.check_source(normalise(source))
        else:
            library.policy.check_files()
    return _projects(library).sync(args.project, args.sources, offline=args.offline)


def cmd_revert(args: argparse.Namespace) -> int:
    return _library().revert(args.names)


def cmd_list(args: argparse.Namespace) -> int:
    library = _library()
    doc = describe_library(library)
    if args.json:
        emit(doc)
    else:
        print(render_library(doc), end="")
    return 0


def cmd_remove(args: argparse.Namespace) -> int:
    if args.project is not None:
        if args.forget:
            raise EnvironmentProblem("--forget is for the user library (a project has no "
                                     "floors)")
        return _projects(_library()).remove(args.project, args.names)
    if not args.names:
        raise EnvironmentProblem("name what to remove: IDENTITY or SKILL (see: acxfs list)")
    return _library().remove(args.names, forget=args.forget)


def cmd_up(args: argparse.Namespace) -> int:
    return _library().up(foreground=args.foreground, reload=args.reload)


def cmd_down(args: argparse.Namespace) -> int:
    return _library().down()


def cmd_layout(args: argparse.Namespace) -> int:
    whole = None if args.how is None else args.how == "whole"
    return _library().layout(args.agent, whole)
