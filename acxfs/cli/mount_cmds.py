"""The `mount`, `umount` and `status` commands: open and check, choose the view, hand over.

`mount` opens the container through the format table (refused unless its verdict meets
`--min-trust`), asks `acxfs.views` which subtree to serve, says what the user should know
about that choice and the verdict, and hands one `MountPlan` to `acxfs.mount.lifecycle`.
"""

from __future__ import annotations

import argparse
import os
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
from acxfs.content.cache import process_cache
from acxfs.errors import UntrustedError
from acxfs.mount import backend, lifecycle, preflight, records
from acxfs.mount.router import Mounted
from acxfs.mount.table import live_mounts
from acxfs.paths import default_log_file
from acxfs.text import printable

_RETAINED: list[object] = []


def add_commands(subs: SubParsers) -> None:
    p = add_command(subs, "mount", "verify a container, then mount it read-only (FUSE)",
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
    p.add_argument("--backend", choices=backend.BACKENDS, default=backend.DEFAULT_BACKEND,
                   help="FUSE library: libfuse2 through fusepy (default) or libfuse3 through "
                   "mfusepy (optional: pip install 'acxfs[fuse3]', apt-get install libfuse3-3; "
                   "faster cold directory listings)")
    p.add_argument("--log-file", metavar="PATH",
                   help="log refusals, tampering, start and stop (default: "
                   "$XDG_STATE_HOME/acxfs/acxfs.log); a regular file outside the mountpoint, "
                   "the trust store and acxfs's mount records, and none of the inputs")
    policy_options(p)
    trust_options(p)

    p = add_command(subs, "umount", "unmount an acxfs mount (also a stale one) and stop its "
                    "daemon (with files still open: detach it; the daemon serves them until "
                    "they are closed)", "acxfs umount ~/.claude/skills/expertise-designer",
                    cmd_umount)
    p.add_argument("mountpoint", metavar="MOUNTPOINT")
    add_command(subs, "status", "list live acxfs mounts with their container, view and verdict",
                "acxfs status", cmd_status)


def cmd_mount(args: argparse.Namespace) -> int:
    # Absolute paths: the background daemon leaves the caller's directory (chdir "/").
    container = os.path.abspath(args.container)
    log_file = Path(args.log_file).absolute() if args.log_file else default_log_file()
    preflight.check_side_files(args.mountpoint, [container, *args.registry, *args.trust_key],
                            log_file, "--log-file" if args.log_file else "the log file")
    store = process_cache()
    try:
        source, report = formats.open_source(container, trust_of(args), store,
                                             min_trust=args.min_trust, with_save=args.with_save)
        verdict = report.verdict
        del report  # the check's rows go with it, before the daemon forks
    except UntrustedError as exc:
        records.log_line(log_file, f"refused: {args.container}: {exc.verdict}")
        raise
    try:
        view = views.choose_view(source, args.container, args.mountpoint, skill=args.skill,
                                 skills=args.skills, root_view=args.root_view)
        for note in view.notes:
            say(note)
        if verdict.status != "verified":
            warning = f"acxfs: warning: mounting below the default trust: {verdict.line}"
            if verdict.trust == "legacy" or verdict.unverified:
                warning += (" (each file is checked against its recorded digest: this catches "
                            "corruption, not tampering)")
            say(warning)
        name = view.name
        if args.with_save and name == "container":
            name = "container with the unsigned save/"
            say("acxfs: warning: save/ is the unsigned SAVE zone; files without a recorded "
                "digest there cannot be read")
        elif args.with_save:
            say(f"acxfs: note: --with-save has no effect on the {name} view (save/ lies "
                "outside it)")
        created = preflight.prepare_mountpoint(args.mountpoint, args.backend)
    except BaseException:
        source.close()
        raise
    plan = lifecycle.MountPlan(
        args.mountpoint, [Mounted("", source, view.root, verdict, container)], store, name,
        foreground=args.foreground, log_file=log_file, created=created, backend=args.backend,
        announce=say)
    code = lifecycle.mount(plan)
    # The daemon has its own copy now; keeping this one referenced lets the command exit
    # without freeing the verified tree object by object (see acxfs.cli.main_entry).
    _RETAINED.append(source)
    return code


def cmd_umount(args: argparse.Namespace) -> int:
    print(printable(lifecycle.umount(args.mountpoint)))
    return 0


def cmd_status(args: argparse.Namespace) -> int:
    mounts = live_mounts()
    if not mounts:
        print("no acxfs mounts")
        return 0
    for fsname, mountpoint in mounts:  # names any user chose: printed with escapes
        state = records.read_state(mountpoint)
        shown = printable(mountpoint)
        container = printable(fsname.removeprefix("acxfs:"))
        if state is None:
            print(f"{shown}  {container}  (no state: started by another user or stale)")
            continue
        alive = "running" if lifecycle.alive(state.pid) else "STALE (daemon gone; acxfs umount)"
        print(f"{shown}  {printable(state.container)}  view={state.view}  pid={state.pid} "
              f"{alive}")
        print(f"  {printable(state.verdict)}")
    return 0
