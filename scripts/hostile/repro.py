"""Minimal reproducers of the acxfs bugs that fuzzing found, all fixed, kept as regression checks.

Each `FixedBug` has a reproducer (True when the bug is back) and a matcher for the violations
it causes. The long run checks them once (`regressed_bugs`) and labels a violation that matches
a regressed one (`classify`) for diagnosis; it still counts. The suite runs each reproducer as
a named test.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import random
import sqlite3
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from scripts import cartwriter as cw
from scripts.hostile.bases import PUBLISHER, SIGNER
from scripts.hostile.invariant import CONTROL_RE, Result
from scripts.hostile.mutate_rows import rebuild_without_pk
from scripts.hostile.running import run_main


@dataclasses.dataclass(frozen=True)
class FixedBug:
    ident: str
    summary: str  # what was wrong, and where it was fixed
    matches: Callable[[str], bool]  # does a fuzz violation look like this bug?
    reproduce: Callable[[Path], bool]  # True when the bug is back


def repro_blob_read_error(workdir: Path) -> bool:
    """The file changes between the check and the read (a live fault, or a TOCTOU race): a
    broken overflow page under a BLOB. `acxfs cat` must exit 5 (or 6), never trace back."""
    import acxfs.formats.acx.source as loader

    path = workdir / "overflow.acx"
    payload = random.Random(7).randbytes(300_000)
    cw.build_cartridge(path, {"rom/big.bin": payload, "rom/a.txt": b"a"}, signer=SIGNER,
                       deflate="none")
    key = workdir / "overflow.pub.pem"
    key.write_text(SIGNER.public_pem)
    real_check = getattr(loader, "check_cartridge")  # noqa: B009 - patched below

    def check_then_corrupt(*args: Any, **kwargs: Any) -> Any:
        report = real_check(*args, **kwargs)
        corrupt_overflow_page(path, payload)
        return report

    setattr(loader, "check_cartridge", check_then_corrupt)  # noqa: B010
    try:
        run = run_main(["cat", str(path), "rom/big.bin", "--trust-key", str(key)])
    finally:
        setattr(loader, "check_cartridge", real_check)  # noqa: B010
    return run.tb is not None


def corrupt_overflow_page(path: Path, payload: bytes) -> None:
    """Point the overflow page holding payload[100000:] at a page beyond the end of the file."""
    data = bytearray(path.read_bytes())
    page = data.find(payload[100_000:100_064]) // 4096 * 4096
    data[page : page + 4] = b"\xff\xff\xff\x00"
    with open(path, "r+b") as handle:  # in place: the same inode, as a live fault would be
        handle.write(bytes(data))


def repro_duplicate_meta(workdir: Path) -> bool:
    """A second `cartridge` row for a signed key (table without PK): inspect shows it signed."""
    path = workdir / "dupmeta.acx"
    cw.build_cartridge(path, {"rom/a.txt": b"a"}, signer=SIGNER)
    with contextlib.closing(sqlite3.connect(path)) as conn:
        rebuild_without_pk(conn, "cartridge")
        conn.execute("INSERT INTO cartridge VALUES ('acx.description', 'EVIL')")
        conn.commit()
    key = workdir / "dupmeta.pub.pem"
    key.write_text(SIGNER.public_pem)
    run = run_main(["inspect", "--json", str(path), "--trust-key", str(key)])
    try:
        return bool(json.loads(run.out)["signedMeta"].get("acx.description") == "EVIL")
    except (ValueError, KeyError):
        return False


def repro_registry_unhashable(workdir: Path) -> bool:
    """A registry entry whose status is a list: verify must say the registry is unusable."""
    path = workdir / "reg.acx"
    cw.build_cartridge(path, {"rom/a.txt": b"a"}, signer=SIGNER)
    entry = cw.registry_entry(SIGNER, PUBLISHER)
    entry["status"] = ["active"]
    reg = workdir / "bad-registry.json"
    reg.write_text(cw.registry_json([entry]))
    return run_main(["verify", str(path), "--registry", str(reg)]).tb is not None


def repro_untrusted_text_printed(workdir: Path) -> bool:
    """An unverifiable envelope whose keyid holds a lone surrogate or an escape sequence."""
    path = workdir / "keyid.acx"
    cw.build_cartridge(path, {"rom/a.txt": b"a"}, signer=SIGNER, embed_public_key=False)
    with contextlib.closing(sqlite3.connect(path)) as conn:
        (envelope,) = conn.execute("SELECT envelope FROM signatures").fetchone()
        doc = json.loads(envelope)
        doc["signatures"][0]["keyid"] = "\x1b]0;pwned\x07\ud800"
        conn.execute("UPDATE signatures SET envelope=?", (json.dumps(doc),))
        conn.commit()
    run = run_main(["verify", str(path)])
    return run.tb is not None or bool(CONTROL_RE.search(run.out + run.err))


def repro_unsafe_name_in_verdict(workdir: Path) -> bool:
    """A sqlar name with an escape sequence reaches the verdict line before it is checked."""
    path = workdir / "name.acx"
    cw.build_cartridge(path, {"rom/a.txt": b"a", "rom/\x1b[2Jx": b"b"}, signer=SIGNER,
                       modes={"rom/\x1b[2Jx": 0o120777})
    run = run_main(["verify", str(path)])
    return bool(CONTROL_RE.search(run.out + run.err))


def repro_spill_oserror(workdir: Path) -> bool:
    """No space for the spill file: verify --deep must fail with one line, not a traceback.
    (Simulated with an unwritable spill directory, which fails the same code path.)"""
    path = workdir / "spill.acx"
    cw.build_cartridge(path, {"rom/big.bin": random.Random(3).randbytes(9 * 1024 * 1024)},
                       signer=SIGNER, deflate="none")
    key = workdir / "spill.pub.pem"
    key.write_text(SIGNER.public_pem)
    real = tempfile.TemporaryFile  # acxfs.content.rule calls tempfile.TemporaryFile(dir=spill_dir)

    def full(*args: Any, **kwargs: Any) -> Any:
        raise OSError(28, "No space left on device")

    setattr(tempfile, "TemporaryFile", full)  # noqa: B010
    try:
        run = run_main(["verify", "--deep", str(path), "--trust-key", str(key)])
    finally:
        setattr(tempfile, "TemporaryFile", real)  # noqa: B010
    return run.tb is not None


def repro_schema_name_not_utf8(workdir: Path) -> bool:
    """A table name in sqlite_master that is not UTF-8: SQLite's error message quotes it and
    Python's sqlite3 fails to decode the message with UnicodeDecodeError (not sqlite3.Error)."""
    path = workdir / "schema-name.acx"
    cw.build_cartridge(path, {"rom/a.txt": b"a"}, signer=SIGNER)
    with contextlib.closing(sqlite3.connect(path)) as conn:
        conn.execute("PRAGMA writable_schema=ON")
        conn.execute("UPDATE sqlite_master SET name=CAST(x'6361706162696cff74696573' AS TEXT) "
                     "WHERE name='capabilities'")
        conn.commit()
    return run_main(["verify", str(path)]).tb is not None


FIXED_BUGS = [
    FixedBug("blob-read-error", "sqlite3.DatabaseError while reading a file's BLOB escaped "
             "`cat`/`verify --deep` as a traceback; now a TamperError (acxfs/formats/acx/source.py "
             "stored_chunks)",
             lambda v: "DatabaseError" in v or "OperationalError" in v, repro_blob_read_error),
    FixedBug("duplicate-meta", "a duplicated cartridge key (table without PK) was shown by "
             "inspect as a signed fact; duplicate cartridge/memory/capability/acx_skill keys "
             "are now malformed (acxfs/formats/acx/rows.py _read_sqlar)",
             lambda v: "unsigned values as signed facts" in v, repro_duplicate_meta),
    FixedBug("registry-unhashable", "a registry entry with a list/dict status or "
             "revocationReason raised TypeError; field types are now checked "
             "(acxfs/trust/policy.py parse_registry)",
             lambda v: "TypeError: unhashable" in v, repro_registry_unhashable),
    FixedBug("untrusted-text", "untrusted text (an envelope keyid, a JSON string) was printed "
             "raw; now escaped by acxfs/text.py printable",
             lambda v: "UnicodeEncodeError" in v or "control characters" in v,
             repro_untrusted_text_printed),
    FixedBug("unsafe-name-in-verdict", "a sqlar name reached a malformed verdict raw, before "
             "check_path; now repr'd (acxfs/formats/acx/rows.py _read_sqlar), and the verdict "
             "line is escaped",
             lambda v: "control characters" in v, repro_unsafe_name_in_verdict),
    FixedBug("schema-name-not-utf8", "a sqlite_master name that is not UTF-8 made SQLite's "
             "error message undecodable (UnicodeDecodeError traceback); now malformed "
             "(acxfs/formats/acx/rows.py read_cartridge)",
             lambda v: "UnicodeDecodeError" in v, repro_schema_name_not_utf8),
    FixedBug("spill-oserror", "an OSError while spilling (disk full) escaped cat/verify --deep "
             "as a traceback; now one `acxfs: error:` line, exit 2 (acxfs/content/rule.py "
             "verify_content)",
             lambda v: "OSError" in v and "No space" in v, repro_spill_oserror),
]


def regressed_bugs(workdir: Path) -> dict[str, FixedBug]:
    """The fixed bugs whose reproducer fails again (checked once per run; normally none)."""
    workdir.mkdir(parents=True, exist_ok=True)
    return {bug.ident: bug for bug in FIXED_BUGS if bug.reproduce(workdir)}



def classify(result: Result, regressed: dict[str, FixedBug]) -> None:
    """Label each violation with the regressed fixed bug it matches, if any (result.known)."""
    result.known = []
    for violation in result.violations:
        if violation.startswith("TRACEBACK "):
            continue
        match = next((b.ident for b in regressed.values() if b.matches(violation)), None)
        result.known.append(match or "")


def unknown_violations(result: Result) -> list[str]:
    """The violations that match no regressed fixed bug: a new bug."""
    shown = [v for v in result.violations if not v.startswith("TRACEBACK ")]
    return [v for v, known in zip(shown, result.known, strict=True) if not known]
