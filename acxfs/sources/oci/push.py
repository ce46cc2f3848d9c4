"""`acxfs push BUNDLE oci://HOST/REPO[:TAG]`: publish a bundle `verify` accepts.

Invariant: the bytes pushed are the bytes checked: the file is copied once into a private
temporary file, which gets `verify`'s full check against the trust store and is what is
uploaded; anything `verify` would not accept is refused with its verdict and its exit code
before any connection.  The bundle's version tag is its signed version (`+` as `_`) and never
moves: a version tag already naming another manifest is refused, the same manifest uploads
nothing.  For a cartridge, its DSSE envelope is attached as a referrer (the Referrers API
where the registry reports one, else the `sha256-<digest>` fallback index, read, added to,
written back, never dropping another referrer).
"""

from __future__ import annotations

import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from acxfs import formats
from acxfs.errors import EnvironmentProblem, RefusedError, SourceError
from acxfs.safe.inputs import copy_input
from acxfs.sources.http import Http
from acxfs.sources.oci.artifact import (
    EMPTY_BYTES,
    EMPTY_DIGEST,
    INDEX,
    LAYER_BYTES,
    MANIFEST,
    MANIFEST_BYTES,
    Labels,
    bundle_manifest,
    digest_of,
    referrer_manifest,
    with_referrer,
)
from acxfs.sources.oci.reference import OciRef, tag_version, version_tag
from acxfs.sources.oci.repository import Repository
from acxfs.trust.policy import TrustContext


@dataclass(frozen=True)
class Pushed:
    ref: OciRef  # REPO@sha256:M
    identity: str
    version: str

    @property
    def line(self) -> str:
        return f"{self.ref.text} {self.identity} {self.version}"


def push(bundle: str, ref: OciRef, trust: TrustContext, http: Http) -> Pushed:
    if ref.digest is not None:
        raise EnvironmentProblem(f"{ref.text}: push names a tag, not a digest "
                                 "(oci://HOST/REPO[:TAG])")
    with tempfile.TemporaryDirectory(prefix="acxfs-push-") as work:
        copy = Path(work) / "bundle"
        layer = _copy(bundle, copy)
        report = formats.check(str(copy), trust, deep=True)
        verdict = report.verdict
        if verdict.exit_code != 0:
            raise RefusedError(f"{bundle}: {verdict.line}; acxfs pushes only what verify "
                               "accepts", exit_code=verdict.exit_code)
        identity = formats.identity(report)
        facts = formats.facts(report)
        tag = version_tag(identity.version)
        if ref.tag is not None and ref.tag != tag and tag_version(ref.tag) is not None:
            raise SourceError(f"{ref.text}: {bundle} is {identity.name} {identity.version}; a "
                              "version tag is the signed version")
        size = copy.stat().st_size
        labels = Labels(identity.name, identity.artifact, identity.version,
                        tuple(sorted(formats.skills(report))), facts.created, facts.description,
                        facts.license, identity.publisher, facts.rom_manifest,
                        facts.spec_version)
        manifest = bundle_manifest(report.format, layer, size, labels)
        digest = digest_of(manifest)
        repo = Repository(ref.at_tag(None), http, push=True)
        held = repo.manifest(tag)
        if held is not None and digest_of(held) != digest:
            raise SourceError(f"{ref.at_tag(tag).text} already names {digest_of(held)}, not "
                              f"{digest}; published versions are immutable")
        if held is None:
            _blob(repo, EMPTY_DIGEST, len(EMPTY_BYTES), lambda: EMPTY_BYTES)
            _blob(repo, layer, size, lambda: open(copy, "rb"))  # noqa: SIM115 (closed by upload)
            repo.put_manifest(tag, manifest)
        if ref.tag is not None and ref.tag != tag:
            moved = repo.manifest(ref.tag)
            if moved is None or digest_of(moved) != digest:
                repo.put_manifest(ref.tag, manifest)
        if facts.envelope is not None:
            _refer(repo, manifest, facts.envelope)
    return Pushed(ref.at_digest(digest), identity.name, identity.version)


def _copy(bundle: str, copy: Path) -> str:
    """Copy `bundle` (a regular file, never written) to `copy`; the copy's sha256:<hex>."""
    return "sha256:" + copy_input(bundle, str(copy), LAYER_BYTES, "layer acxfs pushes")[1]


def _blob(repo: Repository, digest: str, size: int,
          body: Callable[[], IO[bytes] | bytes]) -> None:
    if not repo.has_blob(digest):
        repo.upload(digest, size, body)


def _refer(repo: Repository, subject: bytes, envelope: bytes) -> None:
    """Attach `envelope` to the manifest `subject` (idempotent: a second push writes
    nothing when the referrer and its index entry are there already)."""
    envelope_digest = digest_of(envelope)
    referrer = referrer_manifest(envelope_digest, len(envelope), digest_of(subject),
                                 len(subject))
    if repo.manifest(digest_of(referrer), accept=MANIFEST) is None:
        _blob(repo, EMPTY_DIGEST, len(EMPTY_BYTES), lambda: EMPTY_BYTES)
        _blob(repo, envelope_digest, len(envelope), lambda: envelope)
        answer = repo.put_manifest(digest_of(referrer), referrer)
        if answer.header("OCI-Subject") == digest_of(subject):
            return  # the registry indexes referrers itself
    elif _indexed(repo, digest_of(subject), digest_of(referrer)):
        return
    fallback = "sha256-" + digest_of(subject)[7:]
    where = repo.ref.at_tag(fallback).text
    index = with_referrer(repo.manifest(fallback, accept=INDEX), digest_of(referrer),
                          len(referrer), where)
    if index is not None:
        repo.put_manifest(fallback, index, INDEX)


def _indexed(repo: Repository, subject: str, referrer: str) -> bool:
    """Whether the registry's own Referrers API lists `referrer` for `subject` (a registry
    without one, like distribution 2.8.2, answers 404: False)."""
    answer = repo.call("GET", repo.url(f"referrers/{subject}"), headers={"Accept": INDEX},
                       limit=MANIFEST_BYTES)
    media = (answer.header("Content-Type") or "").split(";")[0].strip()
    if answer.status != 200 or media != INDEX:
        return False
    return with_referrer(answer.body, referrer, 0, repo.ref.key) is None
