"""An OCI repository as a library source: the manifest a request names, and what its bundle
must then be.

Invariant: a request names a manifest by a tag (none: the tag or digest the source was named
with, else the highest SemVer release tag, pre-releases only when named) or by a digest; the
manifest must be an acxfs artifact and its layer the bundle, fetched exactly its size, and
the layer's sha256 must be the manifest's before anything parses it.  After the full check,
the bundle's signed facts must agree with the request and with what acxfs remembers of the
repository: the identity it first carried, a version tag naming exactly its signed version,
and a version tag's signed release never changing.  What was accepted is remembered only
with the change it belongs to.  Offline, only a digest whose layer acxfs remembers can be
named (the store must hold it).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from acxfs import semver
from acxfs.errors import EnvironmentProblem, NetworkError, SourceError
from acxfs.sources.http import Http
from acxfs.sources.memory import Published, SourceMemory
from acxfs.sources.oci.artifact import Artifact, digest_of, parse_artifact
from acxfs.sources.oci.reference import (
    DIGEST_RE,
    TAG_RE,
    OciRef,
    coordinate,
    split_coordinate,
    tag_version,
    version_tag,
)
from acxfs.sources.oci.repository import Repository
from acxfs.sources.release import Lifecycle, Release
from acxfs.sources.spec import SourceSpec


@dataclass
class OciSource:
    """One OCI repository for one command: what each request names, checked against memory."""

    spec: SourceSpec
    http: Http
    memory: SourceMemory
    repo: Repository = field(init=False)
    artifacts: dict[str, Artifact] = field(default_factory=dict)  # manifest digest -> layer
    accepted: dict[str, Published] = field(default_factory=dict)
    accepted_identity: str | None = None

    def __post_init__(self) -> None:
        assert self.spec.ref is not None
        self.repo = Repository(self.spec.ref.at_tag(None), self.http)

    @property
    def ref(self) -> OciRef:
        return self.repo.ref

    def load(self, allow_stale: bool) -> None:
        pass  # a repository is asked per request

    def where(self, release: Release) -> str:
        """The reference a release was asked by: REPO:TAG, or REPO@DIGEST."""
        tag, manifest = split_coordinate(release.coordinate)
        return self.ref.at_tag(tag).text if tag else self.ref.at_digest(manifest).text

    @property
    def named(self) -> str | None:
        """The tag or digest the source itself was named with (`--from REPO:TAG`), if any."""
        assert self.spec.ref is not None
        return self.spec.ref.digest or self.spec.ref.tag

    def release(self, name: str, version: str | None) -> Release:
        """The release `version` selects: None (the tag or digest the source was named with,
        else the highest release tag), a SemVer version (its version tag), another tag, or a
        manifest digest."""
        named = self.named
        if version is None:
            version = named
        elif named is not None and named not in (version, version_tag(version)):
            assert self.spec.ref is not None
            raise EnvironmentProblem(f"{name}@{version} --from {self.spec.ref.text}: name "
                                     "the version once (NAME@VERSION or REPO:TAG)")
        if version is not None and DIGEST_RE.fullmatch(version):
            return self._by_digest(name, version)
        tag = self._newest() if version is None else (
            version_tag(version) if semver.is_semver(version) else version)
        body = self.repo.require_manifest(tag)  # offline: refused, naming REPO:TAG
        return self._release(name, tag, body)

    def _by_digest(self, name: str, digest: str) -> Release:
        if self.http.offline:
            known = next((p for p in self.memory.published.values() if p.manifest == digest),
                         None)
            if known is None:
                raise NetworkError(f"{self.ref.at_digest(digest).text} needs a download from "
                                   f"{self.ref.host}; offline")
            return Release(self.spec.key, name, "", coordinate(None, digest), 0, known.layer,
                           None)
        return self._release(name, None, self.repo.require_manifest(digest))

    def _release(self, name: str, tag: str | None, body: bytes) -> Release:
        manifest = digest_of(body)
        where = self.ref.at_tag(tag).text if tag else self.ref.at_digest(manifest).text
        artifact = parse_artifact(body, where)
        self.artifacts[manifest] = artifact
        version = tag_version(tag) if tag else None
        if version is None:
            version = next((tag_version(t) for t, p in self.memory.published.items()
                            if p.manifest == manifest), None)
        return Release(self.spec.key, name, version or "", coordinate(tag, manifest),
                       artifact.size, artifact.layer, self.repo.url(f"blobs/{artifact.layer}"))

    def _newest(self) -> str:
        tags = sorted(self.repo.tags())
        releases = []
        for tag in tags:
            version = tag_version(tag) if TAG_RE.fullmatch(tag) else None
            if version is not None and not semver.parse(version).is_prerelease:
                releases.append((semver.parse(version), tag))
        if not releases:
            shown = ", ".join(sorted(tags)[:20]) + (", ..." if len(tags) > 20 else "")
            raise SourceError(f"{self.ref.key} has no release tag (tags: {shown or 'none'})")
        return max(releases)[1]

    def fill(self, release: Release, write: Callable[[bytes], None]) -> None:
        self.repo.blob(release.digest, release.size, write)

    def first_check(self, release: Release, sha256: str) -> None:
        """Before anything parses the bytes: they must be the manifest's layer."""
        if f"sha256:{sha256}" != release.digest:
            raise SourceError(f"{self.where(release)}: the layer's sha256 is {sha256}, not "
                              f"the manifest's {release.digest[7:]}")

    def confirm(self, release: Release, identity: str, version: str, signed: str,
                layer: str, is_format: Callable[[str], bool]) -> str | None:
        """Refuse a bundle of another format than its manifest's media types name, and signed
        facts that disagree with the request or the repository's memory; accept them (for
        `remember`) otherwise.  Returns a note for a re-pushed release."""
        where = self.where(release)
        artifact = self.artifacts.get(split_coordinate(release.coordinate)[1])
        if artifact is not None and not is_format(artifact.format):
            raise SourceError(f"{where}: the layer is not the {artifact.format} bundle its "
                              f"manifest's artifactType names")
        if release.name and identity != release.name:
            raise SourceError(f"{where} is signed as {identity} {version}, not {release.name}")
        carries = self.memory.identity or self.accepted_identity
        if carries is not None and identity != carries:
            raise SourceError(f"{where} is signed as {identity}; {self.ref.key} carries "
                              f"{carries}")
        tag, manifest = split_coordinate(release.coordinate)
        if tag is not None and tag_version(tag) is not None and tag != version_tag(version):
            raise SourceError(f"{where} is signed as {identity} {version}")
        vtag = version_tag(version)
        known = self.memory.published.get(vtag) or self.accepted.get(vtag)
        note = None
        if known is not None and known.signed != signed:
            raise SourceError(f"{self.ref.key} changed {identity} {version} (signed manifest "
                              f"{known.signed}, now {signed}); published versions are "
                              "immutable")
        if known is not None and known.manifest != manifest:
            note = (f"acxfs: note: {self.ref.at_tag(vtag).text} was pushed again "
                    f"({known.manifest} is now {manifest}); the signed release is the same")
        self.accepted[vtag] = Published(manifest, layer, signed)
        self.accepted_identity = identity
        return note

    def remember(self, names: set[str], now: str) -> None:
        if self.accepted_identity is not None and self.memory.identity is None:
            self.memory.identity = self.accepted_identity
        self.memory.published.update(self.accepted)

    def status_of(self, name: str, version: str) -> Lifecycle | None:
        return None

