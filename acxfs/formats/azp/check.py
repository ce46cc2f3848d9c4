"""The shallow check of an .azp package: zip -> manifest -> signature -> verdict and tree.

Invariant: a tree entry exists only for a listed, digest-bearing, safe path of a package
whose checks passed.  `check_handle` reads the central directory, every local file header
(never the data behind it), `manifest.json` and `signature.json`; nothing else is inflated.
A package is accepted only when every entry path is safe and unique, the entries are
exactly `manifest.files` plus the two reserved names, the signature (if any) covers the
exact stored manifest bytes, the `kind: "skill"` rules hold and `compat` accepts azphalt
API 0.1.  `identity` and `skills` answer only from a package whose signature verified.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
from dataclasses import dataclass, field
from typing import BinaryIO

from acxfs import verdict as v
from acxfs.container import SEGMENT_RE, Identity, Report, SignedFacts, Tree
from acxfs.errors import EnvironmentProblem, IdentityError, Refused
from acxfs.formats.azp.manifest import (
    MANIFEST,
    SIGNATURE,
    SKILLS_ROOT,
    build_package_tree,
    check_compat,
    check_listing,
    declared_skills,
    parse_json_object,
    publisher_of,
    skill_problems,
)
from acxfs.formats.azp.signature import Signer, check_signature, trust_verdict
from acxfs.formats.azp.zip import Member, malformed, read_members, read_small, tampered
from acxfs.limits import Limits
from acxfs.safe.inputs import open_input
from acxfs.skills import skill_dirs
from acxfs.trust.policy import TrustContext

SKILL_ONLY = 'acxfs mounts only kind "skill" packages'


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
    """A package's report: `checked` is its Package, set only when the checks passed, and
    the rest is what the check saw, also of a package that failed (for inspect)."""

    manifest: dict[str, object] | None = None  # parsed, possibly from a package that failed
    signed: bool = False  # signature.json is present
    signature_valid: bool = False
    signer: Signer | None = None
    members: dict[str, Member] = field(default_factory=dict)

    @property
    def package(self) -> Package | None:
        checked = self.checked
        return checked if isinstance(checked, Package) else None


def _manifest(report: AzpReport, fd: int, limits: Limits) -> bytes:
    member = report.members.get(MANIFEST)
    if member is None:
        raise malformed("manifest.json is missing")
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
        raise tampered(problems[0], tuple(problems[1:]))


def _warnings(package: Package) -> list[str]:
    notes: list[str] = []
    if package.kind != "skill":
        notes.append(f"{SKILL_ONLY}; this one is kind {json.dumps(package.kind)} "
                     "(verify and inspect only)")
    if package.signer is not None and package.signer.chain_problem is not None:
        notes.append(f"{package.signer.chain_problem}; keys above it confer no trust")
    declared = declared_skills(package.manifest)
    for name in package.tree.list(SKILLS_ROOT):
        if package.tree.lookup(f"{SKILLS_ROOT}/{name}/SKILL.md") and name not in declared \
                and package.kind == "skill":
            directory = f"{SKILLS_ROOT}/{name}/"
            notes.append(f"{directory!r} holds a SKILL.md but is not in skill.skills")
    return notes


def check_handle(
    handle: BinaryIO, path: str, trust: TrustContext, limits: Limits, now: dt.datetime
) -> AzpReport:
    """The non-raising check of the package open as `handle` (EnvironmentProblem for I/O)."""
    report = AzpReport(v.Verdict("malformed", "Not checked."), "azp")
    fd = handle.fileno()
    try:
        report.members = read_members(handle, limits)
        manifest_bytes = _manifest(report, fd, limits)
        signer = _signer(report, fd, manifest_bytes, limits)
        try:
            manifest = parse_json_object(manifest_bytes, MANIFEST)
        except ValueError as exc:
            raise malformed(str(exc)) from exc
        report.manifest = manifest
        digests = check_listing(manifest, report.members)
        _check_kind(manifest, digests)
        tree = build_package_tree(report.members, digests)
        check_compat(manifest)
        verdict = trust_verdict(signer, publisher_of(manifest), trust, now)
        if verdict.is_integrity_failure:
            raise Refused(verdict)
    except Refused as refused:
        report.verdict = refused.verdict
        report.warnings.extend(refused.more)
        return report
    except OSError as exc:
        raise EnvironmentProblem(f"{path}: cannot read ({exc})") from exc
    report.verdict = verdict
    package = Package(path, report.members, manifest_bytes, manifest, signer, tree)
    report.checked = package
    report.warnings.extend(_warnings(package))
    return report


def open_package(path: str) -> BinaryIO:
    """The package file, opened for the check and the source to share (so the bytes served
    are those checked)."""
    try:
        return open_input(path)  # the handle outlives this function
    except OSError as exc:
        raise EnvironmentProblem(f"{path}: cannot read ({exc.strerror})") from exc


def identity(report: Report) -> Identity:
    """The signed manifest's package id and version (each a safe path segment)."""
    package = report.package if isinstance(report, AzpReport) else None
    if package is None or package.signer is None:
        raise IdentityError("the package has no verified signature: it has no signed identity")
    facts = [package.manifest.get(key) for key in ("id", "version")]
    for key, value in zip(("id", "version"), facts, strict=True):
        if not isinstance(value, str) or not SEGMENT_RE.fullmatch(value):
            raise IdentityError(f"the signed manifest's {key} {value!r} is not a safe path "
                                "segment")
    package_id, version = facts
    assert isinstance(package_id, str) and isinstance(version, str)
    release = "sha256:" + hashlib.sha256(package.manifest_bytes).hexdigest()
    return Identity(None, package_id, version, release)


def skills(report: Report) -> dict[str, str]:
    """Skill name -> directory, for each skills/<name>/ of the verified tree."""
    package = report.package if isinstance(report, AzpReport) else None
    if package is None:
        raise IdentityError("the package did not pass its check: it has no verified skills")
    return skill_dirs(package.tree.skills(SKILLS_ROOT), SKILLS_ROOT)


def facts(report: Report) -> SignedFacts:
    """The signed manifest's facts an OCI manifest is labelled with (no envelope: the
    package carries its signature inside)."""
    package = report.package if isinstance(report, AzpReport) else None
    if package is None or package.signer is None:
        raise IdentityError("the package has no verified signature: it has no signed facts")

    def text(key: str) -> str | None:
        value = package.manifest.get(key)
        return value if isinstance(value, str) and value else None

    return SignedFacts(text("created"), text("description"), text("license"))
