"""An azphalt Repository API as a source: a package's versions, its downloads, the
revocations feed.

Invariant: every answer is bounded (4 MiB of JSON, a download exactly its `size`) and read
strictly; `GET /packages/ID` must name that id and `kind: "skill"`; a version is chosen as
`@VERSION`, else the newest that is neither yanked nor revoked.  The repository's own
`signingKeys` are never fetched: trust comes from the package's signatures and the user's
pins only.  401 and 402 are refused with the server's `error.code` and `message`.
"""

from __future__ import annotations

import re
import urllib.parse
from collections.abc import Callable
from dataclasses import dataclass, field

from acxfs import semver
from acxfs.errors import NetworkError, SourceError
from acxfs.safe import strict_json
from acxfs.sources.acx_index import instant
from acxfs.sources.http import MIB, Answer, Http, retry_after_of
from acxfs.sources.memory import SourceMemory
from acxfs.sources.release import Lifecycle, Release, choose
from acxfs.sources.spec import SourceSpec

JSON_LIMIT = 4 * MIB
DIGEST = re.compile(r"sha256-[0-9a-f]{64}")
PACKAGE_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}")


@dataclass(frozen=True)
class Version:
    version: str
    size: int
    digest: str
    yanked: bool


@dataclass
class AzphaltRepository:
    spec: SourceSpec
    http: Http
    memory: SourceMemory
    revoked: dict[str, Lifecycle] = field(default_factory=dict)  # "ID VERSION" -> revocation
    newest_revoked: str | None = None
    yanked: dict[tuple[str, str], Lifecycle] = field(default_factory=dict)
    _loaded: bool = False

    @property
    def base(self) -> str:
        assert self.spec.base_url is not None
        return self.spec.base_url

    def load(self, allow_stale: bool) -> None:
        """Read the revocations feed (since the newest one remembered)."""
        if self._loaded:
            return
        url = self.base + "revocations"
        if self.memory.revoked_at:
            url += "?since=" + urllib.parse.quote(self.memory.revoked_at)
        doc = self._json(url)
        items = doc.get("revocations")
        if not isinstance(items, list):
            raise SourceError(f"{url}: revocations: not a list")
        for n, item in enumerate(items):
            if not isinstance(item, dict):
                raise SourceError(f"{url}: revocations[{n}]: not an object")
            ident, version, at = item.get("id"), item.get("version"), item.get("revokedAt")
            reason = item.get("reason")
            if not isinstance(ident, str) or not isinstance(version, str) \
                    or not isinstance(at, str) or not (reason is None or isinstance(reason, str)):
                raise SourceError(f"{url}: revocations[{n}]: missing or malformed fields")
            try:
                instant(at)
            except ValueError:
                raise SourceError(f"{url}: revocations[{n}].revokedAt: not a date-time") from None
            self.revoked[f"{ident} {version}"] = Lifecycle("revoked", at, reason)
            if self.newest_revoked is None or instant(at) > instant(self.newest_revoked):
                self.newest_revoked = at
        self._loaded = True

    def lifecycle(self, ident: str, v: Version) -> Lifecycle | None:
        coordinate = f"{ident} {v.version}"
        found = self.revoked.get(coordinate) or self.memory.pulled.get(coordinate)
        if found is not None:
            return found
        if not v.yanked:
            return None
        life = Lifecycle("yanked", None, "yanked by the repository")
        self.yanked[(ident, v.version)] = life
        return life

    def status_of(self, name: str, version: str) -> Lifecycle | None:
        for v in self.versions(name):
            if v.version == version:
                return self.lifecycle(name, v)
        coordinate = f"{name} {version}"
        return self.revoked.get(coordinate) or self.memory.pulled.get(coordinate)

    def versions(self, ident: str) -> list[Version]:
        if not PACKAGE_ID.fullmatch(ident):
            raise SourceError(f"{ident!r} is not an azphalt package id")
        url = self.base + "packages/" + urllib.parse.quote(ident)
        doc = self._json(url)
        if doc.get("id") != ident:
            raise SourceError(f"{url}: names {doc.get('id')!r}, not {ident}")
        if doc.get("kind") != "skill":
            raise SourceError(f"{url}: kind {doc.get('kind')!r}, not \"skill\"")
        items = doc.get("versions")
        if not isinstance(items, list):
            raise SourceError(f"{url}: versions: not a list")
        out: list[Version] = []
        for n, item in enumerate(items):
            if not isinstance(item, dict):
                raise SourceError(f"{url}: versions[{n}]: not an object")
            version, size = item.get("version"), item.get("size")
            digest, yanked = item.get("digest"), item.get("yanked", False)
            if not isinstance(version, str) or not semver.is_semver(version):
                raise SourceError(f"{url}: versions[{n}].version: not a SemVer version")
            if not isinstance(size, int) or isinstance(size, bool) or size < 1:
                raise SourceError(f"{url}: versions[{n}].size: not a positive integer")
            if not isinstance(digest, str) or not DIGEST.fullmatch(digest):
                raise SourceError(f"{url}: versions[{n}].digest: not sha256-<hex>")
            if not isinstance(yanked, bool):
                raise SourceError(f"{url}: versions[{n}].yanked: not true or false")
            out.append(Version(version, size, digest, yanked))
        return out

    def release(self, ident: str, version: str | None) -> Release:
        by = {v.version: v for v in self.versions(ident)}
        chosen = choose(self.spec.key, ident, version, list(by),
                        lambda v: (life := self.lifecycle(ident, by[v])) is not None
                        and life.pulled)
        v = by[chosen]
        url = (f"{self.base}packages/{urllib.parse.quote(ident)}/versions/"
               f"{urllib.parse.quote(v.version)}/download")
        return Release(self.spec.key, ident, v.version, f"{ident}@{v.version}", v.size,
                       v.digest, url, None, self.lifecycle(ident, v))

    def remember(self, names: set[str], now: str) -> None:
        for (ident, version), life in self.yanked.items():
            self.memory.remember_pulled(f"{ident} {version}", life)
        if self.newest_revoked is not None:
            self.memory.accept_revoked(self.newest_revoked)
        for coordinate, life in self.revoked.items():
            self.memory.remember_pulled(coordinate, life)

    def _json(self, url: str) -> dict[str, object]:
        answer = self.http.fetch(url, limit=JSON_LIMIT, errors_ok=True, what=url,
                                 revalidate=True)
        if answer.status != 200:
            raise refusal(url, answer)
        try:
            doc = strict_json.loads(answer.body.decode("utf-8"))
        except (UnicodeDecodeError, ValueError) as exc:
            raise SourceError(f"{url}: not strict JSON ({exc})") from None
        if not isinstance(doc, dict):
            raise SourceError(f"{url}: not a JSON object")
        return doc


def refusal(url: str, answer: Answer) -> SourceError | NetworkError:
    """A non-200 answer, with the repository's error envelope when it has one."""
    code, message, status = "", "", answer.status
    try:
        doc = strict_json.loads(answer.body.decode("utf-8"))
        error = doc.get("error") if isinstance(doc, dict) else None
        if isinstance(error, dict):
            code, message = str(error.get("code", "")), str(error.get("message", ""))
    except (UnicodeDecodeError, ValueError):
        pass
    said = f": {code}: {message}" if code or message else ""
    if status in (401, 402):
        return SourceError(f"{url}: refused by the repository (HTTP {status}){said}")
    return NetworkError(f"{url}: HTTP {status}{said}", retry_after_of(answer))


def download(release: Release, http: Http, sink: Callable[[bytes], None]) -> None:
    assert release.url is not None
    answer = http.fetch(release.url, size=release.size, sink=sink, errors_ok=True,
                        what=release.label)
    if answer.status != 200:
        raise refusal(release.url, answer)
