"""The writer: a whole cartridge from full sqlar names and bytes (`build_cartridge`), and the
signature of an edited one recomputed from its current rows (`resign`).

It writes what the spec describes and validates nothing (see the package docstring).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable, Mapping
from pathlib import Path

from scripts.cartwriter.dsse import write_signature
from scripts.cartwriter.encoding import Signer, oid_of, sha256_hex
from scripts.cartwriter.manifest import cartridge_object_bytes, compress, is_skill_md, skill_row
from scripts.cartwriter.spec import (
    APPLICATION_ID,
    DDL,
    EMBEDDING_ENGINE,
    FILE_MODE,
    SIGNED_AT,
    SPEC_VERSION,
    SQLAR_DIR_MODE,
    SQLAR_FILE_MODE,
    USER_VERSION,
)


def _insert_object(
    conn: sqlite3.Connection, oid: str, kind: str, ref: str, canon: str, sz: int
) -> None:
    clash = conn.execute("SELECT source_ref FROM objects WHERE oid = ?", (oid,)).fetchone()
    if clash is not None:
        raise ValueError(
            f"{ref} and {clash[0]} have identical content ({oid}); ACX 0.1 cannot sign both"
        )
    conn.execute(
        "INSERT INTO objects (oid, kind, source_ref, canon, zone, sz)"
        " VALUES (?, ?, ?, ?, 'rom', ?)",
        (oid, kind, ref, canon, sz),
    )


def _dir_names(names: Iterable[str]) -> list[str]:
    dirs: set[str] = set()
    for name in names:
        parts = name.split("/")
        for i in range(1, len(parts)):
            dirs.add("/".join(parts[:i]))
    return sorted(dirs)


def build_cartridge(
    path: str | Path,
    files: Mapping[str, bytes],
    *,
    signer: Signer | None,
    publisher: str = "io.github.example",
    cartridge_id: str | None = None,
    deflate: str = "raw",
    sqlar_dirs: bool = False,
    modes: Mapping[str, int] | None = None,
    capabilities: Mapping[str, str] | None = None,
    memories: Mapping[str, str] | None = None,
    skill_index: bool = True,
    embed_public_key: bool = True,
    envelope_keyid: str | None = None,
    signed_at: str = SIGNED_AT,
    extra_meta: Mapping[str, str] | None = None,
    unbound_meta: Mapping[str, str] | None = None,
) -> Path:
    """Write a cartridge to ``path`` (overwritten) and return ``path``.

    files: full sqlar names to uncompressed bytes (see the module docstring).
    signer: the signing key, or None for an unsigned (legacy) cartridge.
    deflate: ``raw`` (reference), ``zlib`` (stock sqlite3) or ``none``.
    sqlar_dirs: also write stock ``sqlite3 -Ac`` directory rows (mode 0o40755, sz 0, data NULL)
        and give files the S_IFREG type bits (0o100644); by default files are mode 420, no dirs.
    modes: per-name mode overriding the above (e.g. 0o120777 for a symlink row).
    capabilities / memories: id -> JSON text, stored verbatim and bound by an object.
    skill_index: derive ``acx_skill`` rows for ``rom/skills/<dir>/SKILL.md`` (section 8).
    embed_public_key: write ``signatures.public_key_pem``.
    envelope_keyid: keyid hint written in the envelope and ``signatures.keyid`` (default: the
        signer's); lets a test name one key while signing with another.
    extra_meta: more cartridge keys, each bound by a ``cartridge:<key>`` object.
    unbound_meta: cartridge keys with no object (unsigned, like ``acx.vec0_format``).
    """
    path = Path(path)
    path.unlink(missing_ok=True)
    modes = dict(modes or {})
    meta = {
        "acx.spec_version": SPEC_VERSION,
        "acx.cartridge_id": cartridge_id
        or f"{publisher}/demo@00000000-0000-4000-8000-000000000001",
        "acx.publisher_id": publisher,
        "acx.artifact_id": "demo",
        "acx.artifact_version": "1.0.0",
        "acx.description": "A demo cartridge written by the acxfs test suite.",
        "acx.created_at": signed_at,
        "acx.embedding_engine": EMBEDDING_ENGINE,
        **(extra_meta or {}),
    }
    conn = sqlite3.connect(path)
    try:
        conn.executescript(DDL)
        conn.execute(f"PRAGMA application_id = {APPLICATION_ID}")
        conn.execute(f"PRAGMA user_version = {USER_VERSION}")
        if sqlar_dirs:
            for d in _dir_names(files):
                conn.execute(
                    "INSERT INTO sqlar (name, mode, mtime, sz, data) VALUES (?, ?, 0, 0, NULL)",
                    (d, modes.get(d, SQLAR_DIR_MODE)),
                )
        default_mode = SQLAR_FILE_MODE if sqlar_dirs else FILE_MODE
        for name, data in files.items():
            conn.execute(
                "INSERT INTO sqlar (name, mode, mtime, sz, data) VALUES (?, ?, 0, ?, ?)",
                (name, modes.get(name, default_mode), len(data), compress(data, deflate)),
            )
            if not name.startswith("save/"):
                _insert_object(conn, oid_of(data), "sqlar", name, "raw", len(data))
        for key, value in meta.items():
            conn.execute("INSERT INTO cartridge (key, value) VALUES (?, ?)", (key, value))
            _insert_object(
                conn,
                oid_of(cartridge_object_bytes(key, value)),
                "cartridge",
                f"cartridge:{key}",
                "jcs-rfc8785",
                len(value.encode("utf-8")),
            )
        for key, value in (unbound_meta or {}).items():
            conn.execute("INSERT INTO cartridge (key, value) VALUES (?, ?)", (key, value))
        for cap_id, text in (capabilities or {}).items():
            oid = oid_of(text.encode("utf-8"))
            conn.execute(
                "INSERT INTO capabilities (id, json, content_hash) VALUES (?, ?, ?)",
                (cap_id, text, oid),
            )
            _insert_object(
                conn,
                oid,
                "cartridge",
                f"capability:{cap_id}",
                "jcs-rfc8785",
                len(text.encode("utf-8")),
            )
        for mem_id, payload in (memories or {}).items():
            oid = oid_of(payload.encode("utf-8"))
            conn.execute(
                "INSERT INTO memory (id, zone, artifact_fingerprint, codebase_fingerprint, payload,"
                " oid, created_at) VALUES (?, 'rom', ?, NULL, ?, ?, ?)",
                (mem_id, sha256_hex(payload.encode("utf-8"))[:10], payload, oid, signed_at),
            )
            _insert_object(
                conn, oid, "memory", f"memory:{mem_id}", "jcs-rfc8785", len(payload.encode("utf-8"))
            )
        if skill_index:
            for name in sorted(files):
                if is_skill_md(name):
                    row = skill_row(name, files)
                    cols = ", ".join(row)
                    marks = ", ".join("?" for _ in row)
                    conn.execute(
                        f"INSERT INTO acx_skill ({cols}) VALUES ({marks})", tuple(row.values())
                    )
        write_signature(
            conn,
            signer,
            signed_at=signed_at,
            embed_public_key=embed_public_key,
            envelope_keyid=envelope_keyid,
        )
        conn.commit()
    finally:
        conn.close()
    return path


def resign(
    path: str | Path,
    signer: Signer | None,
    *,
    signed_at: str = SIGNED_AT,
    embed_public_key: bool = True,
    envelope_keyid: str | None = None,
) -> str:
    """Recompute manifest, statement and signature from the CURRENT ``objects`` rows of
    ``path`` (for tests that edit rows, then sign the result); return the manifest hash.

    Only the stored oids are used: a test that edits content must update ``objects`` itself.
    """
    conn = sqlite3.connect(path)
    try:
        mhash = write_signature(
            conn,
            signer,
            signed_at=signed_at,
            embed_public_key=embed_public_key,
            envelope_keyid=envelope_keyid,
        )
        conn.commit()
    finally:
        conn.close()
    return mhash
