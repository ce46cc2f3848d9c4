"""The `mount` and `umount` commands: parse, call the mount stack, print.

`mount` hands a `MountRequest` to `acxfs.mount.single`, which checks, views and mounts; what
it says on the way reaches the user through `say`.
"""
from __future__ import annotations

import argparse

from acxfs.cli.common import (
    SubParsers,
    add_command,
    policy_options,
    say,
    trust_of,
    trust_options,
)
from acxfs.mount import backend, lifecycle
from acxfs.mount.single import MountRequest, mount_container
from acxfs.text import printable


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
    p.add_argument("--backend", choices=backend.BACKENDS,
                   help="FUSE library: libfuse3-lowlevel (the default where libfuse3 loads: "
                   "optional, pip install 'acxfs[fuse3]', apt-get install libfuse3-3; the "
                   "kernel keeps listings and verified pages), libfuse3 through mfusepy's "
                   "high-level API, or libfuse2 through fusepy (the default without libfuse3)")
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

def cmd_mount(args: argparse.Namespace) -> int:
    request = MountRequest(
        args.container, args.mountpoint, min_trust=args.min_trust, skill=args.skill,
        skills=args.skills, root_view=args.root_view, with_save=args.with_save,
        foreground=args.foreground, backend=args.backend or backend.preferred(),
        log_file=args.log_file,
        inputs=[*args.registry, *args.trust_key])
    return mount_container(request, lambda: trust_of(args), say)


def cmd_umount(args: argparse.Namespace) -> int:
    print(printable(lifecycle.umount(args.mountpoint)))
    return 0
