"""A project's `acxfs.lock`: the bundles every clone of the project installs, byte for byte.

Invariant: the lock is read strictly (UTF-8, strict JSON, its one schema, every field present
and well formed, no unknown field, no identity or skill named twice) or refused with one line
naming the field; it is written in one canonical form (sorted keys and lists, no timestamp,
no path of this machine), so two machines write identical bytes, and it is replaced whole
through a temporary file, never through a link, and only while it still holds the bytes the
change was planned against.  The lock names bytes; it never confers trust.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from acxfs import semver
from acxfs.container import FORMAT_NAMES, SEGMENT_RE
from acxfs.errors import IsALink, LockError, NotAFile
from acxfs.library.store.served_names import served_name
from acxfs.safe import dirs as safe_dirs
from acxfs.safe import files as safe_files
from acxfs.safe import strict_json
from acxfs.safe.dirs import current_umask
from acxfs.safe.inputs import open_file_at
from acxfs.skills import valid_name
from acxfs.sources.http import may_ask
from acxfs.sources.oci.reference import DIGEST_RE, TAG_RE, oci_key, tag_version, version_tag
from acxfs.trust.policy import valid_publisher

NAME = "acxfs.lock"
SCHEMA = "acxfs.lock/1"
MAX_BYTES = 16 * 1024 * 1024
PROJECT_AGENTS = ("agents", "claude")  # the agent directories a project links into
FIELDS = ("identity", "format", "version", "sha256", "bytes", "manifest", "keyid", "publisher",
          "skills", "agents", "source")
_HEX = re.compile(r"[0-9a-f]{64}")
_MARKER = re.compile(r"^(<{7}|>{7}|={7}|\|{7})( .*)?\r?$", re.MULTILINE)  # what git writes


@dataclass(frozen=True)
class LockEntry:
    """One bundle the lock names: the facts a full check of its bytes must establish."""

    identity: str
    format: str
    version: str
    sha256: str
    bytes: int
    manifest: str
    keyid: str
    publisher: str | None
    skills: tuple[str, ...]
    agents: tuple[str, ...]
    source_file: str  # a bare file name, or an origin (`origin_text`: always holds a /)

    @property
    def store_name(self) -> str:
        return f"{self.sha256}.{self.format}"

    @property
    def prefix(self) -> str:
        return served_name(self.identity, self.version, self.sha256)

    def to_json(self) -> dict[str, object]:
        return {"identity": self.identity, "format": self.format, "version": self.version,
                "sha256": self.sha256, "bytes": self.bytes, "manifest": self.manifest,
                "keyid": self.keyid, "publisher": self.publisher,
                "skills": sorted(self.skills), "agents": sorted(self.agents),
                "source": origin_of(self.source_file) or {"file": self.source_file}}

    @property
    def file_name(self) -> str:
        """The file name to look for in a --from directory of bundle files."""
        origin = origin_of(self.source_file)
        if origin is None:
            return self.source_file
        if "path" in origin:
            return "cartridge.acx"
        if "oci" in origin:
            return f"{self.identity.rsplit('/', 1)[-1]}-{self.version}.{self.format}"
        return f"{origin['id']}-{origin['version']}.azp"


@dataclass(frozen=True)
class Lock:
    """A lock as read: its entries (sorted by identity) and its exact bytes."""

    entries: tuple[LockEntry, ...]
    data: bytes

    def by_identity(self) -> dict[str, LockEntry]:
        return {e.identity: e for e in self.entries}


Origin = dict[str, "str | None"]


def origin_text(origin: Origin) -> str:
    """An origin as the one string a project records (canonical JSON; it always holds a /,
    which no bare file name does)."""
    return json.dumps(origin, sort_keys=True, separators=(",", ":"))


def origin_of(source: str) -> Origin | None:
    """The registry or repository a locked bundle came from; None for a file name."""
    if "/" not in source:
        return None
    doc = json.loads(source)
    assert isinstance(doc, dict)
    return doc


def path_of(project: Path) -> Path:
    return project / NAME


def render(entries: list[LockEntry]) -> bytes:
    """The canonical bytes of a lock holding `entries`."""
    doc = {"schema": SCHEMA,
           "bundles": [e.to_json() for e in sorted(entries, key=lambda e: e.identity)]}
    return (json.dumps(doc, indent=2, sort_keys=True) + "\n").encode()


def valid_identity(text: str) -> bool:
    parts = text.split("/")
    return len(parts) in (1, 2) and all(SEGMENT_RE.fullmatch(p) for p in parts) and (
        len(parts) == 1 or valid_publisher(parts[0]))


def bare_file_name(text: str) -> bool:
    return (0 < len(text.encode()) <= 255 and "/" not in text and text not in (".", "..")
            and all(ch.isprintable() for ch in text))


def read_bytes(project: Path) -> bytes | None:
    """The lock's bytes as they are now (None: there is none), never through a link."""
    where = path_of(project)
    try:
        dirfd = safe_dirs.open_dir(project)
    except FileNotFoundError:
        return None
    try:
        try:
            opened = open_file_at(dirfd, NAME)
        except IsALink:
            raise LockError(f"{where} is a symbolic link; acxfs reads and writes the lock "
                            "only as a file of the project") from None
        except NotAFile:
            raise LockError(f"{where} is not a regular file") from None
        except OSError as exc:
            raise LockError(f"{where}: {exc.strerror}") from None
        if opened is None:
            return None
        fd, info = opened
        try:
            if info.st_size > MAX_BYTES:
                raise LockError(f"{where}: larger than {MAX_BYTES} bytes")
            chunks = []
            while chunk := os.read(fd, 1 << 20):
                chunks.append(chunk)
            return b"".join(chunks)
        finally:
            os.close(fd)
    finally:
        os.close(dirfd)


def read(project: Path) -> Lock | None:
    """The lock of `project`, read strictly (LockError), or None when it has none."""
    data = read_bytes(project)
    return None if data is None else parse(data, path_of(project))


def parse(data: bytes, where: Path) -> Lock:
    try:
        text = data.decode("utf-8", errors="strict")
    except UnicodeDecodeError as exc:
        raise LockError(f"{where}: not UTF-8 (byte {exc.start})") from None
    if _MARKER.search(text):
        raise LockError(f"{where} has merge conflict markers; resolve them "
                        "(acxfs never merges a lock)")
    try:
        doc = strict_json.loads(text)
    except ValueError as exc:
        raise LockError(f"{where}: not strict JSON ({exc})") from None
    return Lock(_entries(doc, where), data)


def _problem(where: Path, field: str, problem: str) -> LockError:
    return LockError(f"{where}: {field}: {problem}")


def _entries(doc: object, where: Path) -> tuple[LockEntry, ...]:
    if not isinstance(doc, dict):
        raise LockError(f"{where}: not a JSON object")
    for key in doc:
        if key not in ("schema", "bundles"):
            raise _problem(where, key, "unknown field")
    if doc.get("schema") != SCHEMA:
        raise _problem(where, "schema", f"not {SCHEMA}")
    bundles = doc.get("bundles")
    if not isinstance(bundles, list):
        raise _problem(where, "bundles", "missing or not a list")
    entries: list[LockEntry] = []
    skills: dict[str, str] = {}
    for index, item in enumerate(bundles):
        entry = _entry(item, f"bundles[{index}]", where)
        if any(e.identity == entry.identity for e in entries):
            raise _problem(where, f"bundles[{index}].identity",
                           f"{entry.identity} is named twice")
        for skill in entry.skills:
            if skill in skills:
                raise _problem(where, f"bundles[{index}].skills",
                               f"skill {skill!r} is named twice (also by {skills[skill]})")
            skills[skill] = entry.identity
        entries.append(entry)
    return tuple(sorted(entries, key=lambda e: e.identity))


_CHECKS: dict[str, tuple[Callable[[str], object], str]] = {
    "identity": (valid_identity, "not an identity (publisher/artifact)"),
    "format": (lambda v: v in FORMAT_NAMES, f"not one of {', '.join(FORMAT_NAMES)}"),
    "version": (semver.is_semver, "not a SemVer 2.0.0 version"),
    "sha256": (_HEX.fullmatch, "not 64 lowercase hex digits"),
    "manifest": (lambda v: v.startswith("sha256:") and _HEX.fullmatch(v[7:]),
                 "not sha256:<64 lowercase hex digits>"),
    "keyid": (lambda v: v.startswith("ed25519:") and _HEX.fullmatch(v[8:]),
              "not ed25519:<64 lowercase hex digits>"),
}


def _entry(item: object, at: str, where: Path) -> LockEntry:
    if not isinstance(item, dict):
        raise _problem(where, at, "not an object")
    for key in item:
        if key not in FIELDS:
            raise _problem(where, f"{at}.{key}", "unknown field")
    for key in FIELDS:
        if key not in item:
            raise _problem(where, f"{at}.{key}", "missing")

    values: dict[str, str] = {}
    for key, (check, problem) in _CHECKS.items():
        value = item[key]
        if not isinstance(value, str) or not check(value):
            raise _problem(where, f"{at}.{key}", problem)
        values[key] = value
    size = item["bytes"]
    if not isinstance(size, int) or isinstance(size, bool) or size <= 0:
        raise _problem(where, f"{at}.bytes", "not a positive whole number")
    publisher = item["publisher"]
    if publisher is not None and not (isinstance(publisher, str) and valid_publisher(publisher)):
        raise _problem(where, f"{at}.publisher", "not a reverse-DNS name (or null)")
    skills = _names(item["skills"], valid_name, f"{at}.skills", "not a skill name", where)
    agents = _names(item["agents"], lambda v: v in PROJECT_AGENTS, f"{at}.agents",
                    f"not one of {', '.join(PROJECT_AGENTS)}", where)
    file = _source(item["source"], values["identity"], values["version"], at, where)
    return LockEntry(values["identity"], values["format"], values["version"], values["sha256"],
                     size, values["manifest"], values["keyid"], publisher, skills, agents, file)


_SHAPES = ('{"file": NAME}, {"registry": BASE|null, "path": PATH}, '
           '{"azphalt": BASE, "id": ID, "version": V} or '
           '{"oci": "oci://HOST/REPO", "digest": "sha256:<hex>", "tag": TAG|null}')


def _source(source: object, identity: str, version: str, at: str, where: Path) -> str:
    """The recorded source of an entry: a bare file name, or the origin it was fetched from
    (its path exactly the entry's coordinate, its id and version the entry's)."""
    if not isinstance(source, dict) or set(source) not in (
            {"file"}, {"registry", "path"}, {"azphalt", "id", "version"},
            {"oci", "digest", "tag"}):
        raise _problem(where, f"{at}.source", f"not {_SHAPES}")
    if "oci" in source:
        return _oci_source(source, version, at, where)
    if "file" in source:
        file = source["file"]
        if not isinstance(file, str) or not bare_file_name(file):
            raise _problem(where, f"{at}.source.file", "not a bare file name")
        return file
    base = source.get("registry", source.get("azphalt"))
    if not (base is None and "registry" in source) and not _base_url(base):
        raise _problem(where, f"{at}.source", "BASE: not an https:// URL ending in / (plain "
                       "http:// only for loopback)")
    if "path" in source:
        if source["path"] != f"cartridges/{identity}/{version}/cartridge.acx":
            raise _problem(where, f"{at}.source.path",
                           "not cartridges/<publisher>/<id>/<version>/cartridge.acx of the "
                           "entry")
    elif (source["id"], source["version"]) != (identity, version):
        raise _problem(where, f"{at}.source", "id and version are not the entry's")
    return origin_text({k: v if v is None else str(v) for k, v in source.items()})


def _oci_source(source: dict[str, object], version: str, at: str, where: Path) -> str:
    repo, digest, tag = source["oci"], source["digest"], source["tag"]
    if not isinstance(repo, str) or not oci_key(repo):
        raise _problem(where, f"{at}.source.oci", "not oci://HOST/REPO (no tag, no digest; "
                       "oci+http:// only for loopback)")
    if not isinstance(digest, str) or not DIGEST_RE.fullmatch(digest):
        raise _problem(where, f"{at}.source.digest", "not sha256:<64 lowercase hex digits>")
    if tag is not None and not (isinstance(tag, str) and TAG_RE.fullmatch(tag)):
        raise _problem(where, f"{at}.source.tag", "not an OCI tag (or null)")
    if isinstance(tag, str) and tag_version(tag) is not None and tag != version_tag(version):
        raise _problem(where, f"{at}.source.tag", f"a version tag that is not {version}")
    return origin_text({"oci": repo, "digest": digest, "tag": tag})


def _base_url(base: object) -> bool:
    return isinstance(base, str) and base.endswith("/") and may_ask(base)


def _names(value: object, ok: Callable[[str], bool], at: str, problem: str,
           where: Path) -> tuple[str, ...]:
    if not isinstance(value, list) or not value:
        raise _problem(where, at, "not a non-empty list")
    for name in value:
        if not isinstance(name, str) or not ok(name):
            raise _problem(where, at, f"{name!r}: {problem}")
    if len(set(value)) != len(value):
        raise _problem(where, at, "a name is listed twice")
    return tuple(sorted(value))


def replace(project: Path, old: bytes | None, new: bytes) -> str | None:
    """Write `new` as the lock if it still holds `old` (None: no lock); a line saying why
    not otherwise (it was changed meanwhile), or None when done (or done already)."""
    where = path_of(project)
    try:
        now = read_bytes(project)
    except LockError as exc:
        return f"{exc}; not rewritten"
    if now == new:
        return None
    if now != old:
        return f"{where} was changed while acxfs worked on it; not rewritten"
    try:
        dirfd = safe_dirs.open_dir(project)
    except (OSError, ValueError) as exc:
        return f"{where}: cannot write it ({exc}); not rewritten"
    try:
        with safe_files.open_new_at(dirfd, NAME, 0o666 & ~current_umask()) as temp:
            temp.write(new)
            temp.commit(replace=True)
    finally:
        os.close(dirfd)
    return None
