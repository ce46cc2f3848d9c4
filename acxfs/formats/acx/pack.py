"""The writer: key pairs, and signed ACX 0.1 cartridges made from Agent Skill directories.

`pack` refuses anything acxfs's reader would refuse (non-portable names, invalid skills,
identical files the ACX 0.1 object table cannot hold twice) before writing a byte.

Invariant: nothing is read or written through a link an input or output path does not name
itself.  Each file of a skill is opened `O_NOFOLLOW` relative to its open parent directory
and decided on by `fstat` of that same descriptor (a link, a device or a FIFO is refused,
never followed); the bytes signed are the bytes read from it.  The cartridge is built in
memory and written, like the key pair, through `acxfs.safe.files`: under a fresh name in the
open output directory, mode set with `fchmod` (0644 less the umask; a private key 0600), then
renamed into place; only a cartridge, a key being replaced with `--force`, or a link at the
name is replaced (the link itself, never its target).  A signal stops a pack only at a
`checkpoint()` (`acxfs.safe.interrupts`): between files read or compressed, and once before the
rename.
"""

from __future__ import annotations

import datetime as dt
import errno
import hashlib
import json
import os
import sqlite3
import stat
import uuid as uuidlib
import zlib
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from acxfs.container import SEGMENT_RE
from acxfs.errors import AcxfsError, EnvironmentProblem, KeyFormatError, PackError, SkillError
from acxfs.formats.acx.check import manifest_hash
from acxfs.formats.acx.rows import ObjectRow, check_path
from acxfs.formats.acx.schema import APPLICATION_ID, SQLITE_MAGIC, USER_VERSION, create_schema
from acxfs.paths import trust_dir
from acxfs.safe import dirs as safe_dirs
from acxfs.safe import files as safe_files
from acxfs.safe.inputs import open_input
from acxfs.safe.interrupts import checkpoint
from acxfs.signing.dsse import IN_TOTO_PAYLOAD_TYPE, sign_envelope
from acxfs.signing.jcs import canonical_bytes
from acxfs.signing.keys import PrivateKey, private_key_from_pem
from acxfs.skills import IndexRow, index_row, is_resource
from acxfs.trust.policy import valid_publisher
from acxfs.trust.store import LOCAL_PRIVATE, LOCAL_PUBLIC

Deflate = Literal["zlib", "raw", "none"]
EMBEDDING_ENGINE = '{"id":"none","dim":0}'



# --- keys --------------------------------------------------------------------------------


def public_path_for(private_path: Path) -> Path:
    name = private_path.name
    stem = name[:-4] if name.endswith(".pem") else name
    return private_path.with_name(stem + ".pub.pem")


def keygen(path: Path | None = None, force: bool = False) -> tuple[Path, Path, PrivateKey]:
    """Write a new Ed25519 key pair (private PKCS#8 PEM 0600, public SPKI PEM), all or nothing.

    Both files are written under fresh names in the open key directory and renamed into
    place, so a link planted at either name is replaced, never written through, and a failure
    leaves the old pair (if any) as it was."""
    if path is None:
        private_path, public_path = trust_dir() / LOCAL_PRIVATE, trust_dir() / LOCAL_PUBLIC
    else:
        private_path, public_path = path, public_path_for(path)
    if not force:
        for existing in (private_path, public_path):
            if os.path.lexists(existing):  # a link, even a dangling one, is something to lose
                raise EnvironmentProblem(f"{existing} exists; pass --force to replace it")
    for target in (private_path, public_path):
        if target.is_dir() and not target.is_symlink():
            raise EnvironmentProblem(f"{target}: is a directory")
    key = PrivateKey.generate()
    public_mode = 0o644 & ~safe_dirs.current_umask()
    try:
        made = safe_dirs.make_dirs(private_path.parent, 0o700, allow_user_symlink=True)
    except OSError as exc:
        raise EnvironmentProblem(f"cannot write {private_path} ({exc.strerror})") from exc
    with made:
        dirfd = made.fd
        try:
            with safe_files.open_new_at(dirfd, public_path.name, public_mode) as public, \
                    safe_files.open_new_at(dirfd, private_path.name, 0o600) as private:
                public.write(key.public.pem.encode("ascii"))
                private.write(key.pem.encode("ascii"))
                # The public key first: a pair is replaced whole or not at all, unless the
                # second rename fails.
                for temp, target in ((public, public_path), (private, private_path)):
                    try:
                        temp.commit(replace=force)
                    except FileExistsError as exc:
                        raise EnvironmentProblem(f"{target} exists; pass --force to replace "
                                                 "it") from exc
                    except OSError as exc:
                        raise EnvironmentProblem(f"cannot write {target} ({exc.strerror})") \
                            from exc
        except BaseException:
            made.remove_made()
            raise
    return private_path, public_path, key


def load_signing_key(path: Path | None) -> PrivateKey:
    """The key from `path`, or the default key pair's private key."""
    key_path = path if path is not None else trust_dir() / LOCAL_PRIVATE
    try:
        with open_input(key_path) as handle:
            text = handle.read(64 * 1024).decode("ascii")
    except FileNotFoundError as exc:
        if path is None:
            raise EnvironmentProblem(
                "no signing key: run 'acxfs keygen' or pass --key KEY.pem"
            ) from exc
        raise EnvironmentProblem(f"{key_path}: no such key file") from exc
    except OSError as exc:
        raise EnvironmentProblem(f"cannot read key file {key_path} ({exc.strerror})") from exc
    except UnicodeDecodeError as exc:
        raise EnvironmentProblem(f"key file {key_path} is not a PEM text file") from exc
    try:
        return private_key_from_pem(text)
    except KeyFormatError as exc:
        raise EnvironmentProblem(f"{key_path}: {exc}") from exc


# --- collecting files ---------------------------------------------------------------------


@dataclass(frozen=True)
class SourceFile:
    name: str  # sqlar path, rom/...
    data: bytes
    executable: bool


_READ = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC


def _not_regular(full: Path) -> PackError:
    return PackError(f"{full}: not a regular file (links and devices cannot be packed)")


def _unreadable(full: Path, exc: OSError) -> EnvironmentProblem:
    # A directory left out would be signed as absent: refuse the whole pack.
    return EnvironmentProblem(f"cannot list {full} ({exc.strerror}); nothing packed")


def _read_all(fd: int) -> bytes:
    chunks = []
    while chunk := os.read(fd, 1 << 20):
        checkpoint()
        chunks.append(chunk)
    return b"".join(chunks)


def collect_skill(skill_dir: Path) -> list[SourceFile]:
    """Every regular file of one skill directory, as rom/skills/<dir>/... rows.  The
    directory named is opened as given; everything below it is opened without following a
    link and decided on by `fstat` of the opened descriptor."""
    try:
        top = os.open(skill_dir, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except (FileNotFoundError, NotADirectoryError) as exc:
        raise EnvironmentProblem(f"{skill_dir}: not a directory") from exc
    except OSError as exc:
        raise _unreadable(skill_dir, exc) from exc
    try:
        dirname = os.path.basename(os.readlink(f"/proc/self/fd/{top}")) or skill_dir.name
        try:
            first = os.stat("SKILL.md", dir_fd=top, follow_symlinks=False)
        except OSError:
            first = None
        if first is None or stat.S_ISDIR(first.st_mode):
            raise PackError(f"{skill_dir}: no SKILL.md")
        files: list[SourceFile] = []
        _collect_dir(top, skill_dir, "", f"rom/skills/{dirname}", files)
        return files
    finally:
        os.close(top)


def _collect_dir(dirfd: int, shown: Path, rel: str, base: str, files: list[SourceFile]) -> None:
    """The files below the open directory `dirfd` (in os.walk's order: a directory's files
    by name, then its subdirectories by name), appended to `files`."""
    try:
        with os.scandir(dirfd) as listing:
            entries = sorted((entry.name, entry.is_dir(follow_symlinks=False))
                             for entry in listing)
    except OSError as exc:
        raise _unreadable(shown, exc) from exc
    ordered = [entry for entry in entries if not entry[1]] + [e for e in entries if e[1]]
    for name, listed_as_dir in ordered:
        checkpoint()  # a stop asked for (`acxfs.safe.interrupts`) is honoured between files
        full = shown / name
        rel_name = f"{rel}/{name}" if rel else name
        try:
            fd = os.open(name, _READ, dir_fd=dirfd)
        except OSError as exc:
            if exc.errno == errno.ELOOP:  # O_NOFOLLOW met a link
                raise _not_regular(full) from exc
            if listed_as_dir:
                raise _unreadable(full, exc) from exc
            raise EnvironmentProblem(f"cannot read {full} ({exc.strerror}); nothing "
                                     "packed") from exc
        try:
            info = os.fstat(fd)  # the file opened is the file decided on and read
            if stat.S_ISDIR(info.st_mode):
                if f"{base}/{rel_name}".count("/") >= 64:  # no file below can be packed
                    raise PackError(f"{full}: path deeper than 64 segments")
                _collect_dir(fd, full, rel_name, base, files)
                continue
            if not stat.S_ISREG(info.st_mode):
                raise _not_regular(full)
            sqlar_name = f"{base}/{rel_name}"
            for segment in sqlar_name.split("/"):
                if not SEGMENT_RE.fullmatch(segment):
                    raise PackError(f"{full}: name {segment!r} is not portable "
                                    "(letters, digits, '.', '_', '-'; no leading dot)")
            try:  # the bounds every reader applies (depth, length): never write what they refuse
                check_path(sqlar_name)
            except AcxfsError as exc:
                raise PackError(f"{full}: {exc}") from exc
            try:
                data = _read_all(fd)
            except OSError as exc:
                raise EnvironmentProblem(f"cannot read {full} ({exc.strerror}); nothing "
                                         "packed") from exc
            files.append(SourceFile(sqlar_name, data, bool(info.st_mode & 0o111)))
        finally:
            os.close(fd)


def _compress(data: bytes, how: Deflate) -> bytes:
    checkpoint()  # one file at a time: a stop waits for no more than one file's compression
    if how == "none" or not data:
        return data
    if how == "zlib":
        packed = zlib.compress(data, 6)
    else:
        packer = zlib.compressobj(6, zlib.DEFLATED, -15)
        packed = packer.compress(data) + packer.flush()
    return packed if len(packed) < len(data) else data


def _iso(moment: dt.datetime) -> str:
    return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{moment.microsecond // 1000:03d}Z"


def _now() -> dt.datetime:
    epoch = os.environ.get("SOURCE_DATE_EPOCH")
    if epoch:
        try:
            return dt.datetime.fromtimestamp(int(epoch), dt.UTC)
        except ValueError as exc:
            raise EnvironmentProblem("SOURCE_DATE_EPOCH is not an integer") from exc
    return dt.datetime.now(dt.UTC)


def _oid(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


# --- the cartridge ------------------------------------------------------------------------


def _is_cartridge(fd: int) -> bool:
    """The SQLite header with the ACX application_id (big-endian at offset 68)."""
    head = os.pread(fd, 100, 0)
    return head.startswith(SQLITE_MAGIC) and head[68:72] == APPLICATION_ID.to_bytes(4, "big")


def check_output(output: Path, skill_dirs: Sequence[Path]) -> None:
    """Refuse an output that would land in a skill being packed or replace a file that is not
    a cartridge (a signing key, a note, anything else the user did not mean to lose).  A link
    at the output is replaced by the cartridge, never written through."""
    target = Path(os.path.realpath(output))  # never raises on a symlink loop
    for skill_dir in skill_dirs:
        if target.is_relative_to(skill_dir.resolve()):
            raise PackError(f"{output} is inside the skill directory {skill_dir}; write the "
                            "cartridge elsewhere")
    try:
        info = os.lstat(output)
    except OSError:
        return  # nothing there, or a parent acxfs cannot reach: said where it is written
    if stat.S_ISREG(info.st_mode):  # decided again, on the open directory, when written
        absolute = os.path.abspath(output)
        dirfd = os.open(os.path.dirname(absolute), os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC)
        try:
            _existing_output(dirfd, os.path.basename(absolute), output)
        finally:
            os.close(dirfd)


def _existing_output(dirfd: int, name: str, shown: Path) -> bool:
    """Whether something at `name` in `dirfd` is to be replaced (a cartridge, or a link: the
    link itself); nothing there is False; anything else is refused."""
    try:
        info = os.stat(name, dir_fd=dirfd, follow_symlinks=False)
    except FileNotFoundError:
        return False
    if stat.S_ISLNK(info.st_mode):
        return True
    if stat.S_ISDIR(info.st_mode):
        raise EnvironmentProblem(f"{shown}: is a directory")
    try:
        fd = os.open(name, _READ, dir_fd=dirfd)
    except OSError as exc:
        raise EnvironmentProblem(f"{shown}: {exc.strerror}; refusing to replace it") from exc
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode) or not _is_cartridge(fd):
            raise EnvironmentProblem(f"{shown} exists and is not a cartridge; refusing to "
                                     "replace it")
    finally:
        os.close(fd)
    return True


def pack(
    skill_dirs: Sequence[Path],
    output: Path,
    publisher: str,
    key: PrivateKey,
    artifact_id: str | None = None,
    version: str = "1.0.0",
    deflate: Deflate = "zlib",
    sqlar_dirs: bool = False,
    cartridge_uuid: str | None = None,
) -> str:
    """Write a signed cartridge holding `skill_dirs`; returns its ROM manifest hash."""
    if not valid_publisher(publisher):
        raise PackError(f"publisher {publisher!r} is not a reverse-DNS name like io.github.owner")
    if not skill_dirs:
        raise PackError("no skill directory given")
    check_output(output, skill_dirs)
    files: list[SourceFile] = []
    for skill_dir in skill_dirs:
        files.extend(collect_skill(skill_dir))
    names = [f.name for f in files]
    if len(set(names)) != len(names):
        raise PackError("two skill directories have the same name")
    by_oid: dict[str, str] = {}
    for f in files:
        other = by_oid.setdefault(_oid(f.data), f.name)
        if other != f.name:
            raise PackError(
                f"{other} and {f.name} have identical bytes; ACX 0.1 keys objects by content "
                "hash, so both cannot be signed (make one of them differ)"
            )
    skills = sorted({f.name.split("/")[2] for f in files})
    index = []
    for skill in skills:
        base = f"rom/skills/{skill}"
        body = next(f.data for f in files if f.name == f"{base}/SKILL.md")
        resources = {
            f.name.removeprefix(base + "/"): f.data for f in files if is_resource(base, f.name)
        }
        try:
            index.append(index_row(f"{base}/SKILL.md", body, resources))
        except SkillError as exc:
            raise PackError(f"{base}/SKILL.md: {exc}") from exc
    artifact = artifact_id or skills[0]
    if not SEGMENT_RE.fullmatch(artifact):
        raise PackError(f"id {artifact!r} is not a portable name")
    moment = _now()
    signed_at = _iso(moment)
    cart_uuid = cartridge_uuid or str(uuidlib.uuid4())
    cartridge_id = f"{publisher}/{artifact}@{cart_uuid}"
    meta = {
        "acx.spec_version": "0.1",
        "acx.cartridge_id": cartridge_id,
        "acx.artifact_id": artifact,
        "acx.artifact_version": version,
        "acx.agent_name": artifact,
        "acx.publisher_id": publisher,
        "acx.authors": json.dumps([{"name": publisher}], separators=(",", ":")),
        "acx.created_at": signed_at,
        "acx.description": "; ".join(row.description for row in index)[:1024],
        "acx.embedding_engine": EMBEDDING_ENGINE,
        "acx.tags": json.dumps(skills, separators=(",", ":")),
        "acx.vec0_format": "1",
    }
    objects = [ObjectRow(_oid(f.data), "sqlar", f.name, "raw", "rom", len(f.data)) for f in files]
    for meta_key, value in meta.items():
        covered = canonical_bytes({"key": meta_key, "value": value})
        objects.append(ObjectRow(_oid(covered), "cartridge", f"cartridge:{meta_key}",
                                 "jcs-rfc8785", "rom", len(value.encode("utf-8"))))
    for obj in objects[len(files):]:  # nor may a file repeat a cartridge fact's signed bytes
        if obj.oid in by_oid:
            raise PackError(f"{by_oid[obj.oid]} has the same bytes as the signed form of "
                            f"{obj.source_ref}; ACX 0.1 keys objects by content hash (make the "
                            "file differ)")
    rom_hash = manifest_hash(objects)
    checksum_lines = "\n".join(sorted(f"{o.oid}  {o.source_ref}" for o in objects))
    statement = {
        "_type": "https://in-toto.io/Statement/v1",
        "subject": [{"name": cartridge_id, "digest": {"sha256": rom_hash.removeprefix("sha256:")}}],
        "predicateType": "https://acx.dev/attestation/cartridge/v1",
        "predicate": {
            "acxSchemaVersion": "0.1",
            "publisherId": publisher,
            "romDigest": rom_hash,
            "manifestHash": rom_hash,
            "checksumHash": "sha256:" + hashlib.sha256(checksum_lines.encode()).hexdigest(),
            "fileCount": len(objects),
            "embeddingEngine": json.loads(EMBEDDING_ENGINE),
            "signedAt": signed_at,
            "provenanceInstanceId": "acxfs",
        },
    }
    envelope = sign_envelope(IN_TOTO_PAYLOAD_TYPE, canonical_bytes(statement), key)
    meta["acx.rom_manifest_hash"] = rom_hash  # the one key no object can bind (spec section 2)
    _write(output, files, objects, meta, index, envelope, rom_hash, key, signed_at,
           int(moment.timestamp()), deflate, sqlar_dirs)
    return rom_hash


def _write(
    output: Path, files: list[SourceFile], objects: list[ObjectRow], meta: dict[str, str],
    index: list[IndexRow], envelope: str, rom_hash: str, key: PrivateKey, signed_at: str,
    mtime: int, deflate: Deflate, sqlar_dirs: bool,
) -> None:
    shown = Path(os.path.abspath(output))
    mode = 0o644 & ~safe_dirs.current_umask()
    try:
        made = safe_dirs.make_dirs(shown.parent, allow_user_symlink=True)
    except OSError as exc:
        raise EnvironmentProblem(f"cannot write {shown} ({exc.strerror})") from exc
    with made:
        try:
            replace = _existing_output(made.fd, shown.name, shown)
            with safe_files.open_new_at(made.fd, shown.name, mode) as temp:
                temp.write(_database(files, objects, meta, index, envelope, rom_hash, key,
                                     signed_at, mtime, deflate, sqlar_dirs))
                checkpoint()  # the last point to stop at: after it, the cartridge is in place
                temp.commit(replace=replace)
        except BaseException as exc:
            made.remove_made()
            if isinstance(exc, OSError):  # e.g. the disk is full
                raise EnvironmentProblem(f"cannot write {shown} ({exc.strerror})") from exc
            raise


def _database(
    files: list[SourceFile], objects: list[ObjectRow], meta: dict[str, str],
    index: list[IndexRow], envelope: str, rom_hash: str, key: PrivateKey, signed_at: str,
    mtime: int, deflate: Deflate, sqlar_dirs: bool,
) -> bytes:
    """The cartridge's bytes, built in memory: no path SQLite could be sent through."""
    conn = sqlite3.connect(":memory:", isolation_level=None)
    try:
        conn.execute(f"PRAGMA application_id={APPLICATION_ID}")
        conn.execute(f"PRAGMA user_version={USER_VERSION}")
        conn.execute("BEGIN")
        create_schema(conn)
        if sqlar_dirs:
            dirs = sorted({f.name.rsplit("/", i)[0] for f in files
                           for i in range(1, f.name.count("/") + 1)})
            conn.executemany(
                "INSERT INTO sqlar VALUES (?, ?, ?, 0, NULL)",
                [(d, stat.S_IFDIR | 0o755, mtime) for d in dirs],
            )
        type_bits = stat.S_IFREG if sqlar_dirs else 0
        conn.executemany(
            "INSERT INTO sqlar VALUES (?, ?, ?, ?, ?)",
            (
                (f.name, type_bits | (0o755 if f.executable else 0o644),
                 mtime if sqlar_dirs else 0, len(f.data), _compress(f.data, deflate))
                for f in files
            ),
        )
        conn.executemany(
            "INSERT INTO objects VALUES (?, ?, ?, ?, ?, ?)",
            [(o.oid, o.kind, o.source_ref, o.canon, o.zone, o.sz) for o in objects],
        )
        conn.executemany("INSERT INTO cartridge VALUES (?, ?)", sorted(meta.items()))
        conn.executemany(
            "INSERT INTO acx_skill VALUES (?,?,?,?,?,?,?,?,?,?,?)",
            [(r.sqlar_path, r.name, r.description, r.license, r.compatibility,
              r.skill_version, r.body_tokens, r.content_sha256, r.resources, r.ext,
              r.schema_version) for r in index],
        )
        conn.execute(
            "INSERT INTO signatures VALUES (?, 'rom-manifest', ?, ?, ?, ?, 'ed25519', ?)",
            ("sig-rom-" + rom_hash[7:19], rom_hash, envelope, key.public.keyid,
             key.public.pem, signed_at),
        )
        conn.execute("COMMIT")
        return conn.serialize()
    finally:
        conn.close()
