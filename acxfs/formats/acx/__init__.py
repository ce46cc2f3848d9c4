"""The ACX 0.1 Agent Cartridge (.acx, a SQLite database): its one row of the format table.

Invariant: this package is the only code that reads a cartridge: `rows` reads structure,
`check` decides the verdict, `deep` hashes every ROM file, `source` serves verified bytes,
`describe` and `signer` answer inspect and trust add, `pack` writes cartridges.
"""

from __future__ import annotations

import datetime as dt

from acxfs.formats.acx import check as _check
from acxfs.formats.acx.connection import ConnectionPool, PinnedFile, pinned
from acxfs.formats.acx.deep import deep_check
from acxfs.formats.acx.describe import describe, render
from acxfs.formats.acx.schema import SQLITE_MAGIC
from acxfs.formats.acx.signer import signer_key
from acxfs.formats.acx.source import open_source
from acxfs.formats.base import Format, FormatRow
from acxfs.limits import DEFAULT_LIMITS, Limits
from acxfs.trust.policy import TrustContext


def matches(head: bytes) -> bool:
    return head.startswith(SQLITE_MAGIC[:15])


def check_file(
    path: str, trust: TrustContext, *, deep: bool = False, limits: Limits = DEFAULT_LIMITS,
    now: dt.datetime | None = None,
) -> _check.AcxReport:
    """The cartridge's report; with `deep`, every ROM file inflated and hashed as well, from
    the file the shallow check read (one descriptor pins it for both, as for a mount)."""
    pin = PinnedFile(path, keep=deep)  # a deep check reads on through the check's connection
    try:
        with pinned(pin):
            result = _check.report_of(_check.check_cartridge(path, trust, limits, now))
        if not deep or result.cartridge is None:
            return result
        pool = ConnectionPool.serving(pin)
    finally:
        pin.close()
    try:
        deep_check(result, pool, limits)
    finally:
        pool.close()
    return result


FORMAT: Format = FormatRow(
    name="acx", matches=matches, check=check_file, open=open_source, describe=describe,
    render=render, signer_key=signer_key, identity=_check.identity, skills=_check.skills,
    facts=_check.facts,
)
