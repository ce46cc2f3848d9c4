"""`sync` fetching a locked bundle from a registry or repository: by the lock's origin, bounded
by the lock's `bytes`, refused unless its sha256 is the lock's.

Invariant: the lock names bytes, so a source only delivers them: a `--from` registry (by the
entry's `path`) or the recorded origin is asked, the body may be at most exactly the lock's
`bytes`, and its sha256 must be the lock's before anything parses it; a mirror cannot
substitute another bundle, even one signed by a trusted key.  The full check follows as for
any bundle, against this machine's trust store.
"""

from __future__ import annotations

import os
from collections.abc import Callable

from acxfs import sources
from acxfs.errors import SourceError
from acxfs.library import lockfile
from acxfs.library.bundles import Checked, import_staged
from acxfs.library.lockfile import LockEntry
from acxfs.library.state import Revision
from acxfs.paths import LibraryPaths
from acxfs.sources.http import Http
from acxfs.sources.policy import Policy
from acxfs.sources.release import Release
from acxfs.sources.spec import AZPHALT, parse_source
from acxfs.trust.policy import TrustContext


def is_registry(source: str) -> bool:
    """Whether a `sync --from` names a registry or repository (else a folder of files)."""
    return "://" in source or any(os.path.isfile(os.path.join(source, *p, "index.json"))
                                  for p in ((), ("registry",)))


def fetch_locked(entry: LockEntry, registries: list[str], paths: LibraryPaths,
                 trust: TrustContext, http: Http, policy: Policy) -> Checked | None:
    """The locked bytes of `entry` from the first source that has them, checked in full; None
    when the entry has no origin or no source offers its file."""
    origin = lockfile.origin_of(entry.source_file)
    if origin is None:
        return None
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
            sources.fetch(release, kind, http, write)

        return import_staged(fill, paths, trust, same_bytes)
    return None


def origin_for(rev: Revision) -> str:
    """What a project records as the source of a revision fetched from a source."""
    key = rev.source or ""
    coordinate = rev.coordinate or ""
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
        bases = [s for s in registries if not s.startswith(AZPHALT)]
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
