"""Where bundles come from besides a file the user names: ACX registries (a directory or
HTTPS), azphalt repositories and OCI registries.

Invariant: this package reads sources and says what they offer (`Release`s, unsigned), and
`oci.push` publishes a verified bundle; it installs nothing and imports nothing of
`acxfs.library`.  Every byte it hands on is bounded,
and every claim it hands on is checked by the library against the bundle's signed facts.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

from acxfs.sources import azphalt, folder, registry
from acxfs.sources.http import Http
from acxfs.sources.memory import SourceMemory
from acxfs.sources.oci.source import OciSource
from acxfs.sources.policy import Policy
from acxfs.sources.release import Lifecycle, Release
from acxfs.sources.spec import SourceSpec, parse_source

__all__ = ["Client", "Http", "Release", "SourceMemory", "SourceSpec", "client_for",
           "parse_source"]


class Client(Protocol):
    spec: SourceSpec
    memory: SourceMemory

    def load(self, allow_stale: bool) -> None: ...

    def release(self, name: str, version: str | None) -> Release: ...

    def remember(self, names: set[str], now: str) -> None: ...

    def status_of(self, name: str, version: str) -> Lifecycle | None: ...


def client_for(spec: SourceSpec, http: Http, memory: SourceMemory,
               policy: Policy | None = None) -> Client:
    if spec.kind == "azphalt":
        return azphalt.AzphaltRepository(spec, http, memory)
    if spec.kind == "folder":
        return folder.Folder(spec, http, memory)
    if spec.kind == "oci":
        return OciSource(spec, http, memory)
    return registry.AcxRegistry(spec, http, memory, policy or Policy())


def fetch(release: Release, kind: str, http: Http, sink: Callable[[bytes], None]) -> None:
    """The bytes of `release` into `sink`, exactly its stated size."""
    if kind == "azphalt":
        azphalt.download(release, http, sink)
    else:
        registry.fetch_release(release, http, sink)
