"""A change of one project worked out before it is made: its links, its exclude lines and the
state after it.

Invariant: a project's links are `DIR/<agent directory>/<skill>` for the agents its lock names,
each pointing at the daemon's immutable path of the revision the lock names; a plan makes a
link only where the project has none, re-points or removes only links acxfs recorded, and adds
to the exclude file only lines that were not there, recording them as its own so that it later
removes exactly those.  Planning reads what is at the link paths and in the exclude file; it
changes nothing.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from pathlib import Path

from acxfs.library.changes.journal import Intent, ProjectFiles
from acxfs.library.changes.plan import target
from acxfs.library.links import agent_links, git_exclude
from acxfs.library.links.agent_links import Link
from acxfs.library.links.agents import CLAUDE, SHARED
from acxfs.library.links.git_exclude import WorkTree
from acxfs.library.store.state import LibraryState, Project, ProjectBundle, Revision


@dataclass(frozen=True)
class Wanted:
    """One bundle a project shall have after the change."""

    revision: Revision
    bytes: int
    agents: tuple[str, ...]
    source: str


PROJECT_DIRECTORIES = {"agents": SHARED, "claude": CLAUDE}  # by lockfile.PROJECT_AGENTS


def agent_directory(root: Path, agent: str) -> Path:
    return root / PROJECT_DIRECTORIES[agent]


def links_of(root: Path, mnt: Path, rev: Revision, agents: tuple[str, ...]) -> list[Link]:
    return [Link(str(agent_directory(root, agent)), skill, target(mnt, rev, skill))
            for agent in sorted(agents) for skill in sorted(rev.skills)]


@dataclass
class ProjectPlan:
    root: Path
    before: LibraryState
    after: LibraryState
    make: list[Link] = field(default_factory=list)
    repoint: list[tuple[Link, Link]] = field(default_factory=list)
    remove: list[Link] = field(default_factory=list)
    files: ProjectFiles | None = None

    @property
    def changes_links(self) -> bool:
        return bool(self.make or self.repoint or self.remove)

    def changes(self) -> bool:
        """Whether carrying the plan out would change anything."""
        if self.changes_links or self.before.to_json() != self.after.to_json():
            return True
        files = self.files
        if files is None:
            return False
        if files.lock_new is not None and files.lock_new != files.lock_old:
            return True
        if files.exclude is None:
            return False
        present = git_exclude.present(Path(files.exclude))
        return bool(set(files.exclude_add) - present or set(files.exclude_remove) & present)

    def intent(self, op: str) -> Intent:
        dropped = sorted(self.before.store_files() - self.after.store_files())
        return Intent(op, make=self.make, repoint=self.repoint, remove=self.remove,
                      state=self.after.to_json(), delete_files=dropped, project=self.files)


def plan(state: LibraryState, root: Path, wanted: dict[str, Wanted] | None, mnt: Path,
         tree: WorkTree | None, lock: tuple[str | None, str] | None = None) -> ProjectPlan:
    """Take the project at `root` to `wanted` (None: forget the project here), its exclude
    lines to the links it will have, and its lock from `lock[0]` to `lock[1]` when given."""
    old = state.projects.get(str(root), Project())
    result = ProjectPlan(root, state, copy.deepcopy(state))
    recorded = {link.path: link for link in old.links()}
    bundles: dict[str, ProjectBundle] = {}
    new_paths: set[Path] = set()
    for identity, w in sorted((wanted or {}).items()):
        had = old.bundles.get(identity)
        if had is not None and had.withdrawn is not None and \
                had.revision.digest == w.revision.digest:  # its source pulled it: no links
            bundles[identity] = ProjectBundle(w.revision, w.bytes, sorted(w.agents), w.source,
                                              [], suspended=True, withdrawn=had.withdrawn)
            continue
        links = links_of(root, mnt, w.revision, w.agents)
        for link in links:
            new_paths.add(link.path)
            before = recorded.get(link.path)
            if before is not None and before.target != link.target:
                result.repoint.append((before, link))
            elif before is None or agent_links.state_of(link) != "ok":
                result.make.append(link)
        bundles[identity] = ProjectBundle(w.revision, w.bytes, sorted(w.agents), w.source, links)
    result.remove = [link for path, link in recorded.items() if path not in new_paths]
    lines: list[str] = []
    exclude: str | None = None
    add: list[str] = []
    drop = list(old.exclude_lines)
    if tree is not None and wanted is not None:
        exclude = str(tree.exclude)
        ours = old.exclude_lines if old.exclude_file == exclude else []
        present = git_exclude.present(tree.exclude)
        want = sorted({git_exclude.line_for(tree, path) for path in new_paths})
        lines = [line for line in want if line in ours or line not in present]
        add = lines
        drop = [line for line in ours if line not in want]
        if old.exclude_file is not None and old.exclude_file != exclude:
            drop = []  # the project moved to another work tree: its old lines stay
    elif old.exclude_file is not None:
        exclude = old.exclude_file
    if wanted is None:
        result.after.projects.pop(str(root), None)
    else:
        result.after.projects[str(root)] = Project(bundles, exclude if lines else None, lines)
    result.files = ProjectFiles(str(root), exclude, add, drop,
                                None if lock is None else lock[0],
                                None if lock is None else lock[1])
    return result


def reconcile(after: LibraryState, served: dict[str, str], refused: dict[str, str],
              mnt: Path) -> tuple[list[Link], list[Link], list[str]]:
    """In `after`: unlink the project bundles the daemon does not serve, link again those it
    serves again; the links to make, those to remove, and what to tell the user."""
    make: list[Link] = []
    remove: list[Link] = []
    notes: list[str] = []
    for directory, project in sorted(after.projects.items()):
        for identity, b in sorted(project.bundles.items()):
            prefix = b.revision.prefix
            if prefix in served and b.suspended and b.withdrawn is None:
                b.links = links_of(Path(directory), mnt, b.revision, tuple(b.agents))
                make.extend(b.links)
                b.suspended = False
                notes.append(f"serving {identity} again in {directory}; linked")
            elif prefix not in served and not b.suspended:
                remove.extend(b.links)
                b.links = []
                b.suspended = True
                notes.append(f"not serving {identity} in {directory}: "
                             f"{refused.get(prefix, 'not loaded')}; project links removed")
    return make, remove, notes
