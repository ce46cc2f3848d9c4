"""`add NAME[@VERSION] --from SOURCE`: releases fetched from sources into the bundle store.

Invariant: a release is fetched only after its source passed what acxfs remembers of it (no
rollback, no changed coordinate) and its lifecycle allows it; its bytes go straight into the
store's staging copy, bounded by the size the source names; an azphalt package's sha256 must
be the repository's digest before anything parses it; then the copy gets the full check, and
its signed identity, version and manifest must be exactly what the source named, or the copy
is removed.  What the sources said is recorded only with the change it belongs to, merged
into what the library holds of each source then (never over it).
"""

from __future__ import annotations

import dataclasses
import functools
import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from acxfs import formats
from acxfs.errors import NetworkError, RefusedError, SourceError, UntrustedError
from acxfs.formats import FORMATS
from acxfs.library.store.bundles import Checked, check_stored, import_staged, untrusted
from acxfs.library.store.state import LibraryState, now_text
from acxfs.paths import LibraryPaths
from acxfs.sources import kinds
from acxfs.sources.http import DEFAULT_TIMEOUT, Http
from acxfs.sources.memory import SourceMemory
from acxfs.sources.oci.source import OciSource
from acxfs.sources.policy import Policy
from acxfs.sources.release import Release, refuse_pulled
from acxfs.sources.revalidate import Revalidator
from acxfs.sources.spec import parse_source
from acxfs.trust.policy import TrustContext

Say = Callable[[str], None]


@dataclass(frozen=True)
class Options:
    """How one command reads its sources."""

    timeout: float = DEFAULT_TIMEOUT
    offline: bool = False
    allow_withdrawn: bool = False
    allow_stale: bool = False
    allow_key_change: bool = False
    policy: Policy = field(default_factory=Policy)


def split_name(text: str) -> tuple[str, str | None]:
    """`NAME[@VERSION]`."""
    name, at, version = text.partition("@")
    if not name or (at and not version):
        raise RefusedError(f"{text!r} is not NAME or NAME@VERSION")
    return name, version or None


@dataclass
class Sources:
    """The sources one command reads, each read once, with the memory of each."""

    options: Options
    state: LibraryState | None = None  # the library's, once its lock is held
    clients: dict[str, kinds.Client] = field(default_factory=dict)
    cache: Path | None = None  # the library's conditional-request cache (None: none)

    @functools.cached_property
    def http(self) -> Http:
        """One client for the command (its TLS context built once)."""
        return Http(timeout=self.options.timeout, offline=self.options.offline,
                    revalidator=None if self.cache is None else Revalidator(self.cache))

    def client(self, text: str, asking: str) -> kinds.Client:
        spec = parse_source(text)
        self.options.policy.check_source(spec.key)
        if spec.kind == "folder":
            self.options.policy.check_files()
        if spec.key not in self.clients:
            if spec.remote and self.options.offline and spec.kind != "oci":
                raise NetworkError(f"{asking} needs a download from {spec.key}; offline")
            assert self.state is not None
            known = self.state.sources.get(spec.key)
            memory = SourceMemory.from_doc(known.to_doc()) if known else SourceMemory()
            client = kinds.client_for(spec, self.http, memory, self.options.policy)
            client.load(self.options.allow_stale)
            self.clients[spec.key] = client
        return self.clients[spec.key]

    def record(self, after: LibraryState, names: dict[str, set[str]]) -> None:
        """Put what each source said into the state after the change (`after`: worked out
        from the state read under the lock), merged into what it holds of that source: a
        command that recorded since this one read its sources loses nothing."""
        now = now_text()
        for key, client in self.clients.items():
            client.remember(names.get(key, set()) | _known_names(client.memory), now)
            held = after.sources.get(key)
            after.sources[key] = client.memory if held is None else held.merged(client.memory)


def _known_names(memory: SourceMemory) -> set[str]:
    return {coordinate.rsplit(" ", 1)[0] for coordinate in memory.coordinates}


@dataclass
class Fetch:
    """A `Remote` for `Library.add`: the named releases, each from its source."""

    requests: list[tuple[str, str | None, str]]  # (name, version or None, source)
    reader: Sources
    paths: LibraryPaths
    note: Say
    fetched: dict[str, set[str]] = field(default_factory=dict)  # source -> names installed

    def fetch(self, state: LibraryState, trust: TrustContext) -> Iterator[tuple[str, Checked]]:
        self.reader.state = state
        for name, version, source in self.requests:
            asking = name if version is None else f"{name} {version}"
            client = self.reader.client(source, asking)
            release = client.release(name, version)
            if isinstance(client, OciSource):
                checked = self._import_oci(client, release, trust)
                rev = checked.revision
                self.fetched.setdefault(client.spec.key, set()).add(rev.identity)
                yield f"{rev.identity} {rev.version}", checked
                continue
            refuse_pulled(release, self.reader.options.allow_withdrawn)
            if client.spec.kind == "registry":  # the coordinate's publisher, before download
                self.reader.options.policy.check_publisher(release.name.split("/", 1)[0])
            self._tell(release)
            if release.url is not None and self.reader.options.offline:
                raise NetworkError(f"{release.label} needs a download from {release.url}; "
                                   "offline")
            checked = self._import(client, release, trust)
            self.fetched.setdefault(client.spec.key, set()).add(release.name)
            yield release.label, checked

    def record(self, after: LibraryState) -> None:
        self.reader.record(after, self.fetched)

    def _tell(self, release: Release) -> None:
        life = release.lifecycle
        if life is None or life.pulled:
            if life is not None:
                self.note(f"acxfs: warning: installing {release.label}, {life.status} "
                          f"({release.source}): {life.reason}")
            return
        if life.status == "deprecated":
            self.note(f"acxfs: warning: {release.label} is deprecated ({release.source}, "
                      f"{(life.date or '')[:10]}): {life.reason}")
        elif life.status == "superseded":
            self.note(f"acxfs: note: {release.label} is superseded by {life.successor} "
                      f"({release.source}): {life.reason}")

    def _import_oci(self, client: OciSource, release: Release,
                    trust: TrustContext) -> Checked:
        """The layer from the store when it holds its sha256, else downloaded into the
        store's copy (its sha256 checked first); then the signed facts against the request
        and the repository's memory."""
        where = client.where(release)
        stored = next((name for name in (f"{release.digest[7:]}.{f.name}" for f in FORMATS)
                       if os.path.lexists(self.paths.store / name)), None)
        try:
            if stored is not None:
                result = check_stored(stored, self.paths, trust)
                client.first_check(release, result.revision.digest)
            elif release.url is None:
                raise NetworkError(f"{where} needs a download from {client.ref.host}; offline")
            else:
                result = import_staged(lambda write: client.fill(release, write), self.paths,
                                       trust, lambda sha256: client.first_check(release, sha256))
        except UntrustedError as exc:
            raise untrusted(where, exc, file=False) from exc
        rev = result.revision
        try:
            note = client.confirm(release, rev.identity, rev.version, rev.manifest,
                                  f"sha256:{rev.digest}",
                                  lambda name: formats.named(result.report, name))
        except SourceError:
            result.discard(self.paths)
            raise
        if note is not None:
            self.note(note)
        revision = dataclasses.replace(rev, source=client.spec.key,
                                       coordinate=release.coordinate, lifecycle=None)
        return Checked(revision, result.report, result.new_file)

    def _import(self, client: kinds.Client, release: Release,
                trust: TrustContext) -> Checked:
        spec = client.spec
        where = release.url or release.local or release.coordinate
        azphalt = spec.kind == "azphalt"

        def digest_first(sha256: str) -> None:
            if azphalt and f"sha256-{sha256}" != release.digest:
                raise SourceError(f"{where}: sha256-{sha256}, not the digest {spec.key} names")

        try:
            result = import_staged(
                lambda write: kinds.fetch(release, spec.kind, self.reader.http, write),
                self.paths, trust, digest_first)
        except UntrustedError as exc:
            raise untrusted(where, exc, file=release.url is None) from exc
        rev = result.revision
        try:
            if (rev.identity, rev.version) != (release.name, release.version):
                raise SourceError(f"{where} is signed as {rev.identity} {rev.version}, not "
                                  f"{release.label}")
            if not azphalt and rev.manifest != release.digest:
                raise SourceError(f"{where}: signed manifest {rev.manifest}, index.json names "
                                  f"{release.digest}")
        except SourceError:
            result.discard(self.paths)
            raise
        life = release.lifecycle.describe() if release.lifecycle else None
        revision = dataclasses.replace(rev, source=spec.key, coordinate=release.coordinate,
                                       lifecycle=life)
        return Checked(revision, result.report, result.new_file)
