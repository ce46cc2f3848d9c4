"""An ACX registry's `index.json` and `status.json`, read strictly, and the choice of a release.

Invariant: only the fields acxfs uses are read (a cartridge's publisher, id, version, path,
bytes, digest and romHash; every status entry), each checked against the standard's schema
patterns; a cartridge's `path` must be exactly its coordinate's and its `digest` must equal
its `romHash`.  `trust`, `trustStatus`, `level` and `latest` never count: the index is
discovery, not a trust root.  A bad field refuses the whole file, naming the field.
"""

from __future__ import annotations

import datetime as dt
import re
from dataclasses import dataclass

from acxfs import semver
from acxfs.errors import SourceError
from acxfs.safe import strict_json
from acxfs.sources.release import Lifecycle

INDEX_SCHEMA = "acx.registry-index/1"
STATUS_SCHEMA = "acx.registry-status/1"
AGENT_ID = re.compile(r"[a-z][a-z0-9-]{0,63}")
ID = re.compile(r"[a-z][a-z0-9._-]{0,127}")
PUBLISHER = re.compile(r"(?:[a-z0-9](?:[a-z0-9-]*[a-z0-9])?\.)+[a-z0-9][a-z0-9-]*"
                       r"(?:[./][a-z0-9][a-z0-9._-]*)*")
DIGEST = re.compile(r"sha256:[0-9a-f]{64}")
STATUSES = ("deprecated", "withdrawn", "superseded")


@dataclass(frozen=True)
class Cartridge:
    publisher: str
    id: str
    version: str
    path: str
    bytes: int
    digest: str

    @property
    def name(self) -> str:
        return f"{self.publisher}/{self.id}"

    @property
    def coordinate(self) -> str:
        return f"{self.name} {self.version}"


@dataclass(frozen=True)
class Index:
    generated_at: str
    cartridges: tuple[Cartridge, ...]


@dataclass(frozen=True)
class Status:
    updated_at: str
    entries: dict[tuple[str, str], Lifecycle]  # (coordinate, digest) -> its lifecycle


def instant(text: object) -> dt.datetime:
    """An RFC 3339 date-time (ValueError otherwise), as an aware datetime."""
    if not isinstance(text, str) or not re.fullmatch(
            r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?(?:Z|[+-]\d\d:\d\d)", text):
        raise ValueError("not an RFC 3339 date-time")
    return dt.datetime.fromisoformat(text.replace("Z", "+00:00"))


class _Reader:
    def __init__(self, where: str) -> None:
        self.where = where

    def fail(self, field: str, why: str) -> SourceError:
        return SourceError(f"{self.where}: {field}: {why}")

    def document(self, body: bytes, schema: str) -> dict[str, object]:
        try:
            doc = strict_json.loads_object(body)
        except ValueError as exc:
            raise SourceError(f"{self.where}: {exc}") from None
        if doc.get("schemaVersion") != schema:
            raise self.fail("schemaVersion", f"not {schema}")
        return doc

    def text(self, obj: dict[str, object], key: str, field: str,
             pattern: re.Pattern[str] | None = None, what: str = "") -> str:
        value = obj.get(key)
        if not isinstance(value, str) or (pattern is not None and not pattern.fullmatch(value)):
            raise self.fail(f"{field}.{key}" if field else key, what or "missing or malformed")
        return value

    def version(self, obj: dict[str, object], key: str, field: str) -> str:
        value = self.text(obj, key, field, what="not a SemVer version")
        if not semver.is_semver(value):
            raise self.fail(f"{field}.{key}", "not a SemVer version")
        return value

    def when(self, obj: dict[str, object], key: str, field: str) -> str:
        value = obj.get(key)
        try:
            instant(value)
        except ValueError:
            raise self.fail(f"{field}.{key}" if field else key, "not a date-time") from None
        assert isinstance(value, str)
        return value


def parse_index(body: bytes, where: str) -> Index:
    """The cartridges of an `index.json`; `where` names it in every refusal."""
    r = _Reader(where)
    doc = r.document(body, INDEX_SCHEMA)
    generated = r.when(doc, "generatedAt", "")
    items = doc.get("cartridges")
    if not isinstance(items, list):
        raise r.fail("cartridges", "not a list")
    seen: set[str] = set()
    out: list[Cartridge] = []
    for n, item in enumerate(items):
        field = f"cartridges[{n}]"
        if not isinstance(item, dict):
            raise r.fail(field, "not an object")
        publisher = r.text(item, "publisher", field, PUBLISHER, "not a publisher id")
        ident = r.text(item, "id", field, AGENT_ID, "not an agent id")
        version = r.version(item, "version", field)
        path = item.get("path")
        if path != f"cartridges/{publisher}/{ident}/{version}/cartridge.acx":
            raise r.fail(f"{field}.path", "not cartridges/<publisher>/<id>/<version>/"
                         "cartridge.acx")
        size = item.get("bytes")
        if not isinstance(size, int) or isinstance(size, bool) or size < 1:
            raise r.fail(f"{field}.bytes", "not a positive integer")
        rom = r.text(item, "romHash", field, DIGEST, "not sha256:<hex>")
        digest = r.text(item, "digest", field, DIGEST, "not sha256:<hex>")
        if digest != rom:
            raise r.fail(f"{field}.digest", f"{digest} is not its romHash {rom}")
        cart = Cartridge(publisher, ident, version, path, size, digest)
        if cart.coordinate in seen:
            raise r.fail(field, f"{cart.coordinate} is listed twice")
        seen.add(cart.coordinate)
        out.append(cart)
    return Index(generated, tuple(out))


def _identity(r: _Reader, obj: object, field: str) -> tuple[str, str]:
    if not isinstance(obj, dict):
        raise r.fail(field, "not an object")
    kind = obj.get("artifactType")
    if kind not in ("agent", "workflow", "agent-graph"):
        raise r.fail(f"{field}.artifactType", "not agent, workflow or agent-graph")
    publisher = r.text(obj, "publisherId", field, PUBLISHER, "not a publisher id")
    ident = r.text(obj, "id", field, AGENT_ID if kind == "agent" else ID, "not an id")
    version = r.version(obj, "version", field)
    digest = r.text(obj, "digest", field, DIGEST, "not sha256:<hex>")
    return f"{publisher}/{ident} {version}", digest


def parse_status(body: bytes, where: str) -> Status:
    """The lifecycle entries of a `status.json`, by (coordinate, digest)."""
    r = _Reader(where)
    doc = r.document(body, STATUS_SCHEMA)
    updated = r.when(doc, "updatedAt", "")
    items = doc.get("entries")
    if not isinstance(items, list):
        raise r.fail("entries", "not a list")
    entries: dict[tuple[str, str], Lifecycle] = {}
    for n, item in enumerate(items):
        field = f"entries[{n}]"
        if not isinstance(item, dict):
            raise r.fail(field, "not an object")
        key = _identity(r, item.get("artifact"), f"{field}.artifact")
        status = item.get("status")
        if status not in STATUSES:
            raise r.fail(f"{field}.status", "not deprecated, withdrawn or superseded")
        reason = r.text(item, "reason", field)
        if not 10 <= len(reason) <= 1000:
            raise r.fail(f"{field}.reason", "not 10 to 1000 characters")
        recorded = r.when(item, "recordedAt", field)
        successor = None
        if "successor" in item or status == "superseded":
            successor = _identity(r, item.get("successor"), f"{field}.successor")[0]
        if "advisory" in item:
            r.text(item, "advisory", field, re.compile(r"https://\S+"), "not an https:// URL")
        if key in entries:
            raise r.fail(field, f"{key[0]} has two entries")
        entries[key] = Lifecycle(str(status), recorded, reason, successor)
    return Status(updated, entries)


def releases_of(index: Index, name: str) -> list[Cartridge]:
    return sorted((c for c in index.cartridges if c.name == name),
                  key=lambda c: semver.parse(c.version))
