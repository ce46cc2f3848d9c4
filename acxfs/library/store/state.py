"""The library's record of what is installed, where it is linked, and the version floors.

Invariant: a `LibraryState` is only ever written whole, through a temporary file that is
synced and renamed over the old one, so a reader sees the old record or the new one.  It holds
facts the library established itself (digests of its own store files, identities and skills
taken from verified bundles), never text copied from an unchecked file.  It is read back as
the untrusted input it is (`acxfs.safe.own_files`): a regular file of bounded size and depth
whose every field is of the kind its table says, every store file name of the store's form,
every link inside an agent directory of this home and aimed into the library's mountpoint;
anything else is `DamagedState` (`acxfs repair` rebuilds the state).
"""

from __future__ import annotations

import datetime as dt
import json
import os
import re
from dataclasses import asdict, dataclass, field
from pathlib import Path

from acxfs import semver
from acxfs.container import FORMAT_NAMES, SEGMENT_RE
from acxfs.errors import EnvironmentProblem
from acxfs.library.links.agent_links import Link
from acxfs.library.links.agents import AGENTS
from acxfs.library.store import views
from acxfs.library.store.served_names import served_name
from acxfs.paths import home as user_home
from acxfs.safe import dirs as safe_dirs
from acxfs.safe import files as safe_files
from acxfs.safe import own_files
from acxfs.safe.own_files import Field, boolean, integer, list_of, map_of, optional, text
from acxfs.skills import valid_name
from acxfs.sources.acx_index import instant
from acxfs.sources.memory import Published, SourceMemory
from acxfs.sources.oci.reference import DIGEST_RE, TAG_RE, is_oci, oci_key
from acxfs.sources.release import PULLED, Lifecycle

SCHEMA = "acxfs.library/1"
UPDATE_MODES = ("auto", "notify", "off")
DEFAULT_UPDATES = "notify"
DEFAULT_REFRESH_EVERY = 3600  # seconds between the daemon's checks of the sources
SHORTEST_REFRESH, LONGEST_REFRESH = 1, 30 * 86400  # seconds: the intervals a library may keep
STATUSES = ("deprecated", "superseded", *PULLED)


@dataclass(frozen=True)
class Revision:
    """One installed bundle file: what the full check established about it."""

    digest: str  # sha256 hex of the file's bytes; the store file's name
    file: str  # the store file's name
    format: str
    identity: str
    version: str
    manifest: str  # the signed manifest (or package) digest: what makes a release
    keyid: str
    publisher: str | None
    skills: dict[str, str]  # skill name -> its directory in the bundle's verified tree
    installed_at: str
    source: str | None = None  # the normalised source it was installed from (None: a file)
    coordinate: str | None = None  # where at that source: an index path, or ID@VERSION
    lifecycle: str | None = None  # what the source said of the release when installed

    @property
    def prefix(self) -> str:
        """Where the daemon serves it: the same path always means the same verified bytes."""
        return served_name(self.identity, self.version, self.digest)


@dataclass
class Installed:
    """An identity in the library: the revision served to agents and the one before it."""

    current: Revision
    previous: Revision | None = None
    directories: list[str] = field(default_factory=list)  # agent directories it is linked into
    links: list[Link] = field(default_factory=list)
    suspended: bool = False  # its links were removed because it is not served (trust changed)
    withdrawn: str | None = None  # why its links were removed: its source pulled the release
    updates: str = DEFAULT_UPDATES  # what a newer release at its source does: auto, notify, off

    def revisions(self) -> list[Revision]:
        return [self.current] + ([self.previous] if self.previous else [])


@dataclass(frozen=True)
class Floor:
    """The highest version of an identity ever installed (rollback protection)."""

    version: str
    manifest: str
    installed_at: str


@dataclass(frozen=True)
class Binding:
    """Who an identity belongs to: the signed publisher, and the key, that installed it
    (publisher continuity).  Kept across `remove` unless `--forget`, like the floor."""

    publisher: str | None
    keyid: str
    bound_at: str


@dataclass
class ProjectBundle:
    """One entry of a project's lock as this machine installed it: the revision (checked in
    full), its size, the agents it is linked for, the file name it came from, its links."""

    revision: Revision
    bytes: int
    agents: list[str]
    source: str
    links: list[Link] = field(default_factory=list)
    suspended: bool = False  # its links were removed because it is not served (trust changed)
    withdrawn: str | None = None  # why its links were removed: its source pulled the release


@dataclass
class Project:
    """A project directory (its absolute real path) and what acxfs made for it there."""

    bundles: dict[str, ProjectBundle] = field(default_factory=dict)  # by identity
    exclude_file: str | None = None  # the git exclude file acxfs added lines to
    exclude_lines: list[str] = field(default_factory=list)  # the lines it added there

    def links(self) -> list[Link]:
        return [link for b in self.bundles.values() for link in b.links]


@dataclass
class LibraryState:
    trust_dir: str
    installed: dict[str, Installed] = field(default_factory=dict)  # by identity
    floors: dict[str, Floor] = field(default_factory=dict)  # by identity
    projects: dict[str, Project] = field(default_factory=dict)  # by directory
    bindings: dict[str, Binding] = field(default_factory=dict)  # by identity
    sources: dict[str, SourceMemory] = field(default_factory=dict)  # by normalised source
    refresh_every: int | None = DEFAULT_REFRESH_EVERY  # seconds; None: the daemon checks none
    # agent directories served whole (`views`): directory -> the view its link points to
    whole: dict[str, str] = field(default_factory=dict)

    def links(self) -> list[Link]:
        """Every link of the installed identities (in a directory served whole: recorded,
        not made; its view shows them)."""
        return [link for item in self.installed.values() for link in item.links]

    def views(self, mnt: Path) -> dict[str, dict[str, str]]:
        """The views the agent directories served whole show now: view name -> content."""
        links = self.links()
        found: dict[str, dict[str, str]] = {}
        for directory in self.whole:
            content = views.shown(links, directory)
            found[views.view_name(content)] = content
        return found

    def revisions(self) -> list[Revision]:
        """Every revision some scope names: the ones the daemon serves."""
        return [r for item in self.installed.values() for r in item.revisions()] + [
            b.revision for project in self.projects.values() for b in project.bundles.values()]

    def pulled_prefixes(self) -> dict[str, str]:
        """The served paths of releases their source withdrew, yanked or revoked (no longer
        served), with why."""
        found = {item.current.prefix: item.withdrawn for item in self.installed.values()
                 if item.withdrawn is not None}
        for rev in self.revisions():  # and any revision of a release a source pulled
            life = self.pulled_release(rev)
            if life is not None and rev.prefix not in found:
                found[rev.prefix] = (f"{rev.identity} {rev.version} is {life.status} "
                                     f"({rev.source}): {life.reason or 'no reason given'}")
        for project in self.projects.values():
            for b in project.bundles.values():
                if b.withdrawn is not None:
                    found[b.revision.prefix] = b.withdrawn
        return found

    def pulled_release(self, rev: Revision) -> Lifecycle | None:
        """What the source `rev` came from said when it pulled its release (None: it did
        not, as far as acxfs remembers)."""
        memory = self.sources.get(rev.source) if rev.source else None
        return memory.pulled.get(f"{rev.identity} {rev.version}") if memory else None

    def store_files(self) -> set[str]:
        return {r.file for r in self.revisions()}

    def owner_of_skill(self, skill: str) -> str | None:
        """The identity whose current revision offers `skill`."""
        for identity, item in self.installed.items():
            if skill in item.current.skills:
                return identity
        return None

    def to_json(self) -> str:
        doc: dict[str, object] = {"schema": SCHEMA, "trustDir": self.trust_dir,
               "installed": {k: asdict(v) for k, v in sorted(self.installed.items())},
               "floors": {k: asdict(v) for k, v in sorted(self.floors.items())},
               "projects": {k: asdict(v) for k, v in sorted(self.projects.items())},
               "bindings": {k: asdict(v) for k, v in sorted(self.bindings.items())},
               "refreshEvery": self.refresh_every}
        if self.whole:
            doc["whole"] = dict(sorted(self.whole.items()))
        if self.sources:
            doc["sources"] = {k: v.to_doc() for k, v in sorted(self.sources.items())}
        return json.dumps(doc, indent=2, sort_keys=True) + "\n"

    @classmethod
    def from_json(cls, text: str | bytes, source: Path, places: Places | None = None,
                  prefix: str = "") -> LibraryState:
        """The state `text` holds (`DamagedState` unless every field is of its kind)."""
        places = Places.of(source.parent) if places is None else places
        return own_files.parse(text, places.state_table(), source=str(source),
                               max_depth=MAX_DEPTH, prefix=prefix)


# --- reading the state: one field table per record kind ----------------------------------

MAX_STATE_BYTES = 16 * 1024 * 1024  # some ten thousand bundles
MAX_DEPTH = 16  # the state nests six deep
STORE_NAME = re.compile(r"([0-9a-f]{64})\.([a-z0-9]{1,16})")


def store_name_problem(name: str) -> str | None:
    """What keeps `name` from being a store file's name (`<sha256 hex>.<format>`)."""
    match = STORE_NAME.fullmatch(name)
    if match is None:
        return "not a store file name (<64 hex digits>.<format>)"
    if match.group(2) not in FORMAT_NAMES:
        return "not a store file name (an unknown format)"
    return None


def _digest(value: str) -> str | None:
    return None if re.fullmatch(r"[0-9a-f]{64}", value) else "not a sha256 (64 hex digits)"


def _format(value: str) -> str | None:
    return None if value in FORMAT_NAMES else "not a known format"


def _identity(value: str) -> str | None:
    parts = value.split("/")
    if len(parts) > 2 or not all(SEGMENT_RE.fullmatch(part) for part in parts):
        return "not an identity (one or two safe path segments)"
    return None


def _version(value: str) -> str | None:
    if SEGMENT_RE.fullmatch(value) and semver.is_semver(value):
        return None
    return "not a SemVer version"


def _skill(value: str) -> str | None:
    return None if valid_name(value) else "not a skill name"


def _absolute(value: str) -> str | None:
    return None if os.path.isabs(value) and "\0" not in value else "not an absolute path"


def _update_mode(value: str) -> str | None:
    return None if value in UPDATE_MODES else f"not one of {', '.join(UPDATE_MODES)}"


def _schema(value: str) -> str | None:
    return None if value == SCHEMA else f"not {SCHEMA}"


def _revision_check(rev: Revision) -> tuple[str, str] | None:
    if rev.file != f"{rev.digest}.{rev.format}":
        return "file", "not the store name of its digest and format"
    return None


def _installed_check(item: Installed) -> tuple[str, str] | None:
    if item.previous is not None and item.previous.identity != item.current.identity:
        return "previous.identity", "not the identity of the current revision"
    return None


def _source_key(value: str) -> str | None:
    """A normalised source: an absolute directory, a URL with one trailing /, or an OCI
    repository (oci://HOST/REPO)."""
    if is_oci(value):
        return None if oci_key(value) else "not an OCI repository (oci://HOST/REPO)"
    if _absolute(value) is None or ("://" in value and value.endswith("/")):
        return None
    return "not a source (an absolute directory or a URL ending in /)"


def _oci_digest(value: str) -> str | None:
    return None if DIGEST_RE.fullmatch(value) else "not sha256:<64 lowercase hex digits>"


def _tag(value: str) -> str | None:
    return None if TAG_RE.fullmatch(value) else "not an OCI tag"


def _instant(value: str) -> str | None:
    try:
        instant(value)
    except ValueError:
        return "not an RFC 3339 date-time"
    return None


def _status(value: str) -> str | None:
    return None if value in STATUSES else f"not one of {', '.join(STATUSES)}"


def _coordinate(value: str) -> str | None:
    name, _, version = value.rpartition(" ")
    return None if _identity(name) is None and _version(version) is None else \
        "not an identity and a version"


def _source_memory_table() -> own_files.Table[SourceMemory]:
    """What acxfs remembers of a source (`acxfs.sources.memory`)."""
    lifecycle = own_files.Table(Lifecycle, {
        "status": Field(text(_status)),
        "date": Field(optional(text(_instant))),
        "reason": Field(optional(text())),
        "successor": Field(optional(text())),
    })
    published = own_files.Table(Published, {
        "manifest": Field(text(_oci_digest)),
        "layer": Field(text(_oci_digest)),
        "signed": Field(text(_oci_digest)),
    })
    when = Field(optional(text(_instant)), default=None)
    return own_files.Table(SourceMemory, {
        "generatedAt": Field(when.kind, attr="generated_at", default=None),
        "generatedSeen": Field(when.kind, attr="generated_seen", default=None),
        "updatedAt": Field(when.kind, attr="updated_at", default=None),
        "updatedSeen": Field(when.kind, attr="updated_seen", default=None),
        "revokedAt": Field(when.kind, attr="revoked_at", default=None),
        "coordinates": Field(map_of(_coordinate, text()), default={}),
        "pulled": Field(map_of(_coordinate, lifecycle), default={}),
        "identity": Field(optional(text(_identity)), default=None),
        "published": Field(map_of(_tag, published), default={}),
    })


@dataclass(frozen=True)
class Places:
    """What the library's files may name: the daemon's mountpoint (every link target lies
    inside it) and the agent directories of the library's home (every link lies in one)."""

    mnt: str
    agent_directories: frozenset[str]

    @classmethod
    def of(cls, root: Path, home: Path | None = None) -> Places:
        home = user_home() if home is None else home
        return cls(str(root / "mnt"), frozenset(str(home / a.directory) for a in AGENTS))

    def agent_directory(self, value: str) -> str | None:
        if value in self.agent_directories:
            return None
        return "not an agent directory of this home (docs/library.md, Agents)"

    def link_target(self, value: str) -> str | None:
        inside = value.startswith(self.mnt + "/") and os.path.normpath(value) == value
        return None if inside else f"not a path inside the library's mountpoint {self.mnt}"

    def view_target(self, value: str) -> str | None:
        return views.view_target_problem(self.mnt, value)

    def project_directory(self, value: str) -> str | None:
        """An agent directory of this home, or a project's (`DIR/.agents/skills`,
        `DIR/.claude/skills`, DIR absolute)."""
        if self.agent_directory(value) is None:
            return None
        parent, leaf = os.path.split(value)
        project, hidden = os.path.split(parent)
        if leaf == "skills" and hidden in (".agents", ".claude") and _absolute(project) is None \
                and os.path.normpath(value) == value:
            return None
        return "not an agent directory of this home or of a project"

    def link_table(self, projects: bool = False) -> own_files.Table[Link]:
        """Links in the agent directories of this home (with `projects`, of projects too)."""
        directory = self.project_directory if projects else self.agent_directory
        return own_files.Table(Link, {
            "directory": Field(text(directory)),
            "name": Field(text(_skill)),
            "target": Field(text(self.link_target)),
        })

    def state_table(self) -> own_files.Table[LibraryState]:
        revision = own_files.Table(Revision, {
            "digest": Field(text(_digest)),
            "file": Field(text(store_name_problem)),
            "format": Field(text(_format)),
            "identity": Field(text(_identity)),
            "version": Field(text(_version)),
            "manifest": Field(text()),
            "keyid": Field(text()),
            "publisher": Field(optional(text())),
            "skills": Field(map_of(_skill, text())),
            "installed_at": Field(text()),
            "source": Field(optional(text(_source_key)), default=None),
            "coordinate": Field(optional(text()), default=None),
            "lifecycle": Field(optional(text()), default=None),
        }, check=_revision_check)
        installed = own_files.Table(Installed, {
            "current": Field(revision),
            "previous": Field(optional(revision)),
            "directories": Field(list_of(text(self.agent_directory))),
            "links": Field(list_of(self.link_table())),
            "suspended": Field(boolean, default=False),
            "withdrawn": Field(optional(text()), default=None),
            "updates": Field(text(_update_mode), default=DEFAULT_UPDATES),
        }, check=_installed_check)
        floor = own_files.Table(Floor, {
            "version": Field(text(_version)),
            "manifest": Field(text()),
            "installed_at": Field(text()),
        })
        binding = own_files.Table(Binding, {
            "publisher": Field(optional(text())),
            "keyid": Field(text()),
            "bound_at": Field(text()),
        })
        project_link = own_files.Table(Link, {  # inside its project: checked in _state_check
            "directory": Field(text(_absolute)),
            "name": Field(text(_skill)),
            "target": Field(text(self.link_target)),
        })
        project_bundle = own_files.Table(ProjectBundle, {
            "revision": Field(revision),
            "bytes": Field(integer),
            "agents": Field(list_of(text(_project_agent))),
            "source": Field(text()),
            "links": Field(list_of(project_link)),
            "suspended": Field(boolean, default=False),
            "withdrawn": Field(optional(text()), default=None),
        })
        project = own_files.Table(Project, {
            "bundles": Field(map_of(_identity, project_bundle)),
            "exclude_file": Field(optional(text(_absolute))),
            "exclude_lines": Field(list_of(text())),
        })
        return own_files.Table(LibraryState, {
            "schema": Field(text(_schema), attr=None),
            "trustDir": Field(text(_absolute), attr="trust_dir"),
            "installed": Field(map_of(_identity, installed)),
            "floors": Field(map_of(_identity, floor)),
            "projects": Field(map_of(_absolute, project), default={}),
            "bindings": Field(map_of(_identity, binding), default={}),
            "sources": Field(map_of(_source_key, _source_memory_table()), default={}),
            "refreshEvery": Field(optional(integer), attr="refresh_every",
                                  default=DEFAULT_REFRESH_EVERY),
            "whole": Field(map_of(self.agent_directory, text(self.view_target)), default={}),
        }, check=_state_check)


PROJECT_AGENT_DIRS = {"agents": ".agents/skills", "claude": ".claude/skills"}


def _project_agent(value: str) -> str | None:
    return None if value in PROJECT_AGENT_DIRS else "not agents or claude"


def _state_check(state: LibraryState) -> tuple[str, str] | None:
    every = state.refresh_every
    if every is not None and not SHORTEST_REFRESH <= every <= LONGEST_REFRESH:
        return "refreshEvery", f"not between {SHORTEST_REFRESH} and {LONGEST_REFRESH} seconds"
    for identity, item in state.installed.items():
        if item.current.identity != identity:
            return (f"installed[{json.dumps(identity)}].current.identity",
                    "not the identity it is under")
    for directory, project in state.projects.items():
        allowed = {os.path.join(directory, d) for d in PROJECT_AGENT_DIRS.values()}
        for identity, bundle in project.bundles.items():
            where = f"projects[{json.dumps(directory)}].bundles[{json.dumps(identity)}]"
            if bundle.revision.identity != identity:
                return f"{where}.revision.identity", "not the identity it is under"
            for link in bundle.links:
                if link.directory not in allowed:
                    return f"{where}.links", f"{link.directory} is not a skill directory of it"
    return None


def now_text() -> str:
    return dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def load_state(path: Path, places: Places | None = None) -> LibraryState | None:
    """The state, or None for a library that was never made (`DamagedState` when the file
    is not a state acxfs wrote; see `own_files`)."""
    places = Places.of(path.parent) if places is None else places
    try:
        return own_files.read_record(path, places.state_table(), max_bytes=MAX_STATE_BYTES,
                                     max_depth=MAX_DEPTH)
    except OSError as exc:
        raise EnvironmentProblem(f"cannot read the library state {path} ({exc.strerror})") from exc


def save_state(path: Path, state: LibraryState) -> None:
    write_private(path, state.to_json())


def write_private(path: Path, text: str) -> None:
    """Replace one of the library's own files whole (synced, then renamed into place)."""
    directory = safe_dirs.open_dir(path.parent)  # the library's own: no link on the way
    try:
        safe_files.replace_file_at(directory, path.name, text.encode(), 0o600)
    finally:
        os.close(directory)
