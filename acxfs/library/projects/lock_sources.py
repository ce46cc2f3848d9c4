"""`sync` fetching a locked bundle from a registry or repository: by the lock's origin, bounded
by the lock's `bytes`, refused unless its sha256 is the lock's.

Invariant: the lock names bytes, so a source only delivers them: a `--from` registry (by the
entry's `path`; an OCI repository by the locked manifest digest, the first that holds it) or
the recorded origin is asked, the body may be at most exactly the lock's
`bytes`, and its sha256 must be the lock's before anything parses it; a mirror cannot
substitute another bundle, even one signed by a trusted key.  The full check follows as for
any bundle, against this machine's trust store.
"""

from __future__ import annotations

import os
from collections.abc import Callable

from acxfs.errors import SourceError
from acxfs.library.store import lockfile
from acxfs.library.store.bundles import Checked, import_staged
from acxfs.library.store.lockfile import LockEntry
from acxfs.library.store.state import Revision
from acxfs.paths import LibraryPaths
from acxfs.sources import kinds
from acxfs.sources.http import Http
from acxfs.sources.oci.artifact import parse_artifact
from acxfs.sources.oci.reference import is_oci, parse_ref, split_coordinate
from acxfs.sources.oci.repository import Repository
from acxfs.sources.policy import Policy
from acxfs.sources.release import Release
from acxfs.sources.spec import AZPHALT, parse_source
from acxfs.trust.policy import TrustContext


def fetch_locked(entry: LockEntry, registries: list[str], paths: LibraryPaths,
                 trust: TrustContext, http: Http, policy: Policy,
                 lock_path: str) -> Checked | None:
    """The locked bytes of `entry` from the first source that has them, checked in full; None
    when the entry has no origin or no source offers its file."""
    origin = lockfile.origin_of(entry.source_file)
    if origin is None:
        return None
    if "oci" in origin:
        return _from_oci(entry, str(origin["oci"]), str(origin["digest"]),
                         [s for s in registries if is_oci(s)], paths, trust, http, policy,
                         lock_path)
    for release, kind in _candidates(entry, origin, registries):
        if release.local is not None and not os.path.isfile(release.local):
            continue
        policy.check_source(release.source)
        where = release.url or release.local or ""

        def same_bytes(sha256: str, where: str = where) -> None:
            if sha256 != entry.sha256:
                raise SourceError(f"{where}: sha256 {sha256}, not the lock's {entry.sha256}; "
                                  "a mirror cannot substitute")

        def fill(write: Callable[[bytes], None], release: Release = release,
                 kind: str = kind) -> None:
            kinds.fetch(release, kind, http, write)

        return import_staged(fill, paths, trust, same_bytes)
    return None


def _from_oci(entry: LockEntry, origin: str, digest: str, mirrors: list[str],
              paths: LibraryPaths, trust: TrustContext, http: Http, policy: Policy,
              lock_path: str) -> Checked:
    """`REPO@digest` (each --from repository in turn, then the lock's: the first that holds
    the manifest), never a tag: its manifest must name the lock's sha256 and size as its layer
    before the layer is fetched."""
    refs = list(dict.fromkeys(parse_ref(text).at_tag(None) for text in [*mirrors, origin]))
    for ref in refs:
        policy.check_source(ref.key)
        repo = Repository(ref, http)
        body = repo.manifest(digest)  # offline: refused, naming REPO@DIGEST
        if body is not None:
            return _locked_layer(entry, repo, body, ref.at_digest(digest).text, paths, trust,
                                 lock_path)
    raise SourceError(f"{refs[-1].at_digest(digest).text}: MANIFEST_UNKNOWN: manifest unknown")


def _locked_layer(entry: LockEntry, repo: Repository, body: bytes, where: str,
                  paths: LibraryPaths, trust: TrustContext, lock_path: str) -> Checked:
    artifact = parse_artifact(body, where)
    if artifact.layer != f"sha256:{entry.sha256}":
        raise SourceError(f"{lock_path}: {entry.identity}: sha256 differs (lock "
                          f"{entry.sha256}, {where} holds {artifact.layer[7:]})")
    if artifact.size != entry.bytes:
        raise SourceError(f"{lock_path}: {entry.identity}: bytes differ (lock {entry.bytes}, "
                          f"{where} names {artifact.size})")

    def same_bytes(sha256: str) -> None:
        if sha256 != entry.sha256:
            raise SourceError(f"{where}: the layer's sha256 is {sha256}, not the manifest's "
                              f"{entry.sha256}")

    return import_staged(lambda write: repo.blob(artifact.layer, entry.bytes, write), paths,
                         trust, same_bytes)


def origin_for(rev: Revision) -> str:
    """What a project records as the source of a revision fetched from a source."""
    key = rev.source or ""
    coordinate = rev.coordinate or ""
    if is_oci(key):
        tag, manifest = split_coordinate(coordinate)
        return lockfile.origin_text({"oci": key, "digest": manifest, "tag": tag})
    if not key.startswith(AZPHALT) and not coordinate.startswith("cartridges/"):
        return coordinate  # a file of a folder of bundles: recorded as a file
    if key.startswith(AZPHALT):
        return lockfile.origin_text({"azphalt": key[len(AZPHALT):], "id": rev.identity,
                                     "version": rev.version})
    return lockfile.origin_text({"registry": key if "://" in key else None,
                                 "path": rev.coordinate})


def _candidates(entry: LockEntry, origin: lockfile.Origin,
                registries: list[str]) -> list[tuple[Release, str]]:
    found: list[tuple[Release, str]] = []
    label = f"{entry.identity} {entry.version}"
    if "path" in origin:
        path = str(origin["path"])
        bases = [s for s in registries if not s.startswith(AZPHALT) and not is_oci(s)]
        if origin["registry"] is not None:
            bases.append(str(origin["registry"]))
        for base in bases:
            spec = parse_source(base)
            url = None if spec.base_url is None else spec.base_url + path
            local = None if spec.base_dir is None else os.path.join(spec.base_dir, path)
            found.append((Release(spec.key, entry.identity, entry.version, path, entry.bytes,
                                  "", url, local), "registry"))
        return found
    bases = [s for s in registries if s.startswith(AZPHALT)] + [AZPHALT + str(origin["azphalt"])]
    for base in bases:
        spec = parse_source(base)
        assert spec.base_url is not None
        url = (f"{spec.base_url}packages/{origin['id']}/versions/{origin['version']}/download")
        found.append((Release(spec.key, entry.identity, entry.version, label, entry.bytes, "",
                              url), "azphalt"))
    return found
