"""Project scope: a directory's committed `acxfs.lock`, and the links that make it real here.

Invariant: a project's links, exclude lines and lock change only under the library's lock,
after every bundle the change needs passed the full check of `add` against this machine's
trust store (the lock confers none), and only through one `journal.Intent`; a lock is written
only by a machine whose project matches it, and `sync` never writes it.  A project's revisions
are its own: the user library's floors neither apply to them nor rise with them.
"""

from __future__ import annotations

import hashlib
import os
import stat
from dataclasses import dataclass
from pathlib import Path

from acxfs.errors import AcxfsError, EnvironmentProblem, LockError, RefusedError, UntrustedError
from acxfs.library.changes import journal, project_plan
from acxfs.library.changes.project_plan import ProjectPlan, Wanted
from acxfs.library.links import agent_links, git_exclude
from acxfs.library.links.agent_links import Link
from acxfs.library.links.git_exclude import WorkTree
from acxfs.library.manager import Library, Remote
from acxfs.library.projects.lock_sources import fetch_locked, origin_for
from acxfs.library.store import lockfile
from acxfs.library.store.bundles import Checked, check_stored, import_bundle
from acxfs.library.store.lockfile import PROJECT_AGENTS, Lock, LockEntry
from acxfs.library.store.state import LibraryState, Project, ProjectBundle, Revision
from acxfs.semver import parse as parse_version
from acxfs.sources.http import Http
from acxfs.sources.spec import is_registry
from acxfs.text import printable
from acxfs.trust.policy import TrustContext

NO_TRUST = "acxfs.lock confers no trust: pin the signer (acxfs trust add)"


def project_root(directory: str, must_exist: bool = True) -> Path:
    """The project `directory` as it is recorded: its absolute real path."""
    root = Path(os.path.realpath(os.path.abspath(directory)))
    if must_exist and not root.is_dir():
        raise EnvironmentProblem(f"{directory}: not a directory")
    return root


def project_agents(names: list[str] | None) -> tuple[str, ...] | None:
    """The agents named by --agent for a project (None: not given)."""
    if names is None:
        return None
    if any(name not in PROJECT_AGENTS for name in names):
        raise EnvironmentProblem("--project links only for the agents and claude directories")
    return tuple(sorted(set(names)))


def entry_of(w: Wanted) -> LockEntry:
    rev = w.revision
    return LockEntry(rev.identity, rev.format, rev.version, rev.digest, w.bytes, rev.manifest,
                     rev.keyid, rev.publisher, tuple(sorted(rev.skills)), tuple(sorted(w.agents)),
                     w.source)


def wanted_of(project: Project) -> dict[str, Wanted]:
    return {identity: Wanted(b.revision, b.bytes, tuple(b.agents), b.source)
            for identity, b in project.bundles.items()}


def differences(root: Path, project: Project, lock: Lock | None) -> list[str]:
    """How the project here differs from its lock (its record and its links; no re-check)."""
    entries = lock.by_identity() if lock else {}
    found: list[str] = []
    for identity, entry in sorted(entries.items()):
        have = project.bundles.get(identity)
        if have is None:
            found.append(f"{identity} {entry.version}: not installed here")
        elif entry_of(Wanted(have.revision, have.bytes, tuple(have.agents), have.source)) \
                != entry:
            found.append(f"{identity}: another revision here ({have.revision.version}, sha256 "
                         f"{have.revision.digest[:12]}...) than in acxfs.lock ({entry.version}, "
                         f"sha256 {entry.sha256[:12]}...)")
    for identity in sorted(set(project.bundles) - set(entries)):
        found.append(f"{identity}: installed here but not in acxfs.lock")
    for link in project.links():
        condition = agent_links.state_of(link)
        if condition != "ok":
            found.append(f"link {condition}: {link.path}")
    return found


def _sha256_of(path: Path) -> str | None:
    """The sha256 of the regular file `path` (no link followed), or None."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None
        hasher = hashlib.sha256()
        while chunk := os.read(fd, 1 << 20):
            hasher.update(chunk)
        return hasher.hexdigest()
    finally:
        os.close(fd)


@dataclass(frozen=True)
class Differences:
    """What `sync --check` found: the project, what its lock names, and each difference."""

    root: Path
    bundles: int
    skills: int
    lines: list[str]


@dataclass
class Projects:
    """The project operations of one user's library."""

    library: Library

    def _say(self, line: str) -> None:
        self.library.say(printable(line))

    def _note(self, line: str) -> None:
        self.library.note(printable(f"acxfs: note: {line}"))

    def _refuse_conflicts(self, pp: ProjectPlan, tree: WorkTree | None) -> None:
        """Refuse when a link to make has anything acxfs did not make (or git tracks) there."""
        tracked = git_exclude.tracked(pp.root, [link.path for link in pp.make]) if tree else {}
        for link in pp.make:
            if link.path in tracked:
                flag = "" if tracked[link.path] == str(link.path) else "-r "
                raise RefusedError(f"{link.path} already exists and acxfs did not make it; acxfs "
                                   "never replaces what it did not make (tracked by git: "
                                   f"git rm {flag}--cached {link.path})")
            problem = agent_links.conflict(link)
            if problem:
                raise RefusedError(f"{problem}; acxfs never replaces what it did not make")

    def _not_git(self, root: Path, tree: WorkTree | None) -> None:
        if tree is None:
            self._note(f"{root} is not a git work tree; do not commit its skill links (they "
                       "point into this home)")

    def _carry_out(self, pp: ProjectPlan, op: str) -> None:
        lib = self.library
        if pp.changes():
            lib._tell(journal.carry_out(lib.paths, pp.intent(op), lib._sync))

    def _report_links(self, pp: ProjectPlan) -> None:
        for _, new in pp.repoint:
            self._say(f"re-pointed {new.path} -> {new.target}")
        for link in pp.remove:
            self._say(f"unlinked {link.path}")
        for link in pp.make:
            self._say(f"linked {link.path} -> {link.target}")

    # --- add, update ---------------------------------------------------------------------

    def add(self, directory: str, files: list[str], agent_names: list[str] | None,
            allow_downgrade: bool = False, update_only: bool = False,
            remote: Remote | None = None) -> int:
        root = project_root(directory)
        chosen = project_agents(agent_names)
        lib = self.library
        lock_path = lockfile.path_of(root)
        with journal.locked(lib.paths):
            lib.recover()
            state = lib.state()
            trust = lib.trust(state)
            lock = lockfile.read(root)
            project = state.projects.get(str(root), Project())
            if differences(root, project, lock):
                raise RefusedError(f"{root} does not match {lock_path}; run acxfs sync "
                                   f"--project {root} first")
            wanted = wanted_of(project)
            before = dict(wanted)
            checked: list[Checked] = []
            loading = False
            try:
                for file in files:
                    result = lib.import_verified(file, trust)
                    checked.append(result)
                    rev = result.revision
                    self._check_entry(file, rev, before, wanted, checked[:-1], update_only,
                                      allow_downgrade, lock_path)
                    old = before.get(rev.identity)
                    agents = chosen or (old.agents if old else PROJECT_AGENTS)
                    size = os.stat(lib.paths.store / rev.file).st_size
                    wanted[rev.identity] = Wanted(rev, size, agents, os.path.basename(file))
                for label, result in remote.fetch(state, trust) if remote else []:
                    checked.append(result)
                    rev = result.revision
                    self._check_entry(label, rev, before, wanted, checked[:-1], update_only,
                                      allow_downgrade, lock_path)
                    old = before.get(rev.identity)
                    wanted[rev.identity] = Wanted(
                        rev, os.stat(lib.paths.store / rev.file).st_size,
                        chosen or (old.agents if old else PROJECT_AGENTS), origin_for(rev))
                tree = git_exclude.work_tree(root)
                new = lockfile.render([entry_of(w) for w in wanted.values()]).decode()
                old_text = None if lock is None else lock.data.decode()
                pp = project_plan.plan(state, root, wanted, lib.paths.mnt, tree,
                                       (old_text, new))
                if remote:
                    remote.record(pp.after)
                self._refuse_conflicts(pp, tree)
                journal.fault_point("project-add:checked")
                loading = True
                lib._serve([c.revision for c in checked], state)
                journal.fault_point("project-add:served")
            except BaseException:
                lib.abandon(checked, loading)
                raise
            self._carry_out(pp, "project-add")
        for c in checked:
            rev = c.revision
            old = before.get(rev.identity)
            if old is None:
                for skill in sorted(rev.skills):
                    where = ", ".join(str(project_plan.agent_directory(root, a) / skill)
                                      for a in wanted[rev.identity].agents)
                    self._say(f"{skill}: {rev.identity} {rev.version} -> {where}")
            else:
                self._say(f"{rev.identity}: {old.revision.version} -> {rev.version} in "
                          f"{lock_path}")
        self._not_git(root, tree)
        return 0

    @staticmethod
    def _check_entry(file: str, rev: Revision, before: dict[str, Wanted],
                     wanted: dict[str, Wanted], earlier: list[Checked], update_only: bool,
                     allow_downgrade: bool, lock_path: Path) -> None:
        """RefusedError when `rev` may not enter the lock: named twice, not locked yet for an
        update, locked already, below the locked version, or a skill name taken."""
        if any(c.revision.identity == rev.identity for c in earlier):
            raise RefusedError(f"{file}: {rev.identity} is named twice in this command")
        old = before.get(rev.identity)
        if old is None and update_only:
            raise RefusedError(f"{file}: {rev.identity} is not in {lock_path} (acxfs add "
                               "--project it)")
        if old is not None and old.revision.digest == rev.digest:
            raise RefusedError(f"{file}: {rev.identity} {rev.version} is in {lock_path} already")
        if old is not None and not allow_downgrade:
            mine, locked = parse_version(rev.version), parse_version(old.revision.version)
            if mine < locked:
                raise RefusedError(
                    f"rollback refused: {rev.identity} {rev.version} is older than "
                    f"{old.revision.version} in {lock_path}; --allow-downgrade to lock it anyway")
            if mine == locked and rev.manifest != old.revision.manifest:
                raise RefusedError(
                    f"refused: {rev.identity} {rev.version} is another release under the number "
                    f"{old.revision.version} in {lock_path} (its signed manifest differs); "
                    "--allow-downgrade to lock it anyway")
        for identity, w in wanted.items():
            if identity != rev.identity and set(w.revision.skills) & set(rev.skills):
                skill = sorted(set(w.revision.skills) & set(rev.skills))[0]
                raise RefusedError(f"{file}: skill {skill!r} is already offered by {identity} in "
                                   "this project; two bundles cannot serve one skill name")

    # --- remove --------------------------------------------------------------------------

    def remove(self, directory: str, names: list[str]) -> int:
        lib = self.library
        with journal.locked(lib.paths):
            lib.recover()
            state = lib.state()
            if not names:
                root = project_root(directory, must_exist=False)
                if str(root) not in state.projects:
                    raise RefusedError(f"{root} is not a project of this library (see: acxfs "
                                       "list)")
                pp = project_plan.plan(state, root, None, lib.paths.mnt, None)
                self._carry_out(pp, "project-remove")
                self._report_links(pp)
                self._say(f"forgot the project {root} (its acxfs.lock is left as it is)")
                return 0
            root = project_root(directory)
            lock_path = lockfile.path_of(root)
            lock = lockfile.read(root)
            project = state.projects.get(str(root), Project())
            if differences(root, project, lock):
                raise RefusedError(f"{root} does not match {lock_path}; run acxfs sync "
                                   f"--project {root} first")
            wanted = wanted_of(project)
            identities = list(dict.fromkeys(self._resolve(wanted, name, lock_path)
                                            for name in names))
            for identity in identities:
                del wanted[identity]
            tree = git_exclude.work_tree(root)
            assert lock is not None  # it names what is installed: there is one
            new = lockfile.render([entry_of(w) for w in wanted.values()]).decode()
            pp = project_plan.plan(state, root, wanted, lib.paths.mnt, tree,
                                   (lock.data.decode(), new))
            self._carry_out(pp, "project-remove")
        for identity in identities:
            self._say(f"removed {identity} from {lock_path}")
        return 0

    @staticmethod
    def _resolve(wanted: dict[str, Wanted], name: str, lock_path: Path) -> str:
        if name in wanted:
            return name
        owners = [i for i, w in wanted.items() if name in w.revision.skills]
        if owners:
            return owners[0]  # skill names are unique within a project
        raise RefusedError(f"nothing in {lock_path} is called {name!r}")

    # --- sync ----------------------------------------------------------------------------

    def _lock(self, root: Path) -> Lock:
        lock = lockfile.read(root)
        if lock is None:
            raise LockError(f"{lockfile.path_of(root)}: no such file (acxfs add --project "
                            f"{root} BUNDLE makes one)")
        return lock

    def sync(self, directory: str, sources: list[str], offline: bool = False) -> int:
        """Make this machine match the project's lock (never editing it)."""
        root = project_root(directory)
        lock = self._lock(root)
        lib = self.library
        with journal.locked(lib.paths):
            lib.recover()
            state = lib.state()
            trust = lib.trust(state)
            project = state.projects.get(str(root), Project())
            wanted: dict[str, Wanted] = {}
            checked: list[Checked] = []
            loading = False
            try:
                for entry in lock.entries:
                    result = self._bundle(root, entry, sources, trust, offline)
                    checked.append(result)
                    rev = _compare(root, entry, result.revision,
                                   os.stat(lib.paths.store / result.revision.file).st_size)
                    lib.policy.check_publisher(rev.publisher)
                    lib.policy.check_keyid(rev.keyid)
                    had = project.bundles.get(entry.identity)
                    if had is not None and had.withdrawn is not None and \
                            had.revision.digest == rev.digest:
                        raise RefusedError(f"{lockfile.path_of(root)}: {had.withdrawn}; "
                                           "acxfs links no release its source pulled (move "
                                           "the lock on: acxfs update --project DIR FILE)")
                    if had is not None and had.revision.digest == rev.digest:
                        rev = had.revision  # the same bytes: the same record
                    wanted[entry.identity] = Wanted(rev, entry.bytes, entry.agents,
                                                    entry.source_file)
                tree = git_exclude.work_tree(root)
                pp = project_plan.plan(state, root, wanted, lib.paths.mnt, tree)
                self._refuse_conflicts(pp, tree)
                journal.fault_point("sync:checked")
                loading = True
                if wanted:
                    lib._serve([w.revision for w in wanted.values()], state)
                journal.fault_point("sync:served")
            except BaseException:
                lib.abandon(checked, loading)
                raise
            self._carry_out(pp, "sync")
        self._report_links(pp)
        skills = sum(len(e.skills) for e in lock.entries)
        self._say(f"{root}: matches acxfs.lock ({len(lock.entries)} bundles, {skills} skills)")
        self._not_git(root, tree)
        return 0

    def _bundle(self, root: Path, entry: LockEntry, sources: list[str],
                trust: TrustContext, offline: bool = False) -> Checked:
        """The bytes `entry` names, checked in full: from the store, else copied from the
        first --from directory that has them."""
        paths = self.library.paths
        try:
            if os.path.lexists(paths.store / entry.store_name):
                return check_stored(entry.store_name, paths, trust)
            found, named = _search(entry, [s for s in sources if not is_registry(s)])
            fetched = None if found is not None else fetch_locked(
                entry, [s for s in sources if is_registry(s)], paths, trust,
                Http(offline=offline), self.library.policy, str(lockfile.path_of(root)))
            if fetched is not None:
                return fetched
            if found is None:
                if named is not None:
                    raise RefusedError(
                        f"{lockfile.path_of(root)}: {entry.identity}: sha256 differs (lock "
                        f"{entry.sha256}, bundle {named[1]} in {named[0]})")
                raise RefusedError(
                    f"{entry.identity} {entry.version} (sha256 {entry.sha256[:12]}..., "
                    f"{entry.file_name}) is not in the library or a --from directory")
            result = import_bundle(str(found), paths, trust)
        except UntrustedError as exc:
            raise RefusedError(f"{lockfile.path_of(root)}: {entry.identity}: "
                               f"{exc.verdict.line}; {NO_TRUST}",
                               exit_code=exc.verdict.exit_code) from exc
        if result.revision.digest != entry.sha256:  # changed between the search and the copy
            result.discard(paths)
            raise RefusedError(f"{found}: changed while acxfs copied it; nothing changed")
        return result

    # --- sync --check --------------------------------------------------------------------

    def check(self, directory: str) -> int:
        """Say how this machine differs from the project's lock; change nothing."""
        found = self.differences(directory)
        for line in found.lines:
            self._say(line)
        if found.lines:
            return 1
        self._say(f"{found.root}: matches acxfs.lock ({found.bundles} bundles, {found.skills} "
                  "skills)")
        return 0

    def differences(self, directory: str) -> Differences:
        """How this machine differs from the project's lock, one line each; change nothing."""
        root = project_root(directory)
        lock = self._lock(root)
        lib = self.library
        lines: list[str] = []
        with journal.locked(lib.paths):
            if lib.paths.intent.exists():
                lines.append("an unfinished library change is pending (the next acxfs command "
                             "finishes it)")
            state = lib.state()
            trust = lib.trust(state)
            project = state.projects.get(str(root), Project())
            status = lib.daemon_status()
            lines += self._entry_differences(root, lock, project, trust, status)
            lines += _link_differences(root, lock, project, lib.paths.mnt)
        skills = sum(len(e.skills) for e in lock.entries)
        return Differences(root, len(lock.entries), skills, lines)

    def _entry_differences(self, root: Path, lock: Lock, project: Project, trust: TrustContext,
                           status: dict[str, object] | None) -> list[str]:
        paths = self.library.paths
        served = status.get("served") if status else None
        refused = status.get("refused") if status else None
        lines: list[str] = []
        for entry in lock.entries:
            name = f"{entry.identity} {entry.version}"
            have = project.bundles.get(entry.identity)
            if not os.path.lexists(paths.store / entry.store_name):
                lines.append(f"{name}: bundle missing (sha256 {entry.sha256[:12]}..., "
                             f"{entry.file_name}; acxfs sync --from DIR)")
            else:
                try:
                    result = check_stored(entry.store_name, paths, trust)
                    _compare(root, entry, result.revision,
                             os.stat(paths.store / entry.store_name).st_size)
                except UntrustedError as exc:
                    lines.append(f"{name}: not served: {exc.verdict.line}; {NO_TRUST}")
                except (AcxfsError, OSError) as exc:
                    lines.append(f"{name}: not served: {exc}")
            if have is not None and have.revision.digest != entry.sha256:
                lines.append(f"{entry.identity}: another revision here ({have.revision.version}, "
                             f"sha256 {have.revision.digest[:12]}...) than in acxfs.lock")
            elif have is None:
                lines.append(f"{name}: not installed in this project (acxfs sync)")
            elif have.withdrawn is not None:
                lines.append(f"{name}: {have.withdrawn}; its project links were removed "
                             "(move acxfs.lock on: acxfs update --project DIR FILE)")
            elif status is None:
                lines.append(f"{name}: not served: the library daemon is not running "
                             "(acxfs up)")
            elif not isinstance(served, dict) or entry.prefix not in served:
                why = refused.get(entry.prefix) if isinstance(refused, dict) else None
                lines.append(f"{name}: not served: {why or 'not loaded'}")
        for identity in sorted(set(project.bundles) - set(lock.by_identity())):
            lines.append(f"{identity}: installed here but not in acxfs.lock")
        return lines


def _search(entry: LockEntry, sources: list[str]) -> tuple[Path | None, tuple[Path, str] | None]:
    """The file with `entry`'s sha256 in the --from directories (the file its source names
    first, then each regular file, not recursing or following links); else None, with the
    file its source names and that file's sha256 when there was one."""
    named: tuple[Path, str] | None = None
    for source in sources:
        directory = Path(source)
        first = directory / entry.file_name
        digest = _sha256_of(first)
        if digest == entry.sha256:
            return first, None
        if digest is not None and named is None:
            named = (first, digest)
        try:
            names = sorted(os.listdir(directory))
        except OSError as exc:
            raise EnvironmentProblem(f"--from {source}: {exc.strerror}") from None
        for name in names:
            if name != entry.file_name and _sha256_of(directory / name) == entry.sha256:
                return directory / name, None
    return None, named


def _compare(root: Path, entry: LockEntry, rev: Revision, size: int) -> Revision:
    """`rev` if the full check established every fact the lock names; else RefusedError
    naming the first field that differs."""
    facts = [("identity", entry.identity, rev.identity), ("format", entry.format, rev.format),
             ("version", entry.version, rev.version), ("bytes", entry.bytes, size),
             ("manifest", entry.manifest, rev.manifest), ("keyid", entry.keyid, rev.keyid),
             ("publisher", entry.publisher, rev.publisher),
             ("skills", ",".join(entry.skills), ",".join(sorted(rev.skills)))]
    for field, locked, found in facts:
        if locked != found:
            raise RefusedError(f"{lockfile.path_of(root)}: {entry.identity}: {field} differs "
                               f"(lock {locked}, bundle {found})")
    return rev


def _link_differences(root: Path, lock: Lock, project: Project, mnt: Path) -> list[str]:
    lines: list[str] = []
    expected: set[Path] = set()
    for entry in lock.entries:
        for agent in entry.agents:
            directory = project_plan.agent_directory(root, agent)
            for skill in entry.skills:
                link = Link(str(directory), skill, str(mnt / entry.prefix / skill))
                expected.add(link.path)
                condition = agent_links.state_of(link)
                if condition != "ok":
                    lines.append(f"link {condition}: {link.path}")
    for link in project.links():
        if link.path not in expected:
            lines.append(f"link extra: {link.path} (acxfs.lock no longer names it)")
    return lines


def project_bundles(state: LibraryState) -> list[tuple[str, str, ProjectBundle]]:
    """Every project bundle of the library: (directory, identity, bundle)."""
    return [(d, i, b) for d, p in sorted(state.projects.items())
            for i, b in sorted(p.bundles.items())]
