"""The `mount`, `umount` and `status` subcommands: views, policy messages, then the daemon.

Views pick a root inside the verified tree by signed paths only: the whole container, one
skill directory (`--skill`, or the mountpoint's name), or the skills directory (`--skills`).
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from acxfs import fuse_backend
from acxfs import verdict as v
from acxfs.errors import EnvironmentProblem

_RETAINED: list[object] = []


def advice(verdict: v.Verdict, container: str, mounting: bool = True) -> list[str]:
    """How to proceed after a refusal, for the user to read (`mounting`: said to `mount`;
    otherwise to a command that reads the container without mounting it)."""
    verb = "mount" if mounting else "read"
    if verdict.trust == "portable" and not verdict.unverified:
        lines = ["acxfs: refused: the signature is valid but its signer is not trusted here"]
        if verdict.keyid:
            lines.append(f"  keyid: {verdict.keyid}")
        if verdict.publisher:
            lines.append(f"  publisher: {verdict.publisher}")
        lines.append(f"  to trust this signer: acxfs trust add {container}")
        lines.append(f"  to {verb} it once without trusting it: add --min-trust portable")
        return lines
    if verdict.trust == "legacy" or verdict.unverified:
        return ["acxfs: refused: no trusted signature; "
                f"--min-trust legacy {verb}s it and still checks each file against its recorded "
                "digest (this catches corruption, not tampering)"]
    if verdict.is_integrity_failure:
        return [f"acxfs: refused: this container will not be {'mounted' if mounting else 'read'}"]
    return []


def _choose_view(args: argparse.Namespace, source: Any, announce: Callable[[str], None]) -> tuple[
        str, str]:
    skills_root: str = source.skills_root
    skills = source.tree.skills(skills_root)
    if args.skill and args.skills:
        raise EnvironmentProblem("give --skill NAME or --skills, not both")
    if args.skill:
        if args.skill not in skills:
            raise EnvironmentProblem(
                f"no skill {args.skill!r} in {args.container}; it has: "
                f"{', '.join(skills) or '(no skills)'}")
        return f"{skills_root}/{args.skill}", f"skill {args.skill}"
    if args.skills:
        if source.tree.lookup(skills_root) is None:
            raise EnvironmentProblem(f"{args.container} has no {skills_root}/ directory")
        return skills_root, "skills"
    name = os.path.basename(os.path.abspath(args.mountpoint))
    if name in skills and not args.root_view:
        announce(f"acxfs: mounting skill {name} (the mountpoint's name); "
                 "use --skills or --root-view to mount otherwise")
        return f"{skills_root}/{name}", f"skill {name}"
    parent = os.path.basename(os.path.dirname(os.path.abspath(args.mountpoint)))
    if parent == "skills" and not args.root_view:
        announce("acxfs: hint: this mountpoint is inside a skills/ directory; "
                 "--skill NAME or --skills fits agent runtimes better")
    return source.default_root, "container"


def cmd_mount(args: argparse.Namespace) -> int:
    from acxfs import daemon
    from acxfs.cli import _trust
    from acxfs.loader import open_source

    # Absolute paths: the background daemon leaves the caller's directory (chdir "/").
    container = os.path.abspath(args.container)
    log_file = Path(args.log_file).absolute() if args.log_file else daemon.default_log_file()

    def announce(message: str) -> None:
        print(v.printable(message), file=sys.stderr)

    from acxfs.errors import UntrustedError

    daemon.check_side_files(args.mountpoint, [container, *args.registry, *args.trust_key],
                            log_file, "--log-file" if args.log_file else "the log file")
    try:
        source, verdict = open_source(container, _trust(args), args.min_trust,
                                      with_save=args.with_save)
    except UntrustedError as exc:
        verdict_line = str(exc.verdict)
        daemon.log_line(log_file, f"refused: {args.container}: {verdict_line}")
        raise
    try:
        root, view = _choose_view(args, source, announce)
        if verdict.status != "verified":
            warning = f"acxfs: warning: mounting below the default trust: {verdict.line}"
            if verdict.trust == "legacy" or verdict.unverified:
                warning += (" (each file is checked against its recorded digest: this catches "
                            "corruption, not tampering)")
            announce(warning)
        if args.with_save and view == "container":
            view = "container with the unsigned save/"
            announce("acxfs: warning: save/ is the unsigned SAVE zone; files without a recorded "
                     "digest there cannot be read")
        elif args.with_save:
            announce(f"acxfs: note: --with-save has no effect on the {view} view (save/ lies "
                     "outside it)")
        created = daemon.prepare_mountpoint(args.mountpoint, args.backend)
    except BaseException:
        source.close()
        raise

    # One log line per failed check: the store reports each tamper event once (a failed file
    # stays failed; the FUSE layer then only answers EIO).
    from acxfs.content import ContentStore

    store = ContentStore(source.raw_chunks,
                         on_tamper=lambda exc: daemon.log_line(log_file, f"tamper: {exc}"))
    try:
        code = daemon.mount(source, store, verdict, container, args.mountpoint, root, view,
                            args.foreground, log_file, created, announce, args.backend)
        # The daemon has its own copy now; keeping this one referenced lets the command exit
        # without freeing the verified tree object by object (see cli.main_entry).
        _RETAINED.append(source)
        return code
    except BaseException:
        if created is not None:
            from acxfs.made_dirs import remove_made

            remove_made([*created, os.path.abspath(args.mountpoint)])
        raise


def cmd_umount(args: argparse.Namespace) -> int:
    from acxfs import daemon

    print(v.printable(daemon.umount(args.mountpoint)))
    return 0


def cmd_status(args: argparse.Namespace) -> int:
    from acxfs import daemon

    mounts = daemon.live_mounts()
    if not mounts:
        print("no acxfs mounts")
        return 0
    for fsname, mountpoint in mounts:  # names any user chose: printed with escapes
        state = daemon.read_state(mountpoint)
        shown = v.printable(mountpoint)
        container = v.printable(fsname.removeprefix("acxfs:"))
        if state is None:
            print(f"{shown}  {container}  (no state: started by another user or stale)")
            continue
        alive = "running" if daemon._alive(state.pid) else "STALE (daemon gone; acxfs umount)"
        print(f"{shown}  {v.printable(state.container)}  view={state.view}  pid={state.pid} "
              f"{alive}")
        print(f"  {v.printable(state.verdict)}")
    return 0


def add_commands(subs: Any, sub: Any, trust_options: Any, policy_options: Any) -> None:
    p = sub(subs, "mount", "verify a container, then mount it read-only (FUSE)",
            "acxfs mount research.acx ~/.claude/skills/expertise-designer\n"
            "  acxfs mount research.acx /mnt/r --skills --min-trust portable", cmd_mount)
    p.set_defaults(mounting=True)  # refusals then say "will not be mounted"
    p.add_argument("container", metavar="CART")
    p.add_argument("mountpoint", metavar="MOUNTPOINT")
    view = p.add_argument_group("view (default: the whole container, or the skill named like "
                                "the mountpoint; skills live in rom/skills/ in a cartridge, "
                                "skills/ in an .azp package)")
    view.add_argument("--skill", metavar="NAME", help="mount the skill directory NAME as the root")
    view.add_argument("--skills", action="store_true",
                      help="mount the skills directory as the root")
    view.add_argument("--root-view", action="store_true",
                      help="mount the whole container even inside a skills/ directory")
    view.add_argument("--with-save", action="store_true",
                      help="add the unsigned SAVE zone as save/ (explicit opt-in; whole-"
                      "container view of a cartridge only)")
    p.add_argument("-f", "--foreground", action="store_true", help="stay attached until unmounted")
    p.add_argument("--backend", choices=fuse_backend.BACKENDS, default=fuse_backend.DEFAULT_BACKEND,
                   help="FUSE library: libfuse2 through fusepy (default) or libfuse3 through "
                   "mfusepy (optional: pip install 'acxfs[fuse3]', apt-get install libfuse3-3; "
                   "faster cold directory listings)")
    p.add_argument("--log-file", metavar="PATH",
                   help="log refusals, tampering, start and stop (default: "
                   "$XDG_STATE_HOME/acxfs/acxfs.log); a regular file outside the mountpoint, "
                   "the trust store and acxfs's mount records, and none of the inputs")
    policy_options(p)
    trust_options(p)

    p = sub(subs, "umount", "unmount an acxfs mount (also a stale one) and stop its daemon "
            "(with files still open: detach it; the daemon serves them until they are closed)",
            "acxfs umount ~/.claude/skills/expertise-designer", cmd_umount)
    p.add_argument("mountpoint", metavar="MOUNTPOINT")
    sub(subs, "status", "list live acxfs mounts with their container, view and verdict",
        "acxfs status", cmd_status)
