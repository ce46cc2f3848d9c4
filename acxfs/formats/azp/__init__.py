"""The azphalt skill package (.azp, a ZIP): its one row of the format table.

Invariant: this package is the only code that reads a package: `zip` reads the archive's
structure, `manifest` and `signature` its two signed documents, `check` decides the
verdict, `deep` hashes every payload entry, `source` serves verified bytes, `describe` and
`signer` answer inspect and trust add.
"""

from __future__ import annotations

import datetime as dt

from acxfs import verdict as v
from acxfs.container import Report, Source
from acxfs.content.cache import VerifiedCache
from acxfs.formats.azp import check as _check
from acxfs.formats.azp.deep import deep_check
from acxfs.formats.azp.describe import describe, render
from acxfs.formats.azp.signer import signer_key
from acxfs.formats.azp.source import open_source
from acxfs.formats.base import Format
from acxfs.limits import DEFAULT_LIMITS, Limits
from acxfs.trust.policy import TrustContext


def matches(head: bytes) -> bool:
    return head.startswith((b"PK\x03\x04", b"PK\x05\x06"))


def check_file(
    path: str, trust: TrustContext, *, deep: bool = False, limits: Limits = DEFAULT_LIMITS,
    now: dt.datetime | None = None,
) -> _check.AzpReport:
    """The package's report; with `deep`, every payload entry inflated and hashed as well."""
    with _check.open_package(path) as handle:
        report = _check.check_handle(handle, path, trust, limits, now or dt.datetime.now(dt.UTC))
        if deep and report.package is not None:
            deep_check(report, handle, limits)
    return report


class AzpFormat:
    """The format table's azp row (satisfies `acxfs.formats.base.Format`)."""

    name = "azp"
    matches = staticmethod(matches)
    describe = staticmethod(describe)
    render = staticmethod(render)
    signer_key = staticmethod(signer_key)
    identity = staticmethod(_check.identity)
    skills = staticmethod(_check.skills)

    def check(self, path: str, trust: TrustContext, *, deep: bool = False,
              limits: Limits = DEFAULT_LIMITS, now: dt.datetime | None = None) -> _check.AzpReport:
        return check_file(path, trust, deep=deep, limits=limits, now=now)

    def open(self, path: str, trust: TrustContext, cache: VerifiedCache, *,
             min_trust: v.MinTrust = "verified", with_save: bool = False,
             limits: Limits = DEFAULT_LIMITS) -> tuple[Source, Report]:
        return open_source(path, trust, cache, min_trust=min_trust, with_save=with_save,
                           limits=limits)


FORMAT: Format = AzpFormat()
