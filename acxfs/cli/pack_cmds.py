"""The commands that make signed artifacts: `keygen` (an Ed25519 key pair) and `pack`.

Each parses its arguments, calls the writer and prints what it wrote; SIGINT, SIGTERM and
SIGHUP stop `pack` at its next checkpoint (`acxfs.safe.interrupts`), so no partial cartridge is left
behind.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from acxfs.cli.common import SubParsers, add_command
from acxfs.errors import PackError
from acxfs.formats.acx.pack import keygen, load_signing_key, pack
from acxfs.safe.interrupts import stop_like_ctrl_c
from acxfs.semver import is_semver
from acxfs.text import printable


def add_commands(subs: SubParsers) -> None:
    p = add_command(subs, "keygen", "make an Ed25519 key pair (default: this instance's local key)",
                    "acxfs keygen            # the default key, trusted as 'local'\n"
                    "  acxfs keygen ci-key.pem  # writes ci-key.pem and ci-key.pub.pem",
                    cmd_keygen)
    p.add_argument("path", nargs="?", type=Path, metavar="PATH")
    p.add_argument("--force", action="store_true", help="replace existing key files")

    p = add_command(subs, "pack", "pack Agent Skill directories into a signed ACX 0.1 cartridge",
                    "acxfs pack examples/hello-acx -o hello.acx --publisher io.github.me",
                    cmd_pack)
    p.add_argument("skill_dirs", nargs="+", type=Path, metavar="SKILL_DIR")
    p.add_argument("-o", "--output", type=Path, required=True, metavar="OUT.acx")
    p.add_argument("--publisher", required=True, metavar="REVERSE.DNS",
                   help="publisher id, e.g. io.github.<owner> or com.example")
    p.add_argument("--id", dest="artifact_id", metavar="ID",
                   help="artifact id (default: first skill)")
    p.add_argument("--version", dest="artifact_version", default="1.0.0", metavar="SEMVER")
    p.add_argument("--key", type=Path, metavar="KEY.pem",
                   help="private key (default: the local key of 'acxfs keygen')")
    p.add_argument("--deflate", choices=["zlib", "raw", "none"], default="zlib",
                   help="zlib: stock sqlite3 -Ax reads it (default); raw: what the reference "
                   "CLI reads; none: stored")
    p.add_argument("--sqlar-dirs", action="store_true",
                   help="add directory rows and S_IFREG type bits as sqlite3 -Ac does")
    p.add_argument("--uuid", metavar="UUID", help="cartridge uuid (for reproducible output)")


def cmd_keygen(args: argparse.Namespace) -> int:
    private_path, public_path, key = keygen(args.path, force=args.force)
    print(f"private key: {private_path} (mode 0600)")
    print(f"public key:  {public_path}")
    print(f"keyid: {key.public.keyid}")
    if args.path is None:
        print("this is the local key: cartridges it signs verify as 'verified / local'")
    return 0


def cmd_pack(args: argparse.Namespace) -> int:
    if not is_semver(args.artifact_version):
        raise PackError(f"--version {printable(args.artifact_version)!r} is not a SemVer 2.0.0 "
                        "version (MAJOR.MINOR.PATCH, e.g. 1.2.0 or 2.0.0-rc.1)")
    key = load_signing_key(args.key)
    with stop_like_ctrl_c():
        rom_hash = pack(
            args.skill_dirs, args.output, args.publisher, key, artifact_id=args.artifact_id,
            version=args.artifact_version, deflate=args.deflate, sqlar_dirs=args.sqlar_dirs,
            cartridge_uuid=args.uuid,
        )
    print(f"wrote {args.output}")
    print(f"manifest: {rom_hash}")
    print(f"keyid: {key.public.keyid}")
    return 0
