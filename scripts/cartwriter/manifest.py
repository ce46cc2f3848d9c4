"""What a ROM manifest covers: sqlar content (compressed and inflated), the ``acx_skill`` rows
of section 8, and the manifest and checksum hashes over the ROM ``objects`` rows (section 4).
"""

from __future__ import annotations

import json
import math
import sqlite3
import zlib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import yaml

from scripts.cartwriter.encoding import jcs, oid_of, sha256_hex
from scripts.cartwriter.spec import SKILL_SCHEMA

# --------------------------------------------------------------------------- sqlar content


def compress(data: bytes, deflate: str = "raw") -> bytes:
    """sqlar ``data`` for ``data``: ``raw`` DEFLATE (RFC 1951, the reference), ``zlib`` (RFC 1950,
    stock sqlite3 -Ac) or ``none``. Like both tools, stores the bytes as is when compressing
    does not make them shorter (``length(data) == sz`` means stored raw)."""
    if deflate == "none":
        return data
    if deflate == "raw":
        c = zlib.compressobj(9, zlib.DEFLATED, -15)
        packed = c.compress(data) + c.flush()
    elif deflate == "zlib":
        packed = zlib.compress(data, 9)
    else:
        raise ValueError(f"deflate must be 'raw', 'zlib' or 'none', not {deflate!r}")
    return packed if len(packed) < len(data) else data


def inflate(blob: bytes | None, sz: int) -> bytes:
    """Uncompressed bytes of a sqlar row (test-side reader: raw if ``len == sz``, else zlib or
    raw DEFLATE, whichever works)."""
    if blob is None:
        return b""
    if len(blob) == sz:
        return blob
    for wbits in (15, -15):
        try:
            return zlib.decompress(blob, wbits)
        except zlib.error:
            continue
    raise ValueError("blob inflates under neither zlib nor raw DEFLATE")


# --------------------------------------------------------------------------- skills (section 8)


def parse_frontmatter(text: str) -> dict[str, Any]:
    """The YAML between a first line ``---`` and the next line ``---`` (safe loader)."""
    lines = text.splitlines()
    if not lines or lines[0].strip() != "---":
        raise ValueError("SKILL.md does not start with a '---' line")
    for i, line in enumerate(lines[1:], start=1):
        if line.strip() == "---":
            data = yaml.safe_load("\n".join(lines[1:i]))
            if not isinstance(data, dict):
                raise ValueError("frontmatter is not a mapping")
            return data
    raise ValueError("frontmatter has no closing '---' line")


def skill_row(skill_md_path: str, files: Mapping[str, bytes]) -> dict[str, Any]:
    """The ``acx_skill`` row of section 8 for ``rom/skills/<dir>/SKILL.md`` in ``files``."""
    body = files[skill_md_path]
    fm = parse_frontmatter(body.decode("utf-8"))
    skill_dir = skill_md_path.rsplit("/", 1)[0] + "/"
    resources = [
        {"path": name, "bytes": len(data), "sha256": sha256_hex(data)}
        for name, data in sorted(files.items())
        if any(
            name.startswith(skill_dir + sub + "/") for sub in ("references", "scripts", "assets")
        )
    ]
    metadata = fm.get("metadata")
    version = metadata.get("version") if isinstance(metadata, dict) else None
    return {
        "sqlar_path": skill_md_path,
        "name": str(fm.get("name", "")),
        "description": str(fm.get("description", "")),
        "license": fm.get("license"),
        "compatibility": fm.get("compatibility"),
        "skill_version": None if version is None else str(version),
        "body_tokens": math.ceil(len(body) / 4),
        "content_sha256": sha256_hex(body),
        "resources": json.dumps(resources, separators=(",", ":"), ensure_ascii=False),
        "ext": None,
        "schema_version": SKILL_SCHEMA,
    }


def is_skill_md(name: str) -> bool:
    parts = name.split("/")
    return len(parts) == 4 and parts[:2] == ["rom", "skills"] and parts[3] == "SKILL.md"


# --------------------------------------------------------------------------- manifest (section 4)


@dataclass(frozen=True)
class RomObject:
    kind: str
    source_ref: str
    oid: str
    canon: str
    sz: int


def rom_rows(conn: sqlite3.Connection) -> list[RomObject]:
    """The stored ROM ``objects`` rows (their recorded oids; nothing is re-hashed)."""
    rows = conn.execute(
        "SELECT kind, source_ref, oid, canon, sz FROM objects WHERE zone = 'rom'"
    ).fetchall()
    return [RomObject(*row) for row in rows]


def manifest_bytes(rows: Iterable[RomObject]) -> bytes:
    """JCS of ``[{sourceRef, oid, canon, sz}]`` sorted by (kind, source_ref) in UTF-16 order."""
    ordered = sorted(
        rows, key=lambda r: (r.kind.encode("utf-16-be"), r.source_ref.encode("utf-16-be"))
    )
    return jcs(
        [{"sourceRef": r.source_ref, "oid": r.oid, "canon": r.canon, "sz": r.sz} for r in ordered]
    )


def manifest_hash(rows: Iterable[RomObject]) -> str:
    return oid_of(manifest_bytes(rows))


def checksum_hash(rows: Iterable[RomObject]) -> str:
    """``predicate.checksumHash``: sha256 of the sorted ``"<oid>  <source_ref>"`` lines."""
    lines = sorted((f"{r.oid}  {r.source_ref}" for r in rows), key=lambda s: s.encode("utf-16-be"))
    return oid_of("\n".join(lines).encode("utf-8"))


def cartridge_object_bytes(key: str, value: str) -> bytes:
    """Live bytes of a ``cartridge:<key>`` object: JCS of ``{"key", "value"}`` (value unparsed)."""
    return jcs({"key": key, "value": value})


def live_oid(conn: sqlite3.Connection, obj: RomObject) -> str | None:
    """The live digest of a ROM object (inflating sqlar rows), or None when its source is gone."""
    ref = obj.source_ref
    if ref.startswith("memory:"):
        row = conn.execute("SELECT payload FROM memory WHERE id = ?", (ref[7:],)).fetchone()
        return None if row is None else oid_of(row[0].encode("utf-8"))
    if ref.startswith("capability:"):
        row = conn.execute("SELECT json FROM capabilities WHERE id = ?", (ref[11:],)).fetchone()
        return None if row is None else oid_of(row[0].encode("utf-8"))
    if ref.startswith("cartridge:"):
        key = ref[10:]
        row = conn.execute("SELECT value FROM cartridge WHERE key = ?", (key,)).fetchone()
        return None if row is None else oid_of(cartridge_object_bytes(key, row[0]))
    row = conn.execute("SELECT sz, data FROM sqlar WHERE name = ?", (ref,)).fetchone()
    return None if row is None else oid_of(inflate(row[1], row[0]))
