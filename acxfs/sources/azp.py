"""The azphalt package source (.azp): a ZIP checked from its central directory and manifest.

Invariant: a tree entry exists only for a listed, digest-bearing, safe path of a package whose
checks passed.  `check_report` reads the central directory, every local file header (never
the data behind it), `manifest.json` and `signature.json`; nothing else is inflated unless
`deep` asks for it.  A package is accepted only when every entry path is safe and unique, the
entries are exactly `manifest.files` plus the two reserved names, the signature (if any)
covers the exact stored manifest bytes, the `kind: "skill"` rules hold and `compat` accepts
azphalt API 0.1.  `AzpSource` then hands each entry's raw stored bytes, read with `os.pread`
from the descriptor the check used, to `acxfs.content`, which inflates them within the
central-directory size and releases them only when their sha256 is the manifest digest.
"""

from __future__ import annotations

import calendar
import datetime as dt
import functools
import json
import os
import re
import struct
import zipfile
import zlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import BinaryIO

from acxfs import strict_json
from acxfs import verdict as v
from acxfs.content import verify_content
from acxfs.errors import EnvironmentProblem, TamperError, UntrustedError
from acxfs.inputs import open_input
from acxfs.keys import KeyFormatError, PublicKey, b64decode_any, public_key_from_spki_der
from acxfs.limits import DEFAULT_LIMITS, Limits
from acxfs.loader import Report
from acxfs.sources.base import Codec, Entry, Tree, build_tree
from acxfs.trust import TrustContext

API_VERSION = (0, 1, 0)
API_VERSION_TEXT = "0.1"
MANIFEST = "manifest.json"
SIGNATURE = "signature.json"
RESERVED = frozenset({MANIFEST, SIGNATURE})
SKILLS_ROOT = "skills"

UNSIGNED = "Unsigned package (no signature.json)."
SIGNATURE_FAILED = "Signature verification failed (signature.json does not sign manifest.json)."
NOT_TRUSTED = "Signature valid but no key of its signer chain is trusted here."
SKILL_ONLY = 'acxfs mounts only kind "skill" packages'

_DIGEST_RE = re.compile(r"sha256-([0-9a-f]{64})")
_COMPAT_RE = re.compile(r"\s*(>=|<=|>|<|=)?\s*([0-9]+)(?:\.([0-9]+))?(?:\.([0-9]+))?\s*")
_SAFE_ID_RE = re.compile(r"[^\s/\\\ufeff]+")
_LOCAL_HEADER = struct.Struct("<4sHHHHHLLLHH")
_LOCAL_MAGIC = b"PK\x03\x04"
_ENCRYPTED_FLAGS = 0x0001 | 0x0040 | 0x2000
_UTF8_FLAG = 0x0800
_CODECS: dict[int, Codec] = {zipfile.ZIP_STORED: "stored", zipfile.ZIP_DEFLATED: "deflate"}
_ZIP_ERRORS = (
    zipfile.BadZipFile, zipfile.LargeZipFile, ValueError, struct.error, EOFError,
    OverflowError, NotImplementedError, OSError,
)


class _Refused(Exception):
    """Internal: stop the check with this verdict (and further problems as warnings)."""

    def __init__(self, verdict: v.Verdict, more: tuple[str, ...] = ()) -> None:
        super().__init__(verdict.line)
        self.verdict = verdict
        self.more = more


def shown(text: str) -> str:
    """`text` safe to print: control characters and lone surrogates are escaped."""
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)


def _json_safe(text: str) -> str:
    """`text` that `json.dumps(ensure_ascii=False)` output can be printed with."""
    return "".join(repr(c)[1:-1] if "\ud800" <= c <= "\udfff" else c for c in text)


def _sentence(text: str) -> str:
    text = text[:1].upper() + text[1:]
    return text if text.endswith(".") else text + "."


def _malformed(text: str) -> _Refused:
    return _Refused(v.Verdict("malformed", _sentence(text)))


def _tampered(text: str, more: tuple[str, ...] = ()) -> _Refused:
    return _Refused(v.Verdict("tampered", _sentence(text)), more)


# --- the zip layer: central directory and local headers ---------------------------------


@dataclass(frozen=True, slots=True)
class Member:
    """One zip entry, from its central-directory record and its checked local header."""

    index: int  # position in ZipFile.infolist()
    name: str
    header_offset: int
    size: int  # uncompressed, as the central directory says
    stored_size: int
    codec: Codec
    crc: int
    data_offset: int
    mtime: int


def _path_problem(name: str, limits: Limits) -> str | None:
    """Why `name` is not a safe package path (None when it is)."""
    if "\x00" in name:
        return "contains a NUL byte"
    if "\\" in name:
        return "contains a backslash"
    if name.startswith("/"):
        return "is absolute"
    if len(name.encode("utf-8", "surrogatepass")) > limits.max_name_bytes:
        return "is too long"
    segments = name.split("/")
    if len(segments) > limits.max_depth:
        return "is too deep"
    for segment in segments:
        if segment in ("", ".", ".."):
            return f"has a {segment!r} segment" if segment else "has an empty segment"
        if len(segment) > limits.max_segment_chars:
            return "has a segment that is too long"
    return None


def _zip_mtime(date_time: tuple[int, int, int, int, int, int]) -> int:
    try:
        return int(calendar.timegm((*date_time, 0, 0, 0)))
    except (ValueError, OverflowError):
        return 0


_EOCD = struct.Struct("<4s4H2LH")  # end of central directory record
_ZIP64_LOCATOR = struct.Struct("<4sLQL")
_ZIP64_EOCD = struct.Struct("<4sQ2H2L4Q")


def _declared_entries(handle: BinaryIO) -> int | None:
    """How many entries the archive's end record says it holds (ZIP64 included), read from
    its last 64 KiB before anything parses the central directory; None if there is none (the
    parser then says what is wrong)."""
    end = os.fstat(handle.fileno()).st_size
    tail_start = max(0, end - (_EOCD.size + 0xFFFF))
    handle.seek(tail_start)
    tail = handle.read(end - tail_start)
    at = tail.rfind(b"PK\x05\x06")
    if at < 0 or at + _EOCD.size > len(tail):
        return None
    fields = _EOCD.unpack_from(tail, at)
    count = fields[4]  # entries in the whole central directory
    locator_at = at - _ZIP64_LOCATOR.size
    if count == 0xFFFF and locator_at >= 0 and tail[locator_at:locator_at + 4] == b"PK\x06\x07":
        record_offset = _ZIP64_LOCATOR.unpack_from(tail, locator_at)[2]
        if 0 <= record_offset <= end - _ZIP64_EOCD.size:
            handle.seek(record_offset)
            record = handle.read(_ZIP64_EOCD.size)
            if record[:4] == b"PK\x06\x06":
                count = _ZIP64_EOCD.unpack(record)[7]
    return int(count)


def _read_infolist(handle: BinaryIO, limits: Limits) -> tuple[list[zipfile.ZipInfo], int]:
    """The central directory's records and where it starts; malformed if unreadable.  An
    archive whose end record declares more entries than the limit is refused before its
    central directory is parsed (a million entries took 11 s and 586 MB to parse)."""
    declared = _declared_entries(handle)
    if declared is not None and declared > limits.max_entries:
        raise _malformed(f"{declared} zip entries exceed the limit of {limits.max_entries}")
    handle.seek(0)
    try:
        with zipfile.ZipFile(handle) as archive:
            infos = archive.infolist()
            start = getattr(archive, "start_dir", None)
    except _ZIP_ERRORS as exc:
        raise _malformed(f"not a readable zip archive ({exc})") from exc
    if len(infos) > limits.max_entries:
        raise _malformed(f"{len(infos)} zip entries exceed the limit of {limits.max_entries}")
    end = os.fstat(handle.fileno()).st_size
    return infos, start if isinstance(start, int) and 0 <= start <= end else end


def _check_record(info: zipfile.ZipInfo, limits: Limits) -> Codec:
    """Refuse encryption, other compression methods and sizes past the limits."""
    name = info.orig_filename
    if info.flag_bits & _ENCRYPTED_FLAGS:
        raise _malformed(f"zip entry {name!r} is encrypted")
    codec = _CODECS.get(info.compress_type)
    if codec is None:
        raise _malformed(f"zip entry {name!r} uses compression method {info.compress_type}")
    if info.file_size > limits.max_file_bytes:
        raise _malformed(f"zip entry {name!r} exceeds the per-file size limit")
    if codec == "stored" and info.compress_size != info.file_size:
        raise _malformed(f"stored zip entry {name!r} has differing sizes")
    return codec


def _data_offset(fd: int, info: zipfile.ZipInfo) -> int:
    """Parse the local file header; its name and method must match the central directory."""
    if not 0 <= info.header_offset <= os.fstat(fd).st_size - _LOCAL_HEADER.size:
        # ZIP64 fields (or a shifted central directory) can put an offset anywhere, even past
        # what pread accepts: it must point into the file.
        raise _malformed(f"zip entry {info.orig_filename!r} has no local header")
    head = os.pread(fd, _LOCAL_HEADER.size, info.header_offset)
    if len(head) != _LOCAL_HEADER.size:
        raise _malformed(f"zip entry {info.orig_filename!r} has no local header")
    magic, _, flags, method, *_, name_len, extra_len = _LOCAL_HEADER.unpack(head)
    raw_name = os.pread(fd, name_len, info.header_offset + _LOCAL_HEADER.size)
    encoding = "utf-8" if info.flag_bits & _UTF8_FLAG else "cp437"
    try:
        local_name = raw_name.decode(encoding)
    except UnicodeDecodeError:
        local_name = None
    if magic != _LOCAL_MAGIC or local_name != info.orig_filename or method != info.compress_type \
            or flags & _ENCRYPTED_FLAGS:
        raise _malformed(
            f"zip entry {info.orig_filename!r}: local header differs from the central directory")
    return int(info.header_offset + _LOCAL_HEADER.size + name_len + extra_len)


def _check_layout(members: list[Member], central_start: int) -> None:
    """Each entry's data must end before the next local header (or the central directory)."""
    ordered = sorted(members, key=lambda m: m.header_offset)
    ends = [m.header_offset for m in ordered[1:]] + [central_start]
    for member, limit in zip(ordered, ends[: len(ordered)], strict=True):
        end = member.data_offset + member.stored_size
        if end > limit:
            raise _malformed(f"zip entry {member.name!r} overlaps other data")


def read_members(handle: BinaryIO, limits: Limits) -> dict[str, Member]:
    """Every entry by name, after the zip-level and path checks (no payload is read)."""
    infos, central_start = _read_infolist(handle, limits)
    fd = handle.fileno()
    members: dict[str, Member] = {}
    for index, info in enumerate(infos):
        name = info.orig_filename
        problem = _path_problem(name, limits)
        if problem is not None:
            raise _tampered(f"unsafe path {name!r}: it {problem}")
        if name in members:
            raise _tampered(f"duplicate zip entry {name!r}")
        codec = _check_record(info, limits)
        try:
            offset = _data_offset(fd, info)
        except OSError as exc:
            raise _malformed(f"zip entry {name!r} cannot be read ({exc})") from exc
        members[name] = Member(
            index, name, info.header_offset, info.file_size, info.compress_size, codec,
            info.CRC, offset, _zip_mtime(info.date_time),
        )
    _check_layout(list(members.values()), central_start)
    return members


def raw_chunks(fd: int, offset: int, length: int, step: int) -> Iterator[bytes]:
    """`length` stored bytes from `offset`, in steps; stops early if the file got shorter."""
    while length > 0:
        chunk = os.pread(fd, min(step, length), offset)
        if not chunk:
            return
        offset += len(chunk)
        length -= len(chunk)
        yield chunk


def read_small(fd: int, member: Member, bound: int, limits: Limits) -> bytes:
    """Inflate one metadata entry (manifest or signature) within `bound` bytes, CRC checked."""
    if member.size > bound:
        raise _malformed(f"{member.name} is larger than {bound} bytes")
    out = bytearray()
    inflater = zlib.decompressobj(-15) if member.codec == "deflate" else None
    try:
        for chunk in raw_chunks(fd, member.data_offset, member.stored_size, limits.chunk_bytes):
            data = chunk
            while data and (inflater is None or not inflater.eof):
                if inflater is None:
                    piece, data = data, b""
                else:  # never more than one byte past the recorded size
                    piece = inflater.decompress(data, member.size + 1 - len(out))
                    data = inflater.unconsumed_tail
                out += piece
                if len(out) > member.size:
                    raise _malformed(f"{member.name} inflates past its recorded size")
    except zlib.error as exc:
        raise _malformed(f"{member.name} does not inflate ({exc})") from exc
    if len(out) != member.size or (inflater is not None and not inflater.eof):
        raise _malformed(f"{member.name} does not inflate to its recorded size")
    if zlib.crc32(out) != member.crc:
        raise _malformed(f"{member.name} fails its CRC-32")
    return bytes(out)


# --- JSON documents -------------------------------------------------------------------


def parse_json_object(data: bytes, name: str) -> dict[str, object]:
    """A UTF-8 JSON object without duplicate keys or NaN/Infinity; ValueError otherwise."""
    try:
        doc = strict_json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError) as exc:
        raise ValueError(f"{name} is not valid JSON ({exc})") from exc
    if not isinstance(doc, dict):
        raise ValueError(f"{name} is not a JSON object")
    return doc


# --- the signature and its countersignature chain -------------------------------------


@dataclass(frozen=True)
class Signer:
    """A signature that verified over the manifest bytes, and the chain that vouches for it."""

    key: PublicKey
    chain: tuple[PublicKey, ...]  # countersigners whose signatures verified, lowest first
    chain_problem: str | None  # why the walk stopped before the chain's end
    label: str | None  # signature.json keyId: a signer-chosen name, never used for trust


def _decode_signed_key(doc: dict[str, object]) -> tuple[PublicKey, bytes]:
    public, signature = doc.get("publicKey"), doc.get("signature")
    if not isinstance(public, str) or not isinstance(signature, str):
        raise KeyFormatError("publicKey and signature must be base64 strings")
    return public_key_from_spki_der(b64decode_any(public)), b64decode_any(signature)


def _walk_chain(
    first: object, signer: PublicKey, limits: Limits
) -> tuple[tuple[PublicKey, ...], str | None]:
    """Each countersignature signs the SPKI DER of the key below it; stop at the first break."""
    chain: list[PublicKey] = []
    below, link, hop = signer, first, 0
    while link is not None:
        hop += 1
        if hop > limits.max_countersign_hops:
            limit = limits.max_countersign_hops
            return tuple(chain), f"countersignature chain exceeds {limit} hops"
        if not isinstance(link, dict):
            return tuple(chain), f"countersignature at hop {hop} is malformed"
        try:
            key, signature = _decode_signed_key(link)
        except KeyFormatError as exc:
            return tuple(chain), f"countersignature at hop {hop} is malformed ({exc})"
        if not key.verifies(signature, below.spki_der):
            return tuple(chain), f"countersignature at hop {hop} does not verify"
        chain.append(key)
        below, link = key, link.get("countersignature")
    return tuple(chain), None


def check_signature(data: bytes, manifest: bytes, limits: Limits) -> Signer:
    """The signer of `manifest`, or tampered: a signature that is present must verify."""
    try:
        doc = parse_json_object(data, SIGNATURE)
        if doc.get("alg") != "ed25519":
            raise ValueError("alg is not ed25519")
        key, signature = _decode_signed_key(doc)
    except (ValueError, KeyFormatError) as exc:
        raise _tampered(f"signature.json is malformed ({exc})") from exc
    if not key.verifies(signature, manifest):
        raise _Refused(v.Verdict("tampered", SIGNATURE_FAILED))
    chain, problem = _walk_chain(doc.get("countersignature"), key, limits)
    label = doc.get("keyId")
    return Signer(key, chain, problem, label if isinstance(label, str) else None)


# --- the manifest: listing, kind rules, compat ----------------------------------------


def check_listing(manifest: dict[str, object], members: dict[str, Member]) -> dict[str, bytes]:
    """`files` names exactly the payload entries, each with a sha256; returns the digests."""
    files = manifest.get("files")
    if not isinstance(files, dict):
        raise _tampered("manifest.files is missing or not an object")
    digests: dict[str, bytes] = {}
    for path, value in files.items():
        match = _DIGEST_RE.fullmatch(value) if isinstance(value, str) else None
        if match is None:
            raise _tampered(f"manifest.files[{path!r}] is not a sha256- digest")
        if path in RESERVED:
            raise _tampered(f"manifest.files lists the reserved name {path}")
        if path not in members:
            raise _tampered(f"missing payload: {path!r} is listed but not in the package")
        digests[path] = bytes.fromhex(match.group(1))
    for name in members:
        if name not in RESERVED and name not in digests:
            raise _tampered(f"unlisted payload: {name!r} has no digest in manifest.files")
    return digests


def _truthy(value: object) -> bool:
    """JavaScript truthiness, as the reference tests these fields."""
    if isinstance(value, float) and value != value:
        return False
    return value not in (None, False, 0, "")


def _skill_entry_problem(entry: object, seen: set[str], files: dict[str, bytes]) -> str | None:
    if not isinstance(entry, dict) or not isinstance(entry.get("id"), str) or not entry["id"]:
        return "skill: every skill needs a non-empty id"
    skill_id: str = entry["id"]
    if skill_id in (".", "..") or not _SAFE_ID_RE.fullmatch(skill_id):
        return f"skill: id {skill_id!r} is not a directory-safe name"
    if skill_id in seen:
        return f"skill: duplicate id {skill_id!r}"
    seen.add(skill_id)
    if (path := f"{SKILLS_ROOT}/{skill_id}/SKILL.md") not in files:
        return f"skill: {path!r} is not in manifest.files"
    return None


def skill_problems(manifest: dict[str, object], files: dict[str, bytes]) -> list[str]:
    """validateSkillManifest: every rule a kind "skill" manifest breaks ([] when it holds)."""
    skill = manifest.get("skill")
    if not isinstance(skill, dict):
        return ['skill: kind "skill" requires a "skill" block']
    problems = [
        f"skill: a skill package must not declare {what}"
        for what, broken in (
            ("entry/runtime", _truthy(manifest.get("entry")) or _truthy(manifest.get("runtime"))),
            ("capabilities", manifest.get("capabilities") not in (None, [])),
            ("assets", manifest.get("assets") not in (None, [])),
            ("an app block", _truthy(manifest.get("app"))),
            ("an mcp block", _truthy(manifest.get("mcp"))),
            ("a pack block", _truthy(manifest.get("pack"))),
        )
        if broken
    ]
    entries = skill.get("skills")
    if not isinstance(entries, list) or not entries:
        return [*problems, "skill: at least one skill is required"]
    seen: set[str] = set()
    for entry in entries:
        problem = _skill_entry_problem(entry, seen, files)
        if problem is not None:
            problems.append(problem)
    return problems


def compat_satisfied(compat: str, host: tuple[int, int, int] = API_VERSION) -> bool:
    """The azphalt 0.1 compat grammar: one optional comparator (default >=) and a version."""
    match = _COMPAT_RE.fullmatch(compat)
    if match is None:
        return False
    op = match.group(1) or ">="
    want = tuple(int(part or 0) for part in match.group(2, 3, 4))
    results = {">=": host >= want, ">": host > want, "<=": host <= want, "<": host < want,
               "=": host == want}
    return results[op]


def check_compat(manifest: dict[str, object]) -> None:
    compat = manifest.get("compat")
    if compat is None:
        return
    if not isinstance(compat, str) or not compat_satisfied(compat):
        raise _Refused(v.Verdict(
            "incompatible",
            f"Package requires azphalt API {compat!r}; acxfs implements {API_VERSION_TEXT}.",
        ))


def build_package_tree(members: dict[str, Member], digests: dict[str, bytes]) -> Tree:
    """The verified tree: one entry per listed path; a file may not also be a directory."""
    for path in digests:
        parts = path.split("/")
        for depth in range(1, len(parts)):
            prefix = "/".join(parts[:depth])
            if prefix in digests:
                raise _tampered(f"{prefix!r} is both a file and a directory")
    files = [
        Entry(
            path=path, is_dir=False, size=members[path].size, executable=False,
            mtime=members[path].mtime, digest=digest, ref=members[path].index,
            stored_size=members[path].stored_size, codec=members[path].codec,
        )
        for path, digest in digests.items()
    ]
    dir_mtime = max((f.mtime for f in files), default=0)
    return build_tree(files, (), dir_mtime)


# --- trust ----------------------------------------------------------------------------


def publisher_of(manifest: dict[str, object]) -> str | None:
    """Who the package speaks for: its `publisher` field, else its reverse-DNS `id`."""
    for key in ("publisher", "id"):
        value = manifest.get(key)
        if isinstance(value, str) and value:
            return shown(value)
    return None


def _covers(scope: str | None, publisher: str | None) -> bool:
    """A pin for `scope` (None: any) covers `publisher` and its reverse-DNS sub-namespaces."""
    if scope is None:
        return True
    return publisher is not None and (publisher == scope or publisher.startswith(scope + "."))


def _anchor(
    trust: TrustContext, key: PublicKey, publisher: str | None, now: dt.datetime
) -> v.Trust | None:
    """'local' or 'trusted' when this key, by itself, is a trust anchor for `publisher`."""
    records = [r for r in trust.registry if r.keyid == key.keyid]  # none revoked (see caller)
    if key.keyid in trust.local:
        return "local"
    if any(p.keyid == key.keyid and _covers(p.publisher, publisher) for p in trust.pins):
        return "trusted"
    if any(
        r.status == "active" and publisher is not None and _covers(r.publisher, publisher)
        and r.not_before <= now <= r.not_after and r.proof_fits()
        for r in records
    ):
        return "trusted"
    return None


def trust_verdict(
    signer: Signer | None, publisher: str | None, trust: TrustContext, now: dt.datetime
) -> v.Verdict:
    """The signer key, or a key of its verified countersignature chain, must be an anchor."""
    if signer is None:
        return v.Verdict("legacy", UNSIGNED)
    keyid = signer.key.keyid
    records = [r for r in trust.registry if r.keyid == keyid]
    if any(r.revocation_reason == "key-compromise" for r in records if r.status == "revoked"):
        return v.Verdict("tampered", v.KEY_COMPROMISED)
    for hop, key in enumerate((signer.key, *signer.chain)):
        if any(r.status == "revoked" for r in trust.registry if r.keyid == key.keyid):
            # A revoked key breaks the chain there: what vouches for it vouches for nothing.
            summary = v.REVOKED if hop == 0 else (
                f"Countersigning key {key.keyid} at hop {hop} is revoked.")
            return v.Verdict("portable", summary, keyid=keyid, publisher=publisher)
        level = _anchor(trust, key, publisher, now)
        if level == "local":
            summary = v.LOCAL if hop == 0 else (
                f"Signer counter-signed by this instance's key ({hop}-hop chain).")
            return v.Verdict("local", summary, keyid=keyid, publisher=publisher)
        if level == "trusted":
            summary = f"Signed by trusted key {keyid}." if hop == 0 else (
                f"Signer counter-signed by trusted key {key.keyid} ({hop}-hop chain).")
            return v.Verdict("trusted", summary, keyid=keyid, publisher=publisher)
    return v.Verdict("portable", NOT_TRUSTED, keyid=keyid, publisher=publisher)


# --- the report -----------------------------------------------------------------------


@dataclass(frozen=True)
class Package:
    """A package whose checks passed: its members, manifest, signer and verified tree."""

    path: str
    members: dict[str, Member]
    manifest_bytes: bytes
    manifest: dict[str, object]
    signer: Signer | None
    tree: Tree

    @property
    def kind(self) -> str | None:
        kind = self.manifest.get("kind")
        return kind if isinstance(kind, str) else None

    @property
    def offsets(self) -> dict[int, int]:
        return {m.index: m.data_offset for m in self.members.values()}


@dataclass
class AzpReport(Report):
    """`loader.Report` plus what the azp check saw; `package` is set only when it passed."""

    package: Package | None = None
    manifest: dict[str, object] | None = None  # parsed, possibly from a package that failed
    signed: bool = False  # signature.json is present
    signature_valid: bool = False
    signer: Signer | None = None
    members: dict[str, Member] = field(default_factory=dict)


def _manifest(report: AzpReport, fd: int, limits: Limits) -> bytes:
    member = report.members.get(MANIFEST)
    if member is None:
        raise _malformed("manifest.json is missing")
    # The manifest describes the package's entries (a name and a digest each) and its skills:
    # it never needs much more than that. Bounding it by them keeps a small package from
    # inflating a manifest that parses into gigabytes of JSON objects.
    need = MANIFEST_BASE_BYTES + sum(6 * len(name) + MANIFEST_BYTES_PER_ENTRY
                                     for name in report.members)  # 6: a \uXXXX escape
    return read_small(fd, member, min(limits.max_manifest_bytes, need), limits)


MANIFEST_BASE_BYTES = 1024 * 1024  # skill list, descriptions, compat and other fields
MANIFEST_BYTES_PER_ENTRY = 256  # a file's digest, quotes and separators, generously


def _signer(report: AzpReport, fd: int, manifest: bytes, limits: Limits) -> Signer | None:
    member = report.members.get(SIGNATURE)
    report.signed = member is not None
    if member is None:
        return None
    signer = check_signature(read_small(fd, member, limits.max_envelope_bytes, limits), manifest,
                             limits)
    report.signature_valid = True
    report.signer = signer
    return signer


def _check_kind(manifest: dict[str, object], digests: dict[str, bytes]) -> None:
    if manifest.get("kind") != "skill":
        return
    problems = skill_problems(manifest, digests)
    if problems:
        raise _tampered(problems[0], tuple(problems[1:]))


def _warnings(package: Package) -> list[str]:
    notes: list[str] = []
    if package.kind != "skill":
        notes.append(f"{SKILL_ONLY}; this one is kind {json.dumps(package.kind)} "
                     "(verify and inspect only)")
    if package.signer is not None and package.signer.chain_problem is not None:
        notes.append(f"{package.signer.chain_problem}; keys above it confer no trust")
    declared = _declared_skills(package.manifest)
    for name in package.tree.list(SKILLS_ROOT):
        if package.tree.lookup(f"{SKILLS_ROOT}/{name}/SKILL.md") and name not in declared \
                and package.kind == "skill":
            directory = f"{SKILLS_ROOT}/{name}/"
            notes.append(f"{directory!r} holds a SKILL.md but is not in skill.skills")
    return notes


def _declared_skills(manifest: dict[str, object]) -> list[str]:
    skill = manifest.get("skill")
    entries = skill.get("skills") if isinstance(skill, dict) else None
    if not isinstance(entries, list):
        return []
    return [e["id"] for e in entries if isinstance(e, dict) and isinstance(e.get("id"), str)]


def _check_handle(
    handle: BinaryIO, path: str, trust: TrustContext, limits: Limits, now: dt.datetime
) -> AzpReport:
    report = AzpReport(v.Verdict("malformed", "Not checked."), "azp")
    fd = handle.fileno()
    try:
        report.members = read_members(handle, limits)
        manifest_bytes = _manifest(report, fd, limits)
        signer = _signer(report, fd, manifest_bytes, limits)
        try:
            manifest = parse_json_object(manifest_bytes, MANIFEST)
        except ValueError as exc:
            raise _malformed(str(exc)) from exc
        report.manifest = manifest
        digests = check_listing(manifest, report.members)
        _check_kind(manifest, digests)
        tree = build_package_tree(report.members, digests)
        check_compat(manifest)
        verdict = trust_verdict(signer, publisher_of(manifest), trust, now)
        if verdict.is_integrity_failure:
            raise _Refused(verdict)
    except _Refused as refused:
        report.verdict = refused.verdict
        report.warnings.extend(refused.more)
        return report
    except OSError as exc:
        raise EnvironmentProblem(f"{path}: cannot read ({exc})") from exc
    report.verdict = verdict
    report.package = Package(path, report.members, manifest_bytes, manifest, signer, tree)
    report.warnings.extend(_warnings(report.package))
    return report


def _open(path: str) -> BinaryIO:
    try:
        return open_input(path)  # the handle outlives this function
    except OSError as exc:
        raise EnvironmentProblem(f"{path}: cannot read ({exc.strerror})") from exc


def _deep_check(report: AzpReport, handle: BinaryIO, limits: Limits) -> None:
    """Inflate and hash every listed entry; the first mismatch makes the package tampered."""
    package = report.package
    assert package is not None
    source = AzpSource(package, handle, report.verdict, limits, owns_handle=False)
    for entry in package.tree.files():
        try:
            verify_content(entry, functools.partial(source.raw_chunks, entry), limits).close()
        except TamperError as exc:
            report.verdict = v.Verdict(
                "tampered", f"Digest mismatch: {entry.path!r} differs from its manifest digest.")
            problem = str(exc).removeprefix(entry.path + " ")
            if not report.signed:  # the digest is the manifest's, and nothing signed it
                problem = problem.replace("its signed sha256", "its manifest digest (unsigned)")
            report.warnings.append(f"{entry.path!r} {problem}")
            report.package = None
            return


def check_report(
    path: str, trust: TrustContext, deep: bool = False, limits: Limits = DEFAULT_LIMITS,
    now: dt.datetime | None = None,
) -> AzpReport:
    """The non-raising check `verify` and `inspect` print (EnvironmentProblem only for I/O)."""
    with _open(path) as handle:
        report = _check_handle(handle, path, trust, limits, now or dt.datetime.now(dt.UTC))
        if deep and report.package is not None:
            _deep_check(report, handle, limits)
    return report


# --- the source -----------------------------------------------------------------------


class AzpSource:
    """Serves one checked package: its tree, and raw stored bytes read with os.pread."""

    format = "azp"
    skills_root = SKILLS_ROOT
    default_root = ""

    def __init__(
        self, package: Package, handle: BinaryIO, verdict: v.Verdict,
        limits: Limits = DEFAULT_LIMITS, *, owns_handle: bool = True,
    ) -> None:
        self.package = package
        self.tree: Tree = package.tree
        self.label = package.path
        self.verdict = verdict
        self._limits = limits
        self._handle: BinaryIO | None = handle
        self._fd = handle.fileno()
        self._owns = owns_handle
        self._offsets = package.offsets

    def raw_chunks(self, entry: Entry) -> Iterator[bytes]:
        """The entry's stored bytes (at most its central-directory compressed size)."""
        offset = self._offsets.get(entry.ref)
        if offset is None or self._handle is None:
            raise TamperError(f"{entry.path} is not in this package", entry.path)
        try:
            yield from raw_chunks(self._fd, offset, entry.stored_size, self._limits.chunk_bytes)
        except OSError as exc:
            raise EnvironmentProblem(f"{self.label}: cannot read ({exc.strerror})") from exc

    def close(self) -> None:
        handle, self._handle = self._handle, None
        if handle is not None and self._owns:
            handle.close()


def open_source(
    path: str, trust: TrustContext, min_trust: v.MinTrust = "verified",
    limits: Limits = DEFAULT_LIMITS,
) -> tuple[AzpSource, v.Verdict]:
    """A source for a kind "skill" package whose verdict allows `min_trust`; else UntrustedError.

    The check and the source share one open file, so the bytes served are those checked."""
    handle = _open(path)
    try:
        report = _check_handle(handle, path, trust, limits, dt.datetime.now(dt.UTC))
        package = report.package
        if package is None:
            raise UntrustedError(report.verdict)
        if package.kind != "skill":
            raise UntrustedError(v.Verdict(
                "incompatible", f"{SKILL_ONLY}; this one is kind {json.dumps(package.kind)}."))
        if not report.verdict.allows(min_trust):
            raise UntrustedError(report.verdict)
        return AzpSource(package, handle, report.verdict, limits), report.verdict
    except BaseException:
        handle.close()
        raise


# --- hooks for trust add and inspect --------------------------------------------------


def signer_key(report: Report, keyid: str) -> PublicKey:
    """The key whose signature verified in `report` (what `acxfs trust add PKG.azp` pins)."""
    signer = report.signer if isinstance(report, AzpReport) else None
    if signer is None or signer.key.keyid != keyid:
        raise EnvironmentProblem("the verified signer is not the package's signature key")
    return signer.key


_IDENTITY = ("azphalt", "id", "name", "version", "kind", "publisher", "author", "license",
             "compat", "description", "homepage")


def _facts_label(report: AzpReport) -> str:
    verdict = report.verdict
    if verdict.is_integrity_failure:
        return "UNVERIFIED (the package failed its checks)"
    if verdict.status == "verified":
        return "signed (verified)"
    if report.signature_valid:
        return "signed (intact, signer not trusted)"
    return "unsigned (intact, but nothing vouches for them)"


def _payload_summary(report: AzpReport) -> dict[str, int]:
    payload = [m for name, m in report.members.items() if name not in RESERVED]
    return {"files": len(payload), "bytes": sum(m.size for m in payload),
            "storedBytes": sum(m.stored_size for m in payload)}


def _signature_doc(report: AzpReport) -> dict[str, object]:
    signer = report.signer
    doc: dict[str, object] = {"present": report.signed, "valid": report.signature_valid}
    if signer is not None:
        doc["keyid"] = signer.key.keyid
        doc["keyIdLabel"] = None if signer.label is None else _json_safe(signer.label)
        doc["countersigners"] = [k.keyid for k in signer.chain]
        doc["chainProblem"] = signer.chain_problem
    return doc


def _scalar(value: object) -> str | int | float | bool | None:
    """A manifest value fit for a report: strings made printable, anything else summarized."""
    if isinstance(value, str):
        return _json_safe(value)
    if value is None or isinstance(value, int | float | bool):
        return value
    return f"({type(value).__name__}, not shown)"


def _skill_block(manifest: dict[str, object]) -> dict[str, object] | None:
    """The skill block's defined fields: each entry's id, name and description."""
    skill = manifest.get("skill")
    if not isinstance(skill, dict):
        return None
    entries = skill.get("skills")
    listed = entries if isinstance(entries, list) else []
    return {"skills": [
        {k: _scalar(e[k]) for k in ("id", "name", "description") if k in e}
        for e in listed if isinstance(e, dict)
    ]}


def describe(report: Report) -> dict[str, object]:
    """Identity, signature and skill block from the manifest; no payload entry is inflated."""
    if not isinstance(report, AzpReport) or report.manifest is None:
        return {}
    manifest = report.manifest
    return {
        "facts": _facts_label(report),
        "package": {k: _scalar(manifest[k]) for k in _IDENTITY if k in manifest},
        "signature": _signature_doc(report),
        "payload": _payload_summary(report),
        "skill": _skill_block(manifest),
        "warnings": list(report.warnings),
    }


def _skill_lines(skill: object) -> list[str]:
    entries = skill.get("skills") if isinstance(skill, dict) else None
    if not isinstance(entries, list) or not entries:
        return ["  (none)"]
    lines: list[str] = []
    for entry in entries:
        skill_id = shown(str(entry.get("id")))
        lines.append(f"  {skill_id}  {SKILLS_ROOT}/{skill_id}/SKILL.md")
        for key in ("name", "description"):
            if key in entry:
                lines.append(f"    {key}: {shown(str(entry[key]))}")
    return lines


def render(report: Report, doc: dict[str, object]) -> str:
    """The text form of `describe`, beginning with the verdict line."""
    lines = [str(doc["verdict"])]
    if "package" not in doc:
        return "\n".join(lines) + "\n"
    identity, signature, payload = doc["package"], doc["signature"], doc["payload"]
    assert isinstance(identity, dict) and isinstance(signature, dict)
    assert isinstance(payload, dict)
    lines.append("format: azphalt package (.azp)")
    lines.append(f"package facts from manifest.json, {doc['facts']}:")
    lines += [f"  {k}: {shown(str(val))}" for k, val in identity.items()]
    if signature.get("keyid"):
        label = signature.get("keyIdLabel")
        lines.append(f"signer: {signature['keyid']}"
                     + (f" (keyId {shown(repr(label))}, a name the signer chose)" if label else ""))
        for keyid in signature.get("countersigners") or []:
            lines.append(f"  counter-signed by: {keyid}")
    elif signature.get("present"):
        lines.append("signer: signature.json present but it did not verify")
    else:
        lines.append("signer: none (no signature.json)")
    lines.append(f"payload: {payload['files']} files, {payload['bytes']} bytes "
                 f"({payload['storedBytes']} stored)")
    if doc.get("skill") is not None:
        lines.append("skills (the manifest's skill block; each SKILL.md is authoritative):")
        lines += _skill_lines(doc["skill"])
    warnings = doc.get("warnings")
    for warning in warnings if isinstance(warnings, list) else []:
        lines.append(f"note: {warning}")
    return "\n".join(lines) + "\n"
