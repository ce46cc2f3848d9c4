"""Every kind of source behind one table: ACX registries (a directory or HTTPS), plain
folders of bundles, azphalt repositories and OCI registries.

Invariant: a source is read through the `Client` its kind's entry makes (`client_for`), and a
release's bytes are fetched as its kind says (`fetch`).  Importing this module imports every
client, so only the commands that read a source import it.
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
from acxfs.sources.spec import SourceSpec

__all__ = ["Client", "client_for", "fetch"]


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
