"""The azphalt skill package (.azp, a ZIP): its one row of the format table.

Invariant: this package is the only code that reads a package: `zip` reads the archive's
structure, `manifest` and `signature` its two signed documents, `check` decides the
verdict, `deep` hashes every payload entry, `source` serves verified bytes, `describe` and
`signer` answer inspect and trust add.
"""

from __future__ import annotations

import datetime as dt

from acxfs.formats.azp import check as _check
from acxfs.formats.azp.deep import deep_check
from acxfs.formats.azp.describe import describe, render
from acxfs.formats.azp.signer import signer_key
from acxfs.formats.azp.source import open_source
from acxfs.formats.base import Format, FormatRow
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


FORMAT: Format = FormatRow(
    name="azp", matches=matches, check=check_file, open=open_source, describe=describe,
    render=render, signer_key=signer_key, identity=_check.identity, skills=_check.skills,
    facts=_check.facts,
)
