"""The library's record of what is installed, where it is linked, and the version floors.

Invariant: a `LibraryState` is only ever written whole, through a temporary file that is
synced and renamed over the old one, so a reader sees the old record or the new one.  It holds
facts the library established itself (digests of its own store files, identities and skills
taken from verified bundles), never text copied from an unchecked file.
"""

from __future__ import annotations

import datetime as dt
import json
import os
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from acxfs.errors import EnvironmentProblem
from acxfs.safe import dirs as safe_dirs
from acxfs.safe import files as safe_files
from acxfs.safe import strict_json

SCHEMA = "acxfs.library/1"


@dataclass(frozen=True)
class Link:
    """A symlink acxfs made: `directory/name -> target`."""

    directory: str
    name: str
    target: str

    @property
    def path(self) -> Path:
        return Path(self.directory) / self.name


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

    @property
    def prefix(self) -> str:
        """Where the daemon serves it: the same path always means the same verified bytes."""
        return f"{self.identity}/{self.version}-{self.digest[:12]}"


@dataclass
class Installed:
    """An identity in the library: the revision served to agents and the one before it."""

    current: Revision
    previous: Revision | None = None
    directories: list[str] = field(default_factory=list)  # agent directories it is linked into
    links: list[Link] = field(default_factory=list)
    suspended: bool = False  # its links were removed because it is not served (trust changed)

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

    def revisions(self) -> list[Revision]:
        """Every revision some scope names: the ones the daemon serves."""
        return [r for item in self.installed.values() for r in item.revisions()] + [
            b.revision for project in self.projects.values() for b in project.bundles.values()]

    def store_files(self) -> set[str]:
        return {r.file for r in self.revisions()}

    def owner_of_skill(self, skill: str) -> str | None:
        """The identity whose current revision offers `skill`."""
        for identity, item in self.installed.items():
            if skill in item.current.skills:
                return identity
        return None

    def to_json(self) -> str:
        doc = {"schema": SCHEMA, "trustDir": self.trust_dir,
               "installed": {k: asdict(v) for k, v in sorted(self.installed.items())},
               "floors": {k: asdict(v) for k, v in sorted(self.floors.items())},
               "projects": {k: asdict(v) for k, v in sorted(self.projects.items())},
               "bindings": {k: asdict(v) for k, v in sorted(self.bindings.items())}}
        return json.dumps(doc, indent=2, sort_keys=True) + "\n"

    @classmethod
    def from_json(cls, text: str, source: Path) -> LibraryState:
        try:
            doc = strict_json.loads(text)
            if not isinstance(doc, dict) or doc.get("schema") != SCHEMA:
                raise ValueError(f"not {SCHEMA}")
            installed = {
                identity: Installed(
                    current=_revision(item["current"]),
                    previous=_revision(item["previous"]) if item.get("previous") else None,
                    directories=[str(d) for d in item["directories"]],
                    links=[Link(**link) for link in item["links"]],
                    suspended=bool(item.get("suspended", False)),
                )
                for identity, item in doc["installed"].items()
            }
            floors = {k: Floor(**f) for k, f in doc["floors"].items()}
            projects = {k: _project(p) for k, p in doc.get("projects", {}).items()}
            bindings = {k: Binding(**b) for k, b in doc.get("bindings", {}).items()}
            return cls(str(doc["trustDir"]), installed, floors, projects=projects,
                       bindings=bindings)
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            raise EnvironmentProblem(f"the library state {source} is damaged ({exc}); "
                                     "acxfs will not guess what is installed") from exc


def _revision(doc: dict[str, object]) -> Revision:
    return Revision(**doc)  # type: ignore[arg-type]


def _project(doc: dict[str, Any]) -> Project:
    bundles = {
        identity: ProjectBundle(
            revision=_revision(b["revision"]), bytes=int(b["bytes"]),
            agents=[str(a) for a in b["agents"]], source=str(b["source"]),
            links=[Link(**link) for link in b["links"]], suspended=bool(b["suspended"]))
        for identity, b in doc["bundles"].items()
    }
    exclude = doc["exclude_file"]
    return Project(bundles, None if exclude is None else str(exclude),
                   [str(line) for line in doc["exclude_lines"]])


def now_text() -> str:
    return dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def load_state(path: Path) -> LibraryState | None:
    """The state, or None for a library that was never made."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise EnvironmentProblem(f"cannot read the library state {path} ({exc.strerror})") from exc
    return LibraryState.from_json(text, path)


def save_state(path: Path, state: LibraryState) -> None:
    write_private(path, state.to_json())


def write_private(path: Path, text: str) -> None:
    """Replace one of the library's own files whole (synced, then renamed into place)."""
    directory = safe_dirs.open_dir(path.parent)  # the library's own: no link on the way
    try:
        safe_files.replace_file_at(directory, path.name, text.encode(), 0o600)
    finally:
        os.close(directory)
