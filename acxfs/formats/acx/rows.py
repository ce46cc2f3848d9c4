"""Hardened reading of an ACX cartridge's rows: structure only, no file BLOB is ever read.

`read_cartridge` opens the SQLite file read-only (immutable, trusted_schema off, no
extensions), refuses a non-empty `-wal` or `-journal` beside it (other readers would see
other rows), checks the header words and that every table acxfs reads is a real table with
exactly the standard's columns, reads the `sqlar` row metadata, `objects`, `signatures`,
`cartridge`, `acx_skill`, and applies every structural rule of spec sections 1-3.  What it
returns is well-formed but NOT verified: `acxfs.formats.acx.check` decides whether to
trust it.

Indexes are the file's word, not a fact: every query here names its table `NOT INDEXED`
(a hostile file can ship an index, and `sqlite_stat1` figures that make the planner prefer
it, whose entries disagree with the table), and every uniqueness rule is decided in Python
on the decoded text acxfs uses, never by SQL (`GROUP BY`, `DISTINCT`, collation), which
compares stored bytes: in a UTF-16 database two stored strings can decode to one.
"""

from __future__ import annotations

import functools
import os
import re
import sqlite3
import stat
from dataclasses import dataclass
from hashlib import sha256
from operator import itemgetter
from typing import Any, NamedTuple

from acxfs.container import SEGMENT_RE
from acxfs.errors import AcxfsError, IncompatibleError, LimitError, MalformedError
from acxfs.formats.acx.connection import connect_readonly, read_head, release
from acxfs.formats.acx.schema import APPLICATION_ID, SQLITE_MAGIC, TABLE_COLUMNS
from acxfs.limits import DEFAULT_LIMITS, Limits
from acxfs.signing.jcs import canonical_bytes
from acxfs.skills import IndexRow

PATH_RE = re.compile(r"(?:rom|save)(?:/[A-Za-z0-9][A-Za-z0-9._-]{0,127})+")
BOUNDED_PATH_RE = re.compile(r"(?:rom|save)(?:/[A-Za-z0-9][A-Za-z0-9._-]{0,127}){1,63}")
OID_RE = re.compile(r"sha256:[0-9a-f]{64}")
OIDS_RE = re.compile(r"(?:sha256:[0-9a-f]{64})*")  # oids concatenated
OBJECT_KINDS = frozenset({"sqlar", "memory", "cartridge", "skill", "attestation"})
ZONES = frozenset({"rom", "save"})


class SqlarRow(NamedTuple):
    """One regular file row's metadata (never its BLOB)."""

    rowid: int
    name: str
    mode: int  # stored permission bits (type bits removed); 0o644 when NULL
    mtime: int
    sz: int
    stored_len: int


class ObjectRow(NamedTuple):
    oid: str
    kind: str
    source_ref: str
    canon: str
    zone: str
    sz: int


@dataclass(frozen=True, slots=True)
class SignatureRow:
    sig_id: str
    manifest_hash: str
    envelope: str
    keyid: str
    public_key_pem: str | None
    created_at: str


@dataclass(frozen=True)
class CartridgeRows:
    """A structurally valid cartridge's metadata, NOT yet verified."""

    path: str
    user_version: int
    rom_files: tuple[SqlarRow, ...]
    save_files: tuple[SqlarRow, ...]
    dir_rows: tuple[str, ...]
    objects: tuple[ObjectRow, ...]
    signature: SignatureRow | None
    meta: dict[str, str]
    skills: tuple[IndexRow, ...]
    live_oids: dict[str, str | None]  # non-sqlar ROM object -> 'sha256:' of its live value


def check_file_header(path: str) -> None:
    """Refuse a missing file (environment) or one that is not a SQLite database (malformed)."""
    head = read_head(path, 100)
    if len(head) < 100 or not head.startswith(SQLITE_MAGIC):
        raise MalformedError("not a SQLite database")


SIDECARS = (("-wal", "a write-ahead log"), ("-journal", "a rollback journal"))


def check_sidecars(path: str) -> None:
    """Refuse a cartridge with a non-empty `-wal` or `-journal` beside it (spec section 1).

    acxfs opens with `immutable=1` and never sees them; any other reader does (a WAL's frames
    may add a ROM row; the next writer rolls a journal back into the file).  SQLite names them
    after the path it opened and after the file a symlink leads to: both are looked at.  An
    empty regular file is harmless; anything else there (non-empty, or not a regular file,
    like a FIFO a reader would block on) is refused."""
    for base in dict.fromkeys((path, os.path.realpath(path))):
        for suffix, what in SIDECARS:
            try:
                info = os.stat(base + suffix)
            except OSError:
                continue  # absent (or unreachable, so no reader can honour it either)
            if info.st_size > 0 or not stat.S_ISREG(info.st_mode):
                where = "" if base == path else f" ({base + suffix})"
                raise MalformedError(f"{path} has {what} beside it{where}")


def read_cartridge(path: str, limits: Limits = DEFAULT_LIMITS) -> CartridgeRows:
    """Open `path` and return its checked rows (MalformedError/IncompatibleError otherwise)."""
    check_file_header(path)
    check_sidecars(path)
    try:
        conn = connect_readonly(path)
    except sqlite3.Error as exc:
        raise MalformedError(f"cannot open as SQLite ({exc})") from exc
    try:
        return _read(conn, path, limits)
    except sqlite3.Error as exc:
        raise MalformedError(f"corrupt database ({exc})") from exc
    except (OverflowError, MemoryError, RecursionError, UnicodeDecodeError) as exc:
        raise MalformedError(f"corrupt database ({type(exc).__name__})") from exc
    finally:
        release(conn)


def _read(conn: sqlite3.Connection, path: str, limits: Limits) -> CartridgeRows:
    app_id = conn.execute("PRAGMA application_id").fetchone()[0]
    if app_id != APPLICATION_ID:
        raise MalformedError(f"not an ACX cartridge (application_id {app_id})")
    user_version = conn.execute("PRAGMA user_version").fetchone()[0] & 0xFFFFFFFF
    major = user_version >> 24
    if major != 1:
        raise IncompatibleError(
            f"incompatible ACX spec major version {major} (acxfs reads major 1)"
        )
    _check_tables(conn)
    files, dirs = _read_sqlar(conn, limits)
    objects = _read_objects(conn, limits)
    return CartridgeRows(
        path=path,
        user_version=user_version,
        rom_files=tuple([row for row in files if row[1].startswith("rom/")]),
        save_files=tuple([row for row in files if row[1].startswith("save/")]),
        dir_rows=dirs,
        objects=objects,
        signature=_read_signature(conn, limits),
        meta=_read_meta(conn),
        skills=_read_skills(conn, limits),
        live_oids=_live_oids(conn, objects),
    )


_LIVE_TABLES = {"memory": ("memory", "id", "payload"),
                "capability": ("capabilities", "id", "json"),
                "cartridge": ("cartridge", "key", "value")}


def _live_oids(conn: sqlite3.Connection, objects: tuple[ObjectRow, ...]) -> dict[str, str | None]:
    """Re-hash what every non-sqlar ROM object covers (small text; never a file BLOB).

    One scan per table, not one query per object: the tables need not have the standard's
    primary keys, and a lookup per object would then scan the table each time."""
    wanted: dict[str, set[str]] = {}
    for obj in objects:
        if obj.zone == "rom" and obj.kind != "sqlar":
            prefix, _, ident = obj.source_ref.partition(":")
            wanted.setdefault(prefix, set()).add(ident)
    values: dict[str, str] = {}
    for prefix, idents in wanted.items():
        if prefix not in _LIVE_TABLES:
            continue
        table, key, column = _LIVE_TABLES[prefix]
        for ident, value in conn.execute(f"SELECT {key}, {column} FROM {table} NOT INDEXED"):
            if ident in idents and isinstance(value, str):
                values.setdefault(f"{prefix}:{ident}", value)  # duplicates were refused
    live: dict[str, str | None] = {}
    for prefix, idents in wanted.items():
        for ident in idents:
            ref = f"{prefix}:{ident}"
            value = values.get(ref)
            data = None if value is None else (
                canonical_bytes({"key": ident, "value": value}) if prefix == "cartridge"
                else value.encode("utf-8", "surrogatepass"))
            live[ref] = None if data is None else "sha256:" + sha256(data).hexdigest()
    return live


def _check_tables(conn: sqlite3.Connection) -> None:
    marks = ",".join("?" * len(TABLE_COLUMNS))
    rows = conn.execute(
        f"SELECT name, type, sql FROM sqlite_master WHERE name IN ({marks})", tuple(TABLE_COLUMNS)
    ).fetchall()
    found: dict[str, tuple[str, str]] = {}
    for name, kind, sql in rows:
        if name in found:
            raise MalformedError(f"schema defines {name} twice")
        found[name] = (kind, sql or "")
    for table, columns in TABLE_COLUMNS.items():
        if table not in found:
            raise MalformedError(f"missing table {table}")
        kind, sql = found[table]
        if kind != "table" or sql.lstrip().upper().startswith("CREATE VIRTUAL"):
            what = kind if kind != "table" else "virtual table"
            raise MalformedError(f"table {table} is a {what}, not a plain table")
        info = conn.execute(f'PRAGMA table_xinfo("{table}")').fetchall()
        names = [row[1] for row in info]
        if any(row[6] != 0 for row in info):
            raise MalformedError(f"table {table} has hidden or generated columns")
        if sorted(names) != sorted(columns):
            raise MalformedError(
                f"table {table} has columns ({', '.join(names)}), expected ({', '.join(columns)})"
            )


def check_path(name: str, limits: Limits = DEFAULT_LIMITS) -> None:
    """The reference's validPackagePath, with acxfs's length and depth bounds."""
    if (
        PATH_RE.fullmatch(name)
        and len(name) <= limits.max_name_bytes
        and name.count("/") < limits.max_depth
    ):
        return  # the common case, in one match (ASCII only, so characters are bytes)
    if len(name.encode("utf-8", "surrogatepass")) > limits.max_name_bytes:
        raise LimitError(f"path longer than {limits.max_name_bytes} bytes: {name[:80]!r}...")
    if "\\" in name or "\x00" in name or name.startswith("/"):
        raise MalformedError(f"unsafe path {name!r}")
    segments = name.split("/")
    if len(segments) > limits.max_depth:
        raise LimitError(f"path deeper than {limits.max_depth} segments: {name!r}")
    if len(segments) < 2 or segments[0] not in ZONES:
        raise MalformedError(f"path outside rom/ and save/: {name!r}")
    for segment in segments:
        if not SEGMENT_RE.fullmatch(segment):
            raise MalformedError(f"unsafe path {name!r}")


def check_paths(names: list[str], limits: Limits = DEFAULT_LIMITS) -> None:
    """check_path for many names at C speed; per name in Python only to name a culprit."""
    if (
        all(map(BOUNDED_PATH_RE.fullmatch, names))
        and max(map(len, names), default=0) <= limits.max_name_bytes
        and limits.max_depth >= 64
    ):
        return
    for name in names:
        check_path(name, limits)


def _read_sqlar(
    conn: sqlite3.Connection, limits: Limits
) -> tuple[tuple[SqlarRow, ...], tuple[str, ...]]:
    _check_counts(conn, limits)
    # One scan: SQLite classifies every row (0 = well formed) and Python looks only at the
    # first offender.  Each scan reads every leaf page, small files' BLOBs included, so the
    # per-row rules share this one; rules over other tables are separate small queries.
    is_dir = "((mode & 61440) = 16384)"
    problem = (
        "CASE WHEN typeof(name) != 'text' OR typeof(mode) NOT IN ('integer', 'null') "
        "OR typeof(mtime) NOT IN ('integer', 'null') OR typeof(sz) != 'integer' "
        "OR typeof(data) NOT IN ('blob', 'null') THEN 1 "
        "WHEN (mode & 61440) NOT IN (0, 32768, 16384) THEN 2 "
        f"WHEN {is_dir} THEN (CASE WHEN length(data) > 0 THEN 3 ELSE 0 END) "
        "WHEN sz < 0 OR length(data) > sz OR (data IS NULL AND sz > 0) THEN 4 "
        f"WHEN sz > {int(limits.max_file_bytes)} THEN 5 ELSE 0 END"
    )
    cursor = conn.execute(
        "SELECT rowid, name, ifnull(mode, 420) & 4095, ifnull(mtime, 0), sz, "
        f"ifnull(length(data), 0), ifnull({is_dir}, 0), {problem} FROM sqlar NOT INDEXED")
    # In batches, each checked before any of its rows is kept: memory freed by one batch
    # serves the next (a fresh page per row object costs more than the object).
    files: list[SqlarRow] = []
    dirs: list[str] = []
    in_order: list[str] = []  # every name, in row order: the first repeated one is reported
    make = functools.partial(tuple.__new__, SqlarRow)  # _make, without a Python frame per row
    while batch := cursor.fetchmany(4096):  # the row count was bounded (_check_counts)
        offender = next((row for row in batch if row[7]), None)
        if offender is not None:
            raise _sqlar_problem(conn, offender)
        files += map(make, [row[:6] for row in batch if not row[6]])
        dirs += [row[1] for row in batch if row[6]]
        in_order += [row[1] for row in batch]
    duplicate = first_duplicate(in_order)
    del in_order
    names = [row[1] for row in files]
    if duplicate is not None:
        raise MalformedError(f"duplicate sqlar name {duplicate!r}")
    dirs = [d for d in dirs if d not in ("rom", "save")]
    for table, key, what in _UNIQUE_KEYS:
        _check_unique(conn, table, key, what)
    # Sizes in bytes, not characters: length() of text stops at a NUL.
    oversized = conn.execute(" UNION ALL ".join(
        f"SELECT {key} FROM {table} NOT INDEXED WHERE {size} > {int(limits.max_meta_bytes)}"
        for table, key, size in (
            ("cartridge", "key", "length(CAST(value AS BLOB))"),
            ("memory", "id", "length(CAST(payload AS BLOB))"),
            ("capabilities", "id", "length(CAST(json AS BLOB))"),
            ("acx_skill", "sqlar_path", _SKILL_ROW_BYTES),
        )
    ) + " LIMIT 1").fetchone()
    if oversized is not None:
        raise LimitError(f"{oversized[0]!r} holds a value larger than the limit")
    names += dirs
    check_paths(names, limits)
    _check_conflicts(names, len(files), limits)
    return tuple(files), tuple(dirs)


_UNIQUE_KEYS = (("cartridge", "key", "cartridge key"), ("memory", "id", "memory id"),
                ("capabilities", "id", "capability id"),
                ("acx_skill", "sqlar_path", "acx_skill row"),
                ("signatures", "sig_id", "signature id"))
"""Each table's key, unique on its rows' decoded text (the standard's primary keys; the
names of `sqlar` and the oids of `objects` are checked where their rows are read)."""


def _check_unique(conn: sqlite3.Connection, table: str, key: str, what: str) -> None:
    """No two rows of `table` share a `key`, compared as the text acxfs decodes (the row count
    was bounded before): a second row for a key is refused even when an index hides it or
    its stored bytes differ (two UTF-16 strings can decode to one)."""
    keys = [row[0] for row in conn.execute(f"SELECT {key} FROM {table} NOT INDEXED")]
    duplicate = first_duplicate(keys)
    if duplicate is not None:
        raise MalformedError(f"duplicate {what} {duplicate!r}")


# The text of one acx_skill row, all columns (an unsigned cache: never larger than a value).
_SKILL_ROW_BYTES = " + ".join(
    f"ifnull(length(CAST({column} AS BLOB)), 0)" for column in TABLE_COLUMNS["acx_skill"])


def _check_counts(conn: sqlite3.Connection, limits: Limits) -> None:
    """Row counts of every table acxfs reads, before any of their rows is fetched."""
    bounds = {"sqlar": limits.max_entries, "objects": limits.max_objects,
              "cartridge": limits.max_entries,
              "memory": limits.max_entries, "capabilities": limits.max_entries,
              "acx_skill": limits.max_entries, "signatures": limits.max_entries}
    counts = conn.execute(
        "SELECT " + ", ".join(f"(SELECT count(*) FROM {table} NOT INDEXED)" for table in bounds)
    ).fetchone()
    for (table, bound), count in zip(bounds.items(), counts, strict=True):
        if count > bound:
            raise LimitError(f"{table} has {count} rows, more than the limit of {bound}")


def first_duplicate(items: list[Any]) -> Any:
    """The first item that occurs twice (one set when there is none, a scan when there is);
    None when every item is distinct.  Items are compared as Python values: text as decoded."""
    if len(set(items)) == len(items):
        return None
    seen: set[str] = set()
    for item in items:
        if item in seen:
            return item
        seen.add(item)
    return None


def _sqlar_problem(conn: sqlite3.Connection, row: tuple[Any, ...]) -> AcxfsError:
    """The error for a row the one scan of `_read_sqlar` classified as ill-formed."""
    rowid, name, _, _, sz, stored, _, code = row
    if code == 1:
        return MalformedError(
            f"sqlar row {rowid}: name must be text, mode/mtime/sz integers and data a BLOB")
    if code == 2:  # the raw mode is read only for this message, not for every row
        (mode,) = conn.execute("SELECT mode FROM sqlar NOT INDEXED WHERE rowid = ?",
                               (rowid,)).fetchone()
        return MalformedError(f"{name!r}: not a regular file or directory (mode {mode:o})")
    if code == 3:
        return MalformedError(f"{name!r}: a directory row holds data")
    if code == 4:
        return MalformedError(f"{name!r}: stored size {stored or 0} does not fit sz {sz}")
    return LimitError(f"{name!r}: {sz} bytes, more than the per-file limit")


def _check_conflicts(names: list[str], file_count: int, limits: Limits) -> None:
    """No name is both a file and a directory (`names`: the files' names, then the directory
    rows'); the distinct directory paths (which the tree keeps, one string each) stay within
    `limits.max_dir_path_bytes` together: deep, long and unshared paths would otherwise
    multiply the file's size in memory before any check."""
    dirs = names[file_count:]
    parents: set[str] = set(dirs)
    room = limits.max_dir_path_bytes - sum(map(len, dirs))  # paths are ASCII: chars are bytes
    for name in names:
        parent = name.rpartition("/")[0]
        while parent and parent not in parents:
            parents.add(parent)
            room -= len(parent)
            if room < 0:
                raise LimitError("the directory paths together exceed the limit of "
                                 f"{limits.max_dir_path_bytes} bytes")
            parent = parent.rpartition("/")[0]
    clash = parents.intersection(names[:file_count])
    if clash:
        raise MalformedError(f"{sorted(clash)[0]} is both a file and a directory")


def _read_objects(conn: sqlite3.Connection, limits: Limits) -> tuple[ObjectRow, ...]:
    """Every `objects` row, checked for type and form (the manifest orders them itself)."""
    kinds = ",".join(f"'{k}'" for k in sorted(OBJECT_KINDS))
    bad = conn.execute(
        "SELECT source_ref FROM objects NOT INDEXED WHERE typeof(oid) != 'text' "
        "OR typeof(kind) != 'text' "
        "OR typeof(source_ref) != 'text' OR typeof(canon) != 'text' OR typeof(zone) != 'text' "
        f"OR typeof(sz) != 'integer' OR kind NOT IN ({kinds}) OR zone NOT IN ('rom', 'save') "
        "OR length(oid) != 71 "  # the form itself: OIDS_RE below, over 71-character pieces
        f"OR length(CAST(canon AS BLOB)) > {int(limits.max_key_bytes)} "
        f"OR length(CAST(source_ref AS BLOB)) > {int(limits.max_key_bytes)} LIMIT 1"
    ).fetchone()
    if bad is not None:
        raise MalformedError(f"objects row {bad[0]!r} has a missing, mistyped or malformed column")
    cursor = conn.execute(
        "SELECT oid, kind, source_ref, canon, zone, sz FROM objects NOT INDEXED")
    rows: list[ObjectRow] = []
    make = functools.partial(tuple.__new__, ObjectRow)  # _make, without a Python frame per row
    while batch := cursor.fetchmany(4096):  # the row count was bounded before (_check_counts)
        rows.extend(map(make, batch))
    oids = list(map(itemgetter(0), rows))
    if not OIDS_RE.fullmatch("".join(oids)):  # each oid is 71 characters
        for row in rows:
            if not OID_RE.fullmatch(row.oid):
                raise MalformedError(f"objects row {row.source_ref!r} has a malformed oid")
    duplicate = first_duplicate(oids)
    if duplicate is not None:
        raise MalformedError(f"duplicate objects oid {duplicate!r}")
    return tuple(rows)


def _read_signature(conn: sqlite3.Connection, limits: Limits) -> SignatureRow | None:
    # Each column is cut one past its bound, so an oversized value is refused by the check
    # that reads it (the envelope's size check, the PEM parser) without being copied whole.
    cut, envelope_cut = limits.max_key_bytes + 1, limits.max_envelope_bytes + 1
    row = conn.execute(
        f"SELECT substr(sig_id, 1, {cut}), substr(manifest_hash, 1, {cut}), "
        f"substr(envelope, 1, {envelope_cut}), substr(keyid, 1, {cut}), "
        f"substr(public_key_pem, 1, {cut}), substr(created_at, 1, {cut}) "
        "FROM signatures NOT INDEXED WHERE target='rom-manifest' "
        "ORDER BY created_at DESC LIMIT 1"
    ).fetchone()
    if row is None:
        return None
    sig_id, manifest_hash, envelope, keyid, pem, created = row
    if not isinstance(envelope, str):
        envelope = "" if envelope is None else str(envelope)
    return SignatureRow(
        str(sig_id), str(manifest_hash), envelope, str(keyid),
        pem if isinstance(pem, str) else None, str(created),
    )


def _read_meta(conn: sqlite3.Connection) -> dict[str, str]:
    """The text rows of `cartridge` (keys unique and values bounded by `_read_sqlar`)."""
    meta: dict[str, str] = {}
    for key, value in conn.execute("SELECT key, value FROM cartridge NOT INDEXED"):
        if isinstance(key, str) and isinstance(value, str):
            meta[key] = value
    return meta


def _read_skills(conn: sqlite3.Connection, limits: Limits) -> tuple[IndexRow, ...]:
    """The `acx_skill` rows: an unsigned cache, its text columns typed, the rest as found."""
    rows = []
    for values in conn.execute(
        "SELECT sqlar_path, name, description, license, compatibility, skill_version, "
        "body_tokens, content_sha256, resources, ext, schema_version "
        "FROM acx_skill NOT INDEXED"
    ):
        path, name, desc, lic, compat, version, tokens, sha, resources, ext, schema = values
        if not all(isinstance(v, str) for v in (path, name, desc, sha, resources)):
            raise MalformedError("acx_skill row with a missing or mistyped column")
        rows.append(
            IndexRow(
                path, name, desc, _opt_str(lic), _opt_str(compat), _opt_str(version),
                tokens if isinstance(tokens, int) else None, sha, resources, _opt_str(ext),
                _opt_str(schema),
            )
        )
    return tuple(rows)


def _opt_str(value: object) -> str | None:
    return value if isinstance(value, str) else None


