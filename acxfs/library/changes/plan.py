"""A library change worked out before it is made: the state after it and the link steps.

Invariant: a `Plan` only computes; it touches no file.  Its link steps take the links of
an identity from the revision served now to the one served after, in each agent directory
the identity is linked into: links of kept skills are re-pointed (one rename each), links of
dropped skills removed, links of new skills made.  Store files no revision names any more are
deleted only after the new state is committed.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from pathlib import Path

from acxfs.errors import RefusedError
from acxfs.library.changes import journal
from acxfs.library.links.agent_links import Link
from acxfs.library.store import owners, versions
from acxfs.library.store.state import Installed, LibraryState, Revision


def target(mnt: Path, rev: Revision, skill: str) -> str:
    return str(mnt / rev.prefix / skill)


@dataclass
class Plan:
    before: LibraryState
    after: LibraryState
    make: list[Link] = field(default_factory=list)
    repoint: list[tuple[Link, Link]] = field(default_factory=list)
    remove: list[Link] = field(default_factory=list)

    @classmethod
    def of(cls, state: LibraryState) -> Plan:
        return cls(state, copy.deepcopy(state))

    def install(self, rev: Revision, directories: list[Path], mnt: Path) -> None:
        """Make `rev` the served revision of its identity (the one before it kept); its floor
        (checked before the plan) is only ever raised here, and its binding to a publisher and
        key (checked too) made or moved to the accepted new key."""
        floor = versions.raised_floor(rev, self.after.floors.get(rev.identity))
        if floor is not None:
            self.after.floors[rev.identity] = floor
        self.after.bindings[rev.identity] = owners.bound(rev, owners.binding_of(self.after,
                                                                               rev.identity))
        item = self.after.installed.get(rev.identity)
        if item is None:
            new = [Link(str(d), skill, target(mnt, rev, skill))
                   for d in directories for skill in sorted(rev.skills)]
            self.make.extend(new)
            self.after.installed[rev.identity] = Installed(rev, None, [str(d) for d in
                                                                       directories], new)
            return
        self.after.installed[rev.identity] = self._relink(item, rev, item.current, mnt)

    def revert(self, identity: str, mnt: Path) -> None:
        item = self.after.installed[identity]
        if item.previous is None:
            raise RefusedError(f"{identity} has no previous revision to go back to")
        life = self.after.pulled_release(item.previous)
        if life is not None:
            raise RefusedError(f"{identity} {item.previous.version} is {life.status} at its "
                               f"source ({life.reason or 'no reason given'}); acxfs does not "
                               "go back to it")
        self.after.installed[identity] = self._relink(item, item.previous, item.current, mnt)

    def _relink(self, item: Installed, rev: Revision, kept: Revision, mnt: Path) -> Installed:
        links: list[Link] = []
        for link in item.links:
            if link.name in rev.skills:
                new = Link(link.directory, link.name, target(mnt, rev, link.name))
                self.repoint.append((link, new))
                links.append(new)
            else:
                self.remove.append(link)
        linked = {(link.directory, link.name) for link in item.links}
        for directory in item.directories:
            for skill in sorted(rev.skills):
                if (directory, skill) not in linked:
                    new = Link(directory, skill, target(mnt, rev, skill))
                    self.make.append(new)
                    links.append(new)
        return Installed(rev, kept, list(item.directories), links, updates=item.updates)

    def suspend(self, identity: str) -> None:
        """Remove the links of an identity that is not served (its trust changed)."""
        item = self.after.installed[identity]
        self.remove.extend(item.links)
        item.links = []
        item.suspended = True

    def resume(self, identity: str, mnt: Path) -> None:
        """Link an identity that is served again."""
        item = self.after.installed[identity]
        new = [Link(d, skill, target(mnt, item.current, skill))
               for d in item.directories for skill in sorted(item.current.skills)]
        self.make.extend(new)
        item.links = new
        item.suspended = False

    def follow_layout(self, mnt: Path) -> None:
        """Re-point every link whose target is not where its revision is served now: the
        links of a library an earlier acxfs made, which served revisions at other paths."""
        for item in self.after.installed.values():
            item.links = [self._served_now(link, item.current, mnt) for link in item.links]
        for project in self.after.projects.values():
            for bundle in project.bundles.values():
                bundle.links = [self._served_now(link, bundle.revision, mnt)
                                for link in bundle.links]

    def _served_now(self, link: Link, rev: Revision, mnt: Path) -> Link:
        now = target(mnt, rev, link.name)
        if link.target == now:
            return link
        moved = Link(link.directory, link.name, now)
        self.repoint.append((link, moved))
        return moved

    def intent(self, op: str) -> journal.Intent:
        keep = self.after.store_files()
        dropped = sorted(self.before.store_files() - keep)
        return journal.Intent(op, make=self.make, repoint=self.repoint, remove=self.remove,
                              state=self.after.to_json(), delete_files=dropped)
