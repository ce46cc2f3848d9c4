"""An ACX registry as a source: its index and ledger, read once per command, checked against
what acxfs remembers, and the release a request names.

Invariant: a directory source and an HTTP(S) source are read through the same bounds (16 MiB
for `index.json` and `status.json`, a bundle exactly its `bytes`); a missing `status.json`
means no entries; an index or ledger older than the one remembered, or a remembered
coordinate with another digest, refuses the whole source before any bundle is fetched.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass, field

from acxfs.errors import EnvironmentProblem, SourceError
from acxfs.safe.inputs import open_input
from acxfs.sources import acx_index
from acxfs.sources.http import CHUNK, MIB, Http, mib, status_error
from acxfs.sources.memory import SourceMemory
from acxfs.sources.policy import Policy
from acxfs.sources.release import Lifecycle, Release, choose
from acxfs.sources.spec import SourceSpec

INDEX_LIMIT = 16 * MIB


@dataclass
class AcxRegistry:
    spec: SourceSpec
    http: Http
    memory: SourceMemory
    policy: Policy = field(default_factory=Policy)
    index: acx_index.Index | None = None
    status: acx_index.Status | None = None

    def load(self, allow_stale: bool) -> None:
        """Read `index.json` and `status.json` (once), refusing a rollback or a change."""
        if self.index is not None:
            return
        where = self.spec.where("index.json")
        body = self._read("index.json", INDEX_LIMIT)
        if body is None:
            raise SourceError(f"{where}: not found")
        index = acx_index.parse_index(body, where)
        self.memory.check_time(where, "generated", index.generated_at, allow_stale)
        self.policy.check_index_age(where, acx_index.instant(index.generated_at))
        status_where = self.spec.where("status.json")
        status_body = self._read("status.json", INDEX_LIMIT)
        status = (acx_index.Status("", {}) if status_body is None
                  else acx_index.parse_status(status_body, status_where))
        if status.updated_at:
            self.memory.check_time(status_where, "updated", status.updated_at, allow_stale)
        for cart in index.cartridges:
            self.memory.check_coordinate(self.spec.key, cart.coordinate, cart.digest)
        self.index, self.status = index, status

    def lifecycle(self, cart: acx_index.Cartridge) -> Lifecycle | None:
        assert self.status is not None
        said = self.status.entries.get((cart.coordinate, cart.digest))
        kept = self.memory.pulled.get(cart.coordinate)
        if kept is not None and (said is None or not said.pulled):
            return kept  # a withdrawal the ledger dropped stays in force
        return said

    def status_of(self, name: str, version: str) -> Lifecycle | None:
        """The lifecycle of an installed release (remembered, if the index dropped it)."""
        assert self.index is not None
        for cart in self.index.cartridges:
            if cart.name == name and cart.version == version:
                return self.lifecycle(cart)
        return self.memory.pulled.get(f"{name} {version}")

    def release(self, name: str, version: str | None) -> Release:
        assert self.index is not None
        carts = {c.version: c for c in acx_index.releases_of(self.index, name)}
        chosen = choose(self.spec.key, name, version, list(carts),
                        lambda v: (life := self.lifecycle(carts[v])) is not None and life.pulled)
        cart = carts[chosen]
        url = None if self.spec.base_url is None else self.spec.base_url + cart.path
        local = None if self.spec.base_dir is None else os.path.join(self.spec.base_dir,
                                                                       cart.path)
        return Release(self.spec.key, name, cart.version, cart.path, cart.bytes, cart.digest,
                       url, local, self.lifecycle(cart))

    def remember(self, names: set[str], now: str) -> None:
        """After an install: the index's times, every coordinate of `names`, pulled ones."""
        assert self.index is not None and self.status is not None
        self.memory.accept_time("generated", self.index.generated_at, now)
        if self.status.updated_at:
            self.memory.accept_time("updated", self.status.updated_at, now)
        for cart in self.index.cartridges:
            if cart.name in names:
                self.memory.coordinates[cart.coordinate] = cart.digest
            life = self.lifecycle(cart)
            if life is not None:
                self.memory.remember_pulled(cart.coordinate, life)

    def _read(self, name: str, limit: int) -> bytes | None:
        if self.spec.base_url is not None:
            url = self.spec.base_url + name
            answer = self.http.fetch(url, limit=limit, errors_ok=True, what=url,
                                     revalidate=True)
            if answer.status == 404:
                return None
            if answer.status != 200:
                raise status_error(url, answer)
            return answer.body
        path = self.spec.where(name)
        try:
            with open_input(path) as f:
                body = f.read(limit + 1)
        except FileNotFoundError:
            return None
        except OSError as exc:
            raise EnvironmentProblem(f"{path}: {exc.strerror or exc}") from None
        if len(body) > limit:
            raise SourceError(f"{path}: over {mib(limit)}")
        return body


def fetch_release(release: Release, http: Http, sink: Callable[[bytes], None]) -> None:
    """The bytes of `release`, exactly its size, chunk by chunk into `sink`."""
    if release.url is not None:
        http.fetch(release.url, size=release.size, sink=sink, what=release.label)
        return
    assert release.local is not None
    try:
        with open_input(release.local) as f:
            got = 0
            while chunk := f.read(min(CHUNK, release.size + 1 - got)):
                got += len(chunk)
                if got > release.size:
                    raise SourceError(f"{release.local}: more than {release.size} bytes, "
                                      "its stated size")
                sink(chunk)
    except FileNotFoundError:
        raise SourceError(f"{release.local}: not found (the index names it)") from None
    except OSError as exc:
        raise EnvironmentProblem(f"{release.local}: {exc.strerror or exc}") from None
    if got != release.size:
        raise SourceError(f"{release.local}: {got} bytes, not {release.size}")
