"""The `acxfs` command: argument parsing and printing only; the library does the work.

Every subcommand returns an exit code; library errors become one `acxfs: error: ...` line on
stderr (exit 2 for usage and environment problems) or the verdict line of the spec.
"""

from __future__ import annotations

import argparse
import contextlib
import errno
import io
import json
import os
import shutil
import signal
import sys
import tempfile
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, TextIO

from acxfs import __version__
from acxfs import verdict as v
from acxfs.errors import (
    AcxfsError,
    EnvironmentProblem,
    InputError,
    TamperError,
    UntrustedError,
)
from acxfs.trust import TrustContext, load_trust

if TYPE_CHECKING:
    from acxfs.loader import Report
    from acxfs.sources.base import Source

Handler = Callable[[argparse.Namespace], int]


def _trust_options(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("trust")
    group.add_argument("--registry", action="append", default=[], metavar="FILE",
                       help="an acx.trust-registry/1 file to trust for this command (repeatable)")
    group.add_argument("--trust-key", action="append", default=[], metavar="FILE",
                       help="an Ed25519 public key (SPKI PEM, or SPKI DER in base64) to trust "
                       "for this command")


def _policy_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--min-trust", choices=["verified", "portable", "legacy"],
                        default="verified",
                        help="lowest verdict to serve (default: verified, i.e. trusted or local)")


def _trust(args: argparse.Namespace) -> TrustContext:
    return load_trust(args.registry, args.trust_key)


def _sub(subs: argparse._SubParsersAction[argparse.ArgumentParser], name: str, summary: str,
         example: str, handler: Handler) -> argparse.ArgumentParser:
    parser = subs.add_parser(
        name, help=summary, description=summary,
        epilog="example:\n  " + example, formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.set_defaults(handler=handler)
    return parser


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="acxfs",
        description="Mount signed skill bundles (ACX cartridges, azphalt packages) read-only; "
        "every byte is verified against the signed manifest before it is served.",
        epilog="example:\n  acxfs mount research.acx ~/.claude/skills/expertise-designer",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"acxfs {__version__}")
    subs = parser.add_subparsers(dest="command", metavar="COMMAND")
    subs.required = True

    p = _sub(subs, "verify", "check a container's signature, manifest and signer trust",
             "acxfs verify research.acx --registry registry.json", cmd_verify)
    p.add_argument("container", metavar="CART")
    p.add_argument("--deep", action="store_true",
                   help="also inflate and hash every file and re-derive the skill index")
    p.add_argument("--json", action="store_true", help="print the result as JSON")
    _trust_options(p)

    p = _sub(subs, "inspect", "print a container's summary and skill index without inflating",
             "acxfs inspect research.acx", cmd_inspect)
    p.add_argument("container", metavar="CART")
    p.add_argument("--json", action="store_true", help="print the result as JSON")
    _trust_options(p)

    p = _sub(subs, "keygen", "make an Ed25519 key pair (default: this instance's local key)",
             "acxfs keygen            # the default key, trusted as 'local'\n"
             "  acxfs keygen ci-key.pem  # writes ci-key.pem and ci-key.pub.pem", cmd_keygen)
    p.add_argument("path", nargs="?", type=Path, metavar="PATH")
    p.add_argument("--force", action="store_true", help="replace existing key files")

    p = _sub(subs, "pack", "pack Agent Skill directories into a signed ACX 0.1 cartridge",
             "acxfs pack examples/hello-acx -o hello.acx --publisher io.github.me", cmd_pack)
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

    p = _sub(subs, "ls", "list a verified container's files (no content is read)",
             "acxfs ls research.acx rom/skills", cmd_ls)
    p.add_argument("container", metavar="CART")
    p.add_argument("path", nargs="?", default="", metavar="PATH")
    p.add_argument("-l", "--long", action="store_true", help="show mode, size and digest")
    _policy_options(p)
    _trust_options(p)

    p = _sub(subs, "cat", "print one file's verified bytes",
             "acxfs cat research.acx rom/skills/expertise-designer/SKILL.md", cmd_cat)
    p.add_argument("container", metavar="CART")
    p.add_argument("path", metavar="PATH")
    _policy_options(p)
    _trust_options(p)

    p = _sub(subs, "extract", "write verified files into a new directory (all or nothing)",
             "acxfs extract research.acx ./out --skill expertise-designer", cmd_extract)
    p.add_argument("container", metavar="CART")
    p.add_argument("dest", type=Path, metavar="DEST")
    p.add_argument("--skill", metavar="NAME", help="extract only rom/skills/NAME as DEST")
    _policy_options(p)
    _trust_options(p)

    p = _sub(subs, "trust", "manage the trust store (pinned keys)",
             "acxfs trust add research.acx", cmd_trust_help)
    trust_subs = p.add_subparsers(dest="trust_command", metavar="ACTION")
    q = _sub(trust_subs, "add", "pin the signer key of a container, or a public key file",
             "acxfs trust add research.acx\n  acxfs trust add key.pub.pem --publisher com.example",
             cmd_trust_add)
    q.add_argument("source", metavar="CART|PKG|PUB.pem")
    q.add_argument("--publisher", metavar="ID",
                   help="publisher the key is trusted for (default: a container's signed "
                   "publisher; for a key file, any publisher, which is refused when the key is "
                   "already pinned for one)")
    _sub(trust_subs, "list", "list pinned keys", "acxfs trust list", cmd_trust_list)
    q = _sub(trust_subs, "remove", "remove a pinned key", "acxfs trust remove ed25519:ab12...",
             cmd_trust_remove)
    q.add_argument("keyid", metavar="KEYID")

    from acxfs import daemon_cli

    daemon_cli.add_commands(subs, _sub, _trust_options, _policy_options)
    return parser


# --- verify / inspect ---------------------------------------------------------------------


def _verdict_facts(verdict: v.Verdict) -> list[str]:
    lines = []
    if verdict.keyid:
        lines.append(f"keyid: {verdict.keyid}")
    if verdict.publisher:
        lines.append(f"publisher: {verdict.publisher}")
    if verdict.signed_at:
        lines.append(f"signedAt: {verdict.signed_at}")
    return [v.printable(line) for line in lines]


def verdict_json(verdict: v.Verdict) -> dict[str, object]:
    return {
        "status": verdict.status, "trust": verdict.trust, "summary": verdict.summary,
        "line": verdict.line, "exitCode": verdict.exit_code, "keyid": verdict.keyid,
        "publisher": verdict.publisher, "signedAt": verdict.signed_at,
        "unverifiedSignature": verdict.unverified,
    }


def cmd_verify(args: argparse.Namespace) -> int:
    from acxfs.loader import check

    report = check(args.container, _trust(args), deep=args.deep)
    verdict = report.verdict
    if args.json:  # json.dumps escapes every control character itself
        doc = verdict_json(verdict) | {"container": args.container, "format": report.format,
                                       "deep": args.deep, "warnings": report.warnings}
        print(json.dumps(doc, indent=2))
        return verdict.exit_code
    print(verdict.line)
    for line in _verdict_facts(verdict):
        print(line)
    for warning in report.warnings:
        print(v.printable(f"warning: {warning}"))
    return verdict.exit_code


def cmd_inspect(args: argparse.Namespace) -> int:
    from acxfs.inspect import describe
    from acxfs.loader import check

    report = check(args.container, _trust(args))
    doc = describe(report)
    if args.json:
        print(json.dumps(doc, indent=2))  # ASCII: no control character reaches a terminal
    else:
        _print_inspect(report, doc, sys.stdout)
    return report.verdict.exit_code if report.verdict.is_integrity_failure else 0


def _print_inspect(report: Report, doc: dict[str, object], out: TextIO) -> None:
    from acxfs.inspect import render

    out.write(render(report, doc))


# --- keys and packing ---------------------------------------------------------------------


@contextlib.contextmanager
def _signals_stop_like_ctrl_c() -> Iterator[None]:
    """SIGTERM and SIGHUP end a command that writes files the way Ctrl-C does, so its clean-up
    runs (the default action would leave its temporary file or directory behind)."""

    signals = [sig for sig in (signal.SIGTERM, signal.SIGHUP)
               if signal.getsignal(sig) is not signal.SIG_IGN]  # nohup's choice stands

    def stop(signum: int, frame: object) -> None:
        for sig in signals:  # once: a second signal must not cut the clean-up short
            signal.signal(sig, signal.SIG_IGN)
        raise KeyboardInterrupt

    previous = {sig: signal.signal(sig, stop) for sig in signals}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def cmd_keygen(args: argparse.Namespace) -> int:
    from acxfs.pack import keygen

    private_path, public_path, key = keygen(args.path, force=args.force)
    print(f"private key: {private_path} (mode 0600)")
    print(f"public key:  {public_path}")
    print(f"keyid: {key.public.keyid}")
    if args.path is None:
        print("this is the local key: cartridges it signs verify as 'verified / local'")
    return 0


def cmd_pack(args: argparse.Namespace) -> int:
    from acxfs.pack import load_signing_key, pack

    key = load_signing_key(args.key)
    with _signals_stop_like_ctrl_c():
        rom_hash = pack(
            args.skill_dirs, args.output, args.publisher, key, artifact_id=args.artifact_id,
            version=args.artifact_version, deflate=args.deflate, sqlar_dirs=args.sqlar_dirs,
            cartridge_uuid=args.uuid,
        )
    print(f"wrote {args.output}")
    print(f"manifest: {rom_hash}")
    print(f"keyid: {key.public.keyid}")
    return 0


# --- reads without FUSE -------------------------------------------------------------------


def _open(args: argparse.Namespace, with_save: bool = False):  # type: ignore[no-untyped-def]
    from acxfs.loader import open_source

    source, verdict = open_source(args.container, _trust(args), args.min_trust, with_save)
    if verdict.status != "verified":
        print(f"acxfs: warning: {verdict.line}", file=sys.stderr)
    return source


def _resolve(source, path: str) -> str:  # type: ignore[no-untyped-def]
    path = path.strip("/")
    if source.tree.lookup(path) is None and path and not path.startswith(("rom", "skills")):
        prefix = "rom/" if source.tree.lookup("rom") else ""
        if source.tree.lookup(prefix + path) is not None:
            return prefix + path
    if source.tree.lookup(path) is None:
        raise EnvironmentProblem(f"{path or '/'}: no such file or directory in the container")
    return path


def _entry_at(source, path: str):  # type: ignore[no-untyped-def]
    """The container path the user meant and its verified entry."""
    resolved = _resolve(source, path)
    entry = source.tree.lookup(resolved)
    assert entry is not None  # _resolve raised otherwise
    return resolved, entry


def cmd_ls(args: argparse.Namespace) -> int:
    source = _open(args)
    try:
        path, entry = _entry_at(source, args.path)
        names = [path] if not entry.is_dir else [
            f"{path}/{n}" if path else n for n in source.tree.list(path)
        ]
        for name in names:
            item = source.tree.lookup(name)
            assert item is not None
            shown = v.printable(name) + ("/" if item.is_dir else "")
            if args.long:
                digest = item.digest.hex() if item.digest else "-"
                print(f"{_mode_text(item.mode)} {item.size:>10} {digest:64} {shown}")
            else:
                print(shown)
    finally:
        source.close()
    return 0


def _mode_text(mode: int) -> str:
    import stat

    return stat.filemode(mode)


def cmd_cat(args: argparse.Namespace) -> int:
    source = _open(args)
    try:
        path, entry = _entry_at(source, args.path)
        if entry.is_dir:
            raise EnvironmentProblem(f"{path or '/'}: is a directory")
        from acxfs.content import ContentStore

        blob = ContentStore(source.raw_chunks).get(entry)
        out = sys.stdout.buffer
        step = 1024 * 1024
        for offset in range(0, blob.size, step):
            out.write(blob.read(offset, step))
        out.flush()
        blob.close()
    finally:
        source.close()
    return 0


def cmd_extract(args: argparse.Namespace) -> int:
    dest: Path = args.dest
    if dest.exists() or dest.is_symlink():
        raise EnvironmentProblem(f"{dest} exists; extract writes a new directory")
    source = _open(args)
    with _signals_stop_like_ctrl_c():
        count = _extract(args, source, dest)
    print(f"extracted {count} verified file{'' if count == 1 else 's'} to {dest}")
    return 0


def _extract(args: argparse.Namespace, source: Source, dest: Path) -> int:
    """Write the verified files of `source` (or of one skill) as the new directory `dest`:
    into a staging directory beside it, renamed into place only once complete."""
    from acxfs.made_dirs import current_umask, make_dirs, remove_made, rename_new

    mask = current_umask()  # the modes below honour it like any new file's
    try:
        root = ""
        if args.skill:
            root = f"{source.skills_root}/{args.skill}"
            skills = source.tree.skills(source.skills_root)
            if args.skill not in skills:
                raise EnvironmentProblem(f"no skill {args.skill!r} in {args.container} "
                                         f"(skills: {', '.join(skills) or 'none'})")
        made = make_dirs(dest.parent)
        try:
            # Not named after dest: a name near the 255-byte limit would leave no room.
            staging = Path(tempfile.mkdtemp(prefix=".acxfs-extract-", dir=dest.parent))
        except BaseException:
            remove_made(made)
            raise
        try:
            from acxfs.content import ContentStore

            store = ContentStore(source.raw_chunks)
            count = 0
            for entry in source.tree.files(root):
                rel = entry.path[len(root) + 1:] if root else entry.path
                target = staging / rel
                target.parent.mkdir(parents=True, exist_ok=True)
                blob = store.get(entry)
                with open(target, "wb") as handle:
                    for offset in range(0, blob.size, 1024 * 1024):
                        handle.write(blob.read(offset, 1024 * 1024))
                blob.close()
                os.chmod(target, (0o755 if entry.executable else 0o644) & ~mask)
                count += 1
            os.chmod(staging, 0o755 & ~mask)  # mkdtemp made it 0700
            rename_new(staging, dest)  # never over a directory made there meanwhile
        except BaseException:
            shutil.rmtree(staging, ignore_errors=True)
            remove_made(made)
            raise
    finally:
        source.close()
    return count


# --- trust store --------------------------------------------------------------------------


def cmd_trust_help(args: argparse.Namespace) -> int:
    raise EnvironmentProblem("trust needs an action: add, list or remove")


def cmd_trust_add(args: argparse.Namespace) -> int:
    from acxfs.trust_add import pin_from

    keyid, publisher, path, replaced = pin_from(args.source, args.publisher)
    print(f"pinned {keyid}")
    print(f"publisher: {publisher or 'any'}")
    if replaced is not None:
        print(f"replaces its pin for publisher {replaced}")
    print(f"stored in {path}")
    return 0


def cmd_trust_list(args: argparse.Namespace) -> int:
    from acxfs.trust import list_pins, load_trust, trust_dir

    ctx = load_trust()
    for pin in list_pins():
        print(f"{pin.keyid}  pinned  publisher={pin.publisher or 'any'}")
    for record in ctx.registry:
        print(f"{record.keyid}  registry  publisher={record.publisher} status={record.status} "
              f"({record.source})")
    for keyid in ctx.local:
        print(f"{keyid}  local")
    print(f"trust store: {trust_dir()}")
    return 0


def cmd_trust_remove(args: argparse.Namespace) -> int:
    from acxfs.trust import remove_pin

    if not remove_pin(args.keyid):
        raise EnvironmentProblem(f"no pinned key {args.keyid}")
    print(f"removed {args.keyid}")
    return 0


# --- entry points -------------------------------------------------------------------------


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:
        return int(exc.code or 0) if isinstance(exc.code, int) else 2
    try:
        return int(args.handler(args))
    except UntrustedError as exc:
        verdict = exc.verdict
        print(verdict.line, file=sys.stderr)
        from acxfs.daemon_cli import advice

        for line in advice(verdict, getattr(args, "container", ""),
                           getattr(args, "mounting", False)):
            print(v.printable(line), file=sys.stderr)
        return verdict.exit_code
    except TamperError as exc:
        print(v.printable(f"acxfs: error: {exc} (tampered: the bytes differ from what was "
                          "signed)"), file=sys.stderr)
        return 5
    except EnvironmentProblem as exc:
        print(v.printable(f"acxfs: error: {exc}"), file=sys.stderr)
        return 2
    except (InputError, AcxfsError) as exc:
        print(v.printable(f"acxfs: error: {exc}"), file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("acxfs: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        return 0
    except OSError as exc:  # the system refused a file or the output: say which, no traceback
        print(v.printable(f"acxfs: error: {describe_os_error(exc)}"), file=sys.stderr)
        return 2


def describe_os_error(exc: OSError) -> str:
    """One line for an OSError: the path it concerns (if any) and the system's reason."""
    reason = exc.strerror or str(exc)
    if exc.filename is None:
        return f"cannot write the output ({reason})" if exc.errno in (
            errno.ENOSPC, errno.EBADF, errno.EDQUOT) else reason
    return f"{os.fsdecode(exc.filename)}: {reason}"


class _ClosedOutput(io.RawIOBase):
    """Stands in for a standard output the caller closed: writing to it fails like a write
    to a closed descriptor, so the command reports it instead of crashing on None."""

    def writable(self) -> bool:
        return True

    def write(self, data: object) -> int:
        raise OSError(errno.EBADF, "standard output is closed")


def main_entry() -> None:
    if sys.stdout is None:
        sys.stdout = io.TextIOWrapper(io.BufferedWriter(_ClosedOutput()), encoding="utf-8")
    code = main()
    # Exit without freeing a large verified tree object by object: the OS reclaims it at once.
    for stream in (sys.stdout, sys.stderr):  # None when the descriptor was closed (>&-)
        try:
            if stream is not None:
                stream.flush()
        except BrokenPipeError:
            pass
        except (OSError, ValueError) as exc:
            if stream is sys.stdout and code == 0 and sys.stderr is not None:
                reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else exc
                with contextlib.suppress(OSError, ValueError):
                    print(f"acxfs: error: cannot write the output ({reason})", file=sys.stderr,
                          flush=True)
            code = code or 2
    os._exit(code)
