"""A library change worked out before it is made: the state after it and the link steps.

Invariant: a `Plan` only computes; it touches no file.  Its link steps take the links of
an identity from the revision served now to the one served after, in each agent directory
the identity is linked into: links of kept skills are re-pointed (one rename each), links of
dropped skills removed, links of new skills made.  Store files no revision names any more are
deleted only after the new state is committed.  In an agent directory served whole
(`acxfs.library.store.views`) links are recorded, never made: the one link that is the
directory is re-pointed to the view showing them, whenever what it shows changes.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from pathlib import Path

from acxfs.errors import RefusedError
from acxfs.library.changes import journal
from acxfs.library.links.agent_links import Link
from acxfs.library.store import owners, versions, views
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

    def serve_whole(self, directory: str) -> None:
        """Serve the agent directory `directory` whole: the links acxfs made in it go (the
        state keeps recording them), and the directory becomes one link to their view."""
        self.after.whole.setdefault(directory, "")  # the view it links to is set by `intent`
        for item in self.after.installed.values():
            self.remove.extend(link for link in item.links if link.directory == directory)

    def serve_links(self, directory: str) -> None:
        """Serve the agent directory `directory` as links again: the link that is the
        directory becomes an empty directory, and every recorded link is made in it."""
        self.after.whole.pop(directory, None)
        for item in self.after.installed.values():
            self.make.extend(link for link in item.links if link.directory == directory)

    def views_changed(self, mnt: Path) -> bool:
        """Whether a directory served whole would link to another view than it does."""
        return bool(whole_steps(self.before, self.after, mnt))

    def intent(self, op: str, mnt: Path) -> journal.Intent:
        return library_intent(op, self.before, self.after, mnt, self.make, self.repoint,
                              self.remove)


def library_intent(op: str, before: LibraryState, after: LibraryState, mnt: Path,
                   make: list[Link] | None = None,
                   repoint: list[tuple[Link, Link]] | None = None,
                   remove: list[Link] | None = None) -> journal.Intent:
    """The intent that takes the library from `before` to `after` (its link steps given):
    the steps of links in a directory served whole (before, for a link there; after, for a
    link made there) are left out, and each such directory is linked to the view showing
    `after`'s links in it, which `after` records."""
    was, now = set(before.whole), set(after.whole)
    made = [link for link in make or [] if link.directory not in now]
    gone = [link for link in remove or [] if link.directory not in was]
    moved: list[tuple[Link, Link]] = []
    for old, new in repoint or []:
        if old.directory not in was and new.directory not in now:
            moved.append((old, new))
        elif old.directory not in was:
            gone.append(old)
        elif new.directory not in now:
            made.append(new)
    whole = whole_steps(before, after, mnt)
    for step in whole:
        if step.new is not None:
            after.whole[step.directory] = step.new
    dropped = sorted(before.store_files() - after.store_files())
    return journal.Intent(op, make=made, repoint=moved, remove=gone, whole=whole,
                          state=after.to_json(), delete_files=dropped)


def whole_steps(before: LibraryState, after: LibraryState, mnt: Path) -> list[journal.WholeStep]:
    """How each directory served whole, before or after, changes: linked to the view showing
    `after`'s links in it where that is not the view `before` records, or a directory of
    links again where `after` no longer serves it whole."""
    links = after.links()
    steps: list[journal.WholeStep] = []
    for directory in sorted(after.whole):
        view = views.view_target(mnt, links, directory)
        if before.whole.get(directory) != view:
            steps.append(journal.WholeStep(directory, before.whole.get(directory), view))
    return steps + [journal.WholeStep(d, before.whole[d], None)
                    for d in sorted(set(before.whole) - set(after.whole))]
