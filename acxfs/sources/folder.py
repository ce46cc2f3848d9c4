"""A folder of bundle files as a source (as `sync --from` reads one): `add NAME --from DIR`
when DIR holds no `index.json`.

Invariant: only the folder's own regular files are read (no recursion, no link followed);
each is identified by acxfs's own check of its signed facts (never by its name); the release
offered is that file, its size and signed manifest, which the library then checks again in
full as the store copy.  Nothing here is trusted: a file that does not verify is skipped.
"""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass, field

from acxfs import formats
from acxfs.errors import AcxfsError, EnvironmentProblem
from acxfs.sources.http import Http
from acxfs.sources.memory import SourceMemory
from acxfs.sources.release import Lifecycle, Release, choose
from acxfs.sources.spec import SourceSpec
from acxfs.trust.policy import TrustContext


@dataclass
class Folder:
    spec: SourceSpec
    http: Http
    memory: SourceMemory
    found: dict[tuple[str, str], tuple[str, int, str]] = field(default_factory=dict)

    def load(self, allow_stale: bool) -> None:
        if self.found:
            return
        directory = self.spec.base_dir
        assert directory is not None
        try:
            names = sorted(os.listdir(directory))
        except OSError as exc:
            raise EnvironmentProblem(f"{directory}: {exc.strerror}") from None
        for name in names:
            path = os.path.join(directory, name)
            try:
                info = os.lstat(path)
                if not stat.S_ISREG(info.st_mode):
                    continue
                identity = formats.identity(formats.check(path, TrustContext()))
            except (AcxfsError, OSError):
                continue  # not a bundle acxfs can name
            self.found.setdefault((identity.name, identity.version),
                                  (path, info.st_size, identity.release))

    def release(self, name: str, version: str | None) -> Release:
        offered = [v for (n, v) in self.found if n == name]
        chosen = choose(self.spec.key, name, version, offered, lambda v: False)
        path, size, manifest = self.found[(name, chosen)]
        return Release(self.spec.key, name, chosen, os.path.basename(path), size, manifest,
                       None, path)

    def remember(self, names: set[str], now: str) -> None:
        pass

    def status_of(self, name: str, version: str) -> Lifecycle | None:
        return None
