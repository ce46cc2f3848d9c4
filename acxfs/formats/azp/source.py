"""The azphalt package source: a checked package's tree, served as verified bytes only.

Invariant: an `AzpSource` is built only from a `Package` whose checks passed and whose
verdict met the required trust; it reads each entry's stored bytes with `os.pread` from the
descriptor the check used (so the bytes served are those checked), and its only byte API
(`blob`, `read`) goes through the process's `VerifiedCache`, which inflates them within the
central-directory size and releases them only when their sha256 is the manifest digest.
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Iterator
from typing import BinaryIO

from acxfs import verdict as v
from acxfs.container import Entry
from acxfs.content.cache import VerifiedCache
from acxfs.errors import EnvironmentProblem, TamperError, UntrustedError
from acxfs.formats.azp.check import SKILL_ONLY, AzpReport, Package, check_handle, open_package
from acxfs.formats.azp.manifest import SKILLS_ROOT
from acxfs.formats.azp.zip import stored_chunks
from acxfs.formats.base import StoredSource
from acxfs.limits import DEFAULT_LIMITS, Limits
from acxfs.trust.policy import TrustContext


class AzpSource(StoredSource):
    """Serves one checked package from the open file it was checked through."""

    skills_root = SKILLS_ROOT

    def __init__(
        self, package: Package, handle: BinaryIO, cache: VerifiedCache,
        limits: Limits = DEFAULT_LIMITS,
    ) -> None:
        super().__init__(package.tree, package.path, cache, limits)
        self._handle: BinaryIO | None = handle
        self._offsets = package.offsets

    def _stored_chunks(self, entry: Entry) -> Iterator[bytes]:
        if self._handle is None:
            raise TamperError(f"{entry.path} is not in this package", entry.path)
        return package_chunks(self._handle.fileno(), self._offsets, entry, self._step,
                              self.label)

    def _release(self) -> None:
        handle, self._handle = self._handle, None
        if handle is not None:
            handle.close()


def package_chunks(
    fd: int, offsets: dict[int, int], entry: Entry, step: int, label: str
) -> Iterator[bytes]:
    """The entry's stored bytes (at most its central-directory compressed size), for
    `acxfs.content.cache` only."""
    offset = offsets.get(entry.ref)
    if offset is None:
        raise TamperError(f"{entry.path} is not in this package", entry.path)
    try:
        yield from stored_chunks(fd, offset, entry.stored_size, step)
    except OSError as exc:
        raise EnvironmentProblem(f"{label}: cannot read ({exc.strerror})") from exc


def open_source(
    path: str, trust: TrustContext, cache: VerifiedCache, *, min_trust: v.MinTrust = "verified",
    with_save: bool = False, limits: Limits = DEFAULT_LIMITS,
) -> tuple[AzpSource, AzpReport]:
    """A source for a kind "skill" package whose verdict allows `min_trust`; else UntrustedError.

    The check and the source share one open file, so the bytes served are those checked."""
    if with_save:
        raise EnvironmentProblem(f"{path} is an .azp package: it has no SAVE zone")
    handle = open_package(path)
    try:
        report = check_handle(handle, path, trust, limits, dt.datetime.now(dt.UTC))
        package = report.package
        if package is None:
            raise UntrustedError(report.verdict)
        if package.kind != "skill":
            raise UntrustedError(v.Verdict(
                "incompatible", f"{SKILL_ONLY}; this one is kind {json.dumps(package.kind)}."))
        if not report.verdict.allows(min_trust):
            raise UntrustedError(report.verdict)
        return AzpSource(package, handle, cache, limits), report
    except BaseException:
        handle.close()
        raise
