"""Opening any supported container: detect its format from its bytes, check it, build a source.

`check` is the non-raising report used by `verify` and `inspect`; `open_source` is the raising
path used by everything that serves bytes (`ls`, `cat`, `extract`, `mount`): it returns a
Source only when the verdict meets the required trust.
"""

from __future__ import annotations

import datetime as dt
import functools
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Literal

from acxfs import verdict as v
from acxfs.cartridge import CartridgeReport, check_cartridge
from acxfs.content import verify_content
from acxfs.errors import EnvironmentProblem, TamperError, UntrustedError
from acxfs.limits import DEFAULT_LIMITS, Limits
from acxfs.sources.acx import CartridgeSource
from acxfs.sources.acx_file import read_head
from acxfs.sources.base import Entry
from acxfs.trust import TrustContext

Format = Literal["acx", "azp"]


def detect_format(path: str) -> Format:
    """By the file's first bytes: SQLite header or ZIP local header (never the extension)."""
    head = read_head(path, 16)
    if head.startswith(b"PK\x03\x04") or head.startswith(b"PK\x05\x06"):
        return "azp"
    return "acx"


@dataclass
class Report:
    """What `verify` prints: the verdict, deep-check warnings, and the checked container."""

    verdict: v.Verdict
    format: Format
    cartridge: CartridgeReport | None = None
    warnings: list[str] = field(default_factory=list)


def check(
    path: str, trust: TrustContext, deep: bool = False, limits: Limits = DEFAULT_LIMITS,
    now: dt.datetime | None = None,
) -> Report:
    fmt = detect_format(path)
    if fmt == "azp":
        from acxfs.sources import azp

        return azp.check_report(path, trust, deep=deep, limits=limits)
    report = check_cartridge(path, trust, limits, now)
    result = Report(report.verdict, "acx", report)
    if deep and report.verified is not None:
        _deep_check(result, report, limits)
    return result


SMALL_BLOB = 1024 * 1024


def _deep_check(result: Report, report: CartridgeReport, limits: Limits) -> None:
    """Inflate and hash every ROM file; re-derive the skill index (differences are warnings)."""
    assert report.verified is not None
    source = CartridgeSource(report.verified, limits=limits)
    signed = result.verdict.status != "warning" or not (
        result.verdict.trust == "legacy" or result.verdict.unverified
    )
    pending = {e.ref: e for e in source.tree.files()}

    def check_one(entry: Entry, opener: Callable[[], Iterator[bytes]]) -> bool:
        """False when the check must stop (a signed file differs)."""
        if entry.digest is None:
            result.warnings.append(f"{entry.path} has no recorded digest")
            return True
        try:
            blob = verify_content(entry, opener, limits)
        except TamperError as exc:
            if signed:
                result.verdict = v.Verdict("tampered", v.CONTENT_DIVERGES)
                result.warnings.append(str(exc))
                return False
            result.warnings.append(f"{exc} (unsigned: corruption, not tampering)")
            return True
        if entry.path.count("/") == 3 and entry.path.startswith("rom/skills/") \
                and entry.name == "SKILL.md":
            _compare_index(result, report, entry.path, blob.read(0, blob.size))
        blob.close()
        return True

    try:
        for rowid, data in source.small_blobs(SMALL_BLOB):  # one scan for the many small files
            entry = pending.pop(rowid, None)
            if entry is None:
                continue
            if len(data) != entry.stored_size:
                data = b"\x00" * (entry.stored_size + 1)  # changed since the check: must fail
            if not check_one(entry, functools.partial(iter, [data])):
                return
        for entry in sorted(pending.values(), key=lambda e: e.path):
            if not check_one(entry, functools.partial(source.raw_chunks, entry)):
                return
    except TamperError as exc:
        result.verdict = v.Verdict("tampered", v.CONTENT_DIVERGES)
        result.warnings.append(str(exc))
    finally:
        source.close()


def _compare_index(result: Report, report: CartridgeReport, path: str, data: bytes) -> None:
    from acxfs.skills import SkillError, parse_skill  # YAML is needed only here

    assert report.rows is not None
    row = next((r for r in report.rows.skills if r.sqlar_path == path), None)
    if row is None:
        result.warnings.append(f"acx_skill has no row for {path}")
        return
    try:
        info = parse_skill(data, path.split("/")[2])
    except SkillError as exc:
        result.warnings.append(f"{path}: {exc}")
        return
    if (row.name, row.description) != (info.name, info.description):
        result.warnings.append(f"acx_skill row {path}: name/description differ from SKILL.md")


def open_source(
    path: str, trust: TrustContext, min_trust: v.MinTrust = "verified", with_save: bool = False,
    limits: Limits = DEFAULT_LIMITS,
) -> tuple[CartridgeSource, v.Verdict]:
    """A source for `path` if its verdict meets `min_trust`; UntrustedError otherwise."""
    fmt = detect_format(path)
    if fmt == "azp":
        from acxfs.sources import azp

        if with_save:
            raise EnvironmentProblem(f"{path} is an .azp package: it has no SAVE zone")
        return azp.open_source(path, trust, min_trust, limits=limits)  # type: ignore[return-value]
    report = check_cartridge(path, trust, limits)
    if report.verified is None or not report.verdict.allows(min_trust):
        raise UntrustedError(report.verdict)
    return CartridgeSource(report.verified, with_save=with_save, limits=limits), report.verdict
