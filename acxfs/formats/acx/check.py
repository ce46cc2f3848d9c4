"""The shallow check of an ACX cartridge: rows -> verified manifest -> verdict and tree.

`check_cartridge` never raises for anything the file contains: it returns a `CartridgeReport`
whose `verdict` says what the file is.  A `VerifiedCartridge` (the report's `verified`) exists
only when the structure is valid and no integrity check failed; every digest in its tree is
the signed oid (or, for legacy and unverifiable signatures, the recorded one, which the
verdict says).  No file BLOB is read here: file bytes are checked when read (acxfs.content.cache).
"""

from __future__ import annotations

import datetime as dt
import functools
import gc
import hashlib
import json
import re
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from operator import itemgetter

from acxfs import verdict as v
from acxfs.container import SEGMENT_RE, Entry, Identity, Report, SignedFacts, Tree, build_tree
from acxfs.errors import (
    EnvelopeFormatError,
    IdentityError,
    IncompatibleError,
    KeyFormatError,
    MalformedError,
    Refused,
)
from acxfs.formats.acx.rows import (
    CartridgeRows,
    ObjectRow,
    SqlarRow,
    first_duplicate,
    read_cartridge,
)
from acxfs.limits import DEFAULT_LIMITS, Limits
from acxfs.signing.dsse import IN_TOTO_PAYLOAD_TYPE, check_signatures, parse_envelope
from acxfs.signing.jcs import canonical_bytes, utf16_key
from acxfs.signing.keys import PublicKey, public_key_from_pem
from acxfs.skills import skill_dirs
from acxfs.text import sentence
from acxfs.trust.policy import TrustContext, parse_time

EMPTY_OID = "sha256:" + hashlib.sha256(b"").hexdigest()
STATEMENT_TYPE = "https://in-toto.io/Statement/v1"
PREDICATE_TYPE = "https://acx.dev/attestation/cartridge/v1"
SKILLS_ROOT = "rom/skills"


_PLAIN = re.compile(r"[ !#-\[\]-~]*")  # printable ASCII but '"' and '\\': JSON as is


def _json_str(text: str) -> str:
    return f'"{text}"' if _PLAIN.fullmatch(text) else canonical_bytes(text).decode("utf-8")


def manifest_parts(objects: Iterable[ObjectRow], batch: int = 4096) -> Iterator[bytes]:
    """The JCS ROM integrity manifest over the stored oids of every ROM object (section 4), in
    consecutive pieces of at most `batch` items.

    Equivalent to `canonical_bytes([{"sourceRef", "oid", "canon", "sz"}, ...])` (whose keys JCS
    orders canon, oid, sourceRef, sz), written out directly because it runs per file at mount,
    and in pieces so that a large manifest is hashed without being held whole."""
    rom = [o for o in objects if o[4] == "rom"]
    columns = ("".join(map(itemgetter(i), rom)) for i in (0, 1, 2, 3))
    if all(_PLAIN.fullmatch(column) for column in columns):
        # ASCII: UTF-16 order is str order, and no string needs an escape.
        by_kind: dict[str, list[ObjectRow]] = {}
        for o in rom:
            by_kind.setdefault(o[1], []).append(o)
        rom = []
        for kind in sorted(by_kind):  # one string key per kind sorts far faster than pairs
            rom += sorted(by_kind[kind], key=_REF)

        def items(part: list[ObjectRow]) -> list[str]:
            return [f'{{"canon":"{canon}","oid":"{oid}","sourceRef":"{ref}","sz":{sz:d}}}'
                    for oid, _, ref, canon, _, sz in part]
    else:
        rom.sort(key=lambda o: (utf16_key(o.kind), utf16_key(o.source_ref)))

        def items(part: list[ObjectRow]) -> list[str]:
            return [f'{{"canon":{_json_str(o.canon)},"oid":{_json_str(o.oid)},'
                    f'"sourceRef":{_json_str(o.source_ref)},"sz":{int(o.sz)}}}' for o in part]
    opening = "["
    for start in range(0, len(rom), batch):
        yield (opening + ",".join(items(rom[start:start + batch]))).encode("utf-8")
        opening = ","
    yield b"[]" if not rom else b"]"


_REF = itemgetter(2)


def manifest_hash(objects: Iterable[ObjectRow]) -> str:
    digest = hashlib.sha256()
    for part in manifest_parts(objects):
        digest.update(part)
    return "sha256:" + digest.hexdigest()


@dataclass(frozen=True)
class Statement:
    """The in-toto statement, parsed only from bytes whose signature verified."""

    subject_name: str
    subject_digest: str
    predicate: dict[str, object]

    @property
    def publisher(self) -> str | None:
        value = self.predicate.get("publisherId")
        return value if isinstance(value, str) else None

    @property
    def signed_at(self) -> str | None:
        value = self.predicate.get("signedAt")
        return value if isinstance(value, str) else None


def parse_statement(payload: bytes) -> Statement:
    try:
        doc = json.loads(payload.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError) as exc:
        raise EnvelopeFormatError("statement is not JSON") from exc
    if not isinstance(doc, dict) or doc.get("_type") != STATEMENT_TYPE:
        raise EnvelopeFormatError("statement _type is not in-toto Statement v1")
    if doc.get("predicateType") != PREDICATE_TYPE:
        raise EnvelopeFormatError("predicateType is not the ACX cartridge attestation")
    subject, predicate = doc.get("subject"), doc.get("predicate")
    if not isinstance(subject, list) or not subject or not isinstance(subject[0], dict):
        raise EnvelopeFormatError("statement has no subject")
    digest = subject[0].get("digest")
    sha = digest.get("sha256") if isinstance(digest, dict) else None
    if not isinstance(sha, str) or not isinstance(predicate, dict):
        raise EnvelopeFormatError("statement lacks subject digest or predicate")
    name = subject[0].get("name")
    return Statement(name if isinstance(name, str) else "", sha, predicate)


@dataclass(frozen=True)
class VerifiedCartridge:
    """A cartridge whose shallow check passed; its tree carries the digests files must match."""

    rows: CartridgeRows
    verdict: v.Verdict
    statement: Statement | None
    tree: Tree
    save_tree: Tree
    signed_meta: frozenset[str]  # cartridge keys bound by a verified object

    @property
    def skills(self) -> tuple[str, ...]:
        """Skill directories under rom/skills (chosen by signed paths, never by index names)."""
        return self.tree.skills(SKILLS_ROOT)


@dataclass(frozen=True)
class CartridgeReport:
    """The non-raising result of a check: always a verdict, a VerifiedCartridge when intact."""

    verdict: v.Verdict
    verified: VerifiedCartridge | None = None
    rows: CartridgeRows | None = None
    warnings: tuple[str, ...] = ()


def check_cartridge(
    path: str,
    trust: TrustContext,
    limits: Limits = DEFAULT_LIMITS,
    now: dt.datetime | None = None,
) -> CartridgeReport:
    """Structure, signature, manifest, bindings, exact ROM, skill index and trust of `path`.

    Raises only EnvironmentProblem (the file cannot be read at all).  The check allocates a
    few objects per file and keeps most of them, so the cyclic garbage collector, which would
    re-scan them all again and again, is paused meanwhile (it builds no cycles worth freeing),
    and what it built is then handed to the collector's permanent generation: the tree lives
    as long as the mount, and scanning it once more would only cost time (`gc.freeze`)."""
    paused = gc.isenabled()
    gc.disable()
    try:
        return _check(path, trust, limits, now)
    finally:
        gc.freeze()
        if paused:
            gc.enable()


def _check(
    path: str, trust: TrustContext, limits: Limits, now: dt.datetime | None
) -> CartridgeReport:
    try:
        rows = read_cartridge(path, limits)
    except MalformedError as exc:
        kind: v.Trust = "incompatible" if isinstance(exc, IncompatibleError) else "malformed"
        return CartridgeReport(v.Verdict(kind, sentence(str(exc))))
    try:
        return _check_rows(rows, trust, limits, now or dt.datetime.now(dt.UTC))
    except Refused as refused:
        return CartridgeReport(refused.verdict, rows=rows)


def _tampered(summary: str) -> Refused:
    return Refused(v.Verdict("tampered", summary))


def _check_rows(
    rows: CartridgeRows, trust: TrustContext, limits: Limits, now: dt.datetime
) -> CartridgeReport:
    sig = rows.signature
    if sig is None:
        verdict = v.Verdict("legacy", v.UNSIGNED)
        return _report(rows, verdict, None)
    try:
        envelope = parse_envelope(sig.envelope, limits)
    except EnvelopeFormatError as exc:
        raise _tampered(v.MALFORMED_ENVELOPE) from exc
    if envelope.payload_type != IN_TOTO_PAYLOAD_TYPE:
        raise _tampered(v.MALFORMED_ENVELOPE)

    embedded: PublicKey | None = None
    if sig.public_key_pem:
        try:
            embedded = public_key_from_pem(sig.public_key_pem)
        except KeyFormatError:
            embedded = None

    def key_for(keyid: str) -> PublicKey | None:
        found = trust.key_for(keyid)
        if found is None and embedded is not None and embedded.keyid == keyid:
            found = embedded
        return found

    checks = check_signatures(envelope, key_for)
    if any(c.key is not None and not c.valid for c in checks):
        raise _tampered(v.DSSE_FAILED)
    valid = [c for c in checks if c.valid]
    if not valid:
        verdict = v.Verdict("portable", v.UNVERIFIED, keyid=checks[0].keyid, unverified=True)
        return _report(rows, verdict, None)

    try:
        statement = parse_statement(envelope.payload)
    except EnvelopeFormatError as exc:
        raise _tampered(f"Signed statement is not an ACX cartridge attestation ({exc}).") from exc

    live_oid = rows.live_oids.get
    for obj in rows.objects:  # files' oids are checked when read; the other kinds here, live
        if obj[1] != "sqlar" and obj[4] == "rom" and live_oid(obj[2]) != obj[0]:
            raise _tampered(v.CONTENT_DIVERGES)
    computed = manifest_hash(rows.objects)
    if statement.subject_digest != computed.removeprefix("sha256:"):
        raise _tampered(v.MANIFEST_MISMATCH)
    recorded: list[object] = [sig.manifest_hash, rows.meta.get("acx.rom_manifest_hash")]
    recorded += [statement.predicate.get(k) for k in ("manifestHash", "romDigest")
                 if k in statement.predicate]
    if any(value != computed for value in recorded):
        raise _tampered(v.RECORDED_MISMATCH)
    signed_at = _epoch(statement.signed_at)
    covering, rom_entries = _check_exact_rom(rows, signed_at)
    _check_skill_index(rows, covering)

    decisions = [
        (trust.evaluate(c.keyid, statement.publisher, statement.signed_at, now), c) for c in valid
    ]
    order = {"local": 0, "trusted": 1, "portable": 2, "tampered": 3}
    decision, best = min(decisions, key=lambda d: order.get(d[0].trust, 9))
    verdict = v.Verdict(
        decision.trust, decision.summary, keyid=best.keyid, publisher=statement.publisher,
        signed_at=statement.signed_at,
    )
    if verdict.is_integrity_failure:
        raise Refused(verdict)
    return _report(rows, verdict, statement, rom_entries)


def _check_exact_rom(
    rows: CartridgeRows, mtime: int
) -> tuple[dict[str, ObjectRow], list[Entry]]:
    """Spec section 7: the ROM zone is exactly the set of signed sqlar objects.

    Returns the covering object of every ROM file and, from the same pass, the ROM's entries
    with their signed digests (`mtime` for rows that record none)."""
    signed = [o for o in rows.objects if o[1] == "sqlar" and o[4] == "rom"]
    covering = {o[2]: o for o in signed}
    if len(covering) != len(signed):
        twice = first_duplicate([o[2] for o in signed])
        raise _tampered(f"{twice} is covered twice by the signed manifest.")
    if len(covering) != len(rows.rom_files):
        names = {row.name for row in rows.rom_files}
        for ref in covering:
            if ref not in names:
                raise _tampered(f"{ref} is in the signed manifest but not in the ROM.")
    get, fromhex, make = covering.get, bytes.fromhex, _MAKE_ENTRY
    entries: list[Entry] = []
    add = entries.append
    for rowid, name, mode, row_mtime, sz, stored in rows.rom_files:
        found = get(name)
        if found is None:
            raise _tampered(f"{name} is not covered by the signed manifest.")
        oid = found[0]
        if found[5] != sz:
            raise _tampered(f"{name} has size {sz}, but the signed manifest says {found[5]}.")
        if not sz and oid != EMPTY_OID:
            # No read ever reaches an empty file (its size says there is nothing to read), so
            # its digest is checked here, where the answer needs no byte of it.
            raise _tampered(f"{name} is empty, but its signed sha256 is not that of no bytes.")
        add(make((name, False, sz, bool(mode & 0o111), row_mtime or mtime, fromhex(oid[7:]),
                  rowid, stored, "sqlar")))
    return covering, entries


_MAKE_ENTRY = functools.partial(tuple.__new__, Entry)  # Entry._make without a Python frame


def _check_skill_index(rows: CartridgeRows, covering: dict[str, ObjectRow]) -> None:
    """Spec section 7: every acx_skill row names a ROM file and carries its signed digest."""
    for skill in rows.skills:
        signed = covering.get(skill.sqlar_path)
        if signed is None:
            raise _tampered(f"acx_skill row {skill.sqlar_path} names no signed ROM file.")
        if "sha256:" + skill.content_sha256 != signed.oid:
            raise _tampered(
                f"acx_skill row {skill.sqlar_path} has a content_sha256 that is not the signed one."
            )


def _epoch(timestamp: str | None) -> int:
    parsed = parse_time(timestamp)
    return int(parsed.timestamp()) if parsed else 0


def _entries(rows: Sequence[SqlarRow], digests: dict[str, ObjectRow], mtime: int) -> list[Entry]:
    get, fromhex, make = digests.get, bytes.fromhex, _MAKE_ENTRY
    return [
        make((name, False, sz, bool(mode & 0o111), row_mtime or mtime,
              fromhex(obj[0][7:]) if (obj := get(name)) is not None else None,
              rowid, stored, "sqlar"))
        for rowid, name, mode, row_mtime, sz, stored in rows
    ]


def _recorded(rows: CartridgeRows, zone: str) -> dict[str, ObjectRow]:
    """The first sqlar object recorded for each path of `zone` (legacy and SAVE digests)."""
    found: dict[str, ObjectRow] = {}
    for obj in rows.objects:
        if obj.kind == "sqlar" and obj.zone == zone:
            found.setdefault(obj.source_ref, obj)
    return found


def _report(
    rows: CartridgeRows, verdict: v.Verdict, statement: Statement | None,
    rom_entries: list[Entry] | None = None,
) -> CartridgeReport:
    """Build the verified trees: ROM files with their signed digests (`rom_entries`, from the
    exact-ROM check), or, unsigned or unverified, the digests the rows record."""
    signed_at = _epoch(statement.signed_at if statement else None)
    rom = rom_entries if rom_entries is not None else _entries(
        rows.rom_files, _recorded(rows, "rom"), signed_at)
    save = _entries(rows.save_files, _recorded(rows, "save"), signed_at) if rows.save_files else []
    rom_dirs, unshown = _implied_dirs(rom, [d for d in rows.dir_rows if d.startswith("rom/")])
    tree = build_tree(rom, ["rom", *rom_dirs], signed_at)
    save_tree = build_tree(save, [d for d in rows.dir_rows if d.startswith("save/")], signed_at)
    signed_meta = frozenset(
        o[2].removeprefix("cartridge:") for o in rows.objects
        if o[4] == "rom" and o[2].startswith("cartridge:")
    ) if statement is not None else frozenset()
    verified = VerifiedCartridge(rows, verdict, statement, tree, save_tree, signed_meta)
    warnings = tuple(f"directory row {name} is no ancestor of a signed file: not shown"
                     for name in unshown)
    return CartridgeReport(verdict, verified, rows, warnings)


def _implied_dirs(files: list[Entry], dir_rows: list[str]) -> tuple[list[str], list[str]]:
    """Spec section 3: directory rows are unsigned, so they add no names.  Returns the rows
    that are an ancestor of a ROM file (already implied by its path) and those that are not
    (never shown: an agent reads directory names too)."""
    if not dir_rows:
        return [], []
    ancestors: set[str] = set()
    for entry in files:
        parent = entry[0].rpartition("/")[0]
        while parent and parent not in ancestors:
            ancestors.add(parent)
            parent = parent.rpartition("/")[0]
    kept = [d for d in dir_rows if d in ancestors]
    return kept, [d for d in dir_rows if d not in ancestors]


@dataclass
class AcxReport(Report):
    """A cartridge's report: `checked` is its VerifiedCartridge (None when it failed) and
    `rows` what the check read, also from a cartridge that failed (for inspect)."""

    rows: CartridgeRows | None = None

    @property
    def cartridge(self) -> VerifiedCartridge | None:
        checked = self.checked
        return checked if isinstance(checked, VerifiedCartridge) else None


def report_of(result: CartridgeReport) -> AcxReport:
    return AcxReport(result.verdict, "acx", list(result.warnings), checked=result.verified,
                     rows=result.rows)


IDENTITY_KEYS = ("acx.publisher_id", "acx.artifact_id", "acx.artifact_version")


def identity(report: Report) -> Identity:
    """publisher/artifact@version from the signed cartridge facts; the publisher fact must be
    the one the signed statement names, and each part a safe path segment."""
    cartridge = report.cartridge if isinstance(report, AcxReport) else None
    if cartridge is None or cartridge.statement is None:
        raise IdentityError("the cartridge has no verified signature: it has no signed identity")
    meta = cartridge.rows.meta
    for key in IDENTITY_KEYS:
        if key not in cartridge.signed_meta or key not in meta:
            raise IdentityError(f"the cartridge fact {key} is not signed")
    publisher, artifact, version = (meta[key] for key in IDENTITY_KEYS)
    if publisher != cartridge.statement.publisher:
        raise IdentityError(f"the signed fact acx.publisher_id {publisher!r} is not the "
                            f"statement's publisherId {cartridge.statement.publisher!r}")
    for key, value in zip(IDENTITY_KEYS, (publisher, artifact, version), strict=True):
        if not SEGMENT_RE.fullmatch(value):
            raise IdentityError(f"the signed fact {key} {value!r} is not a safe path segment")
    return Identity(publisher, artifact, version, "sha256:" + cartridge.statement.subject_digest)


def skills(report: Report) -> dict[str, str]:
    """Skill name -> directory, for each rom/skills/<name>/ of the verified tree."""
    cartridge = report.cartridge if isinstance(report, AcxReport) else None
    if cartridge is None:
        raise IdentityError("the cartridge did not pass its check: it has no verified skills")
    return skill_dirs(cartridge.skills, SKILLS_ROOT)



def facts(report: Report) -> SignedFacts:
    """The signed cartridge facts an OCI manifest is labelled with, and the envelope."""
    cartridge = report.cartridge if isinstance(report, AcxReport) else None
    if cartridge is None or cartridge.statement is None or cartridge.rows.signature is None:
        raise IdentityError("the cartridge has no verified signature: it has no signed facts")
    meta = cartridge.rows.meta

    def signed(key: str) -> str | None:
        return meta.get(key) if key in cartridge.signed_meta else None

    return SignedFacts(signed("acx.created_at"), signed("acx.description"),
                       signed("acx.license"), signed("acx.spec_version"),
                       "sha256:" + cartridge.statement.subject_digest,
                       cartridge.rows.signature.envelope.encode("utf-8"))
