"""`acxfs verify` (not `--quick`) for a cartridge: hash every ROM file, re-derive the index.

Invariant: every ROM file of a cartridge that passed its shallow check is read from its
stored row and verified by `acxfs.content.rule.verify_content`; a signed file that differs makes
the verdict tampered (an unsigned one is a warning: corruption, not tampering), and a skill
index row that disagrees with its SKILL.md is a warning.  Nothing is served from here.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterator

from acxfs import verdict as v
from acxfs.container import Entry
from acxfs.content.rule import verify_content
from acxfs.errors import SkillError, TamperError
from acxfs.formats.acx.check import AcxReport
from acxfs.formats.acx.connection import ConnectionPool
from acxfs.formats.acx.source import small_rows, stored_chunks
from acxfs.limits import Limits
from acxfs.skills import IndexRow, parse_skill

SMALL_BLOB = 1024 * 1024


def deep_check(result: AcxReport, pool: ConnectionPool, limits: Limits) -> None:
    """Inflate and hash every ROM file, read through `pool` (on the file the shallow check
    read); re-derive the skill index (differences are warnings)."""
    cartridge = result.cartridge
    assert cartridge is not None
    signed = result.verdict.trust != "legacy" and not result.verdict.unverified
    pending = {e.ref: e for e in cartridge.tree.files()}
    index: dict[str, IndexRow] = {}
    for row in cartridge.rows.skills:  # paths are unique (rows.py): one row per SKILL.md
        index.setdefault(row.sqlar_path, row)

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
            _compare_index(result, index.get(entry.path), entry.path, blob.read(0, blob.size))
        blob.close()
        return True

    try:
        for rowid, data in small_rows(pool, SMALL_BLOB):  # one scan for the many small files
            entry = pending.pop(rowid, None)
            if entry is None:
                continue
            if len(data) != entry.stored_size:
                data = b"\x00" * (entry.stored_size + 1)  # changed since the check: must fail
            if not check_one(entry, functools.partial(iter, [data])):
                return
        for entry in sorted(pending.values(), key=lambda e: e.path):
            if not check_one(entry, functools.partial(stored_chunks, pool, entry,
                                                      limits.chunk_bytes)):
                return
    except TamperError as exc:
        result.verdict = v.Verdict("tampered", v.CONTENT_DIVERGES)
        result.warnings.append(str(exc))


def _compare_index(result: AcxReport, row: IndexRow | None, path: str, data: bytes) -> None:
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
