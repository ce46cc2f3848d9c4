"""Library commands as operations: add, remove, list, up, down.

Invariant: every operation that changes the library runs under its lock, first finishes any
change an earlier command left unfinished, checks everything it will need (bundles, trust,
the publisher and key an identity is bound to, skill names, served paths, link places; see
`owners`) before its first change, and then changes links and state only through one
`journal.Intent`, which undoes the change if an agent directory refuses a link step.  Links
are made only after the daemon answered with the path it serves; a daemon is started only
after what a dead or unreachable one left on the mountpoint was unmounted.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from acxfs.errors import (
    AcxfsError,
    AgentDirectoryError,
    DaemonDown,
    EnvironmentProblem,
    RefusedError,
    UntrustedError,
)
from acxfs.library.changes import journal, project_plan
from acxfs.library.changes.plan import Plan, library_intent
from acxfs.library.links import agent_links, agents, guard
from acxfs.library.links.agent_links import Link
from acxfs.library.serving import control
from acxfs.library.serving.control import ControlClient
from acxfs.library.store import owners, versions
from acxfs.library.store.bundles import Checked, import_bundle, untrusted
from acxfs.library.store.served_names import is_served_name
from acxfs.library.store.state import LibraryState, Revision, load_state
from acxfs.paths import LibraryPaths, library_paths, trust_dir
from acxfs.paths import home as user_home
from acxfs.sources.policy import Policy, load_policy
from acxfs.text import printable
from acxfs.trust.policy import TrustContext
from acxfs.trust.store import load_trust

if TYPE_CHECKING:
    from acxfs.library.serving.daemon import Orphan

Say = Callable[[str], None]


class Remote(Protocol):
    """Bundles an add fetches from sources: each yielded as checked store files, then the
    state after the change told what the sources said (their memory)."""

    def fetch(self, state: LibraryState, trust: TrustContext) -> Iterator[tuple[str, Checked]]:
        ...

    def record(self, after: LibraryState) -> None: ...


@dataclass
class Library:
    """The library of one user, and where to tell them what happened."""

    paths: LibraryPaths = field(default_factory=library_paths)
    home: Path = field(default_factory=user_home)
    say: Say = print
    note: Say = print
    policy: Policy = field(default_factory=Policy)  # what this library may install

    @classmethod
    def for_command(cls, note: Say) -> Library:
        """The user's library as a command line drives it: what it did on stdout, notes
        through `note`, and the install policy of the trust store in effect."""
        return cls(say=print, note=note, policy=load_policy(trust_dir()))

    # --- reading ---------------------------------------------------------------------------

    def state(self) -> LibraryState:
        state = load_state(self.paths.state)
        if state is None:
            state = LibraryState(trust_dir=str(trust_dir()))
        return state

    def trust(self, state: LibraryState) -> TrustContext:
        """The trust store the library was made with (said when the caller's differs)."""
        self.note_trust(state)
        return load_trust(store=Path(state.trust_dir))

    def note_trust(self, state: LibraryState) -> None:
        """Say so when this command's trust store is not the one the library uses."""
        recorded = Path(state.trust_dir)
        if Path(trust_dir()) != recorded:
            self.note(printable(f"acxfs: note: the library uses the trust store {recorded}, "
                                f"the one it was made with (not {trust_dir()})"))

    def daemon_status(self) -> dict[str, object] | None:
        try:
            return ControlClient(self.paths.socket).status()
        except DaemonDown:
            return None

    def _sync(self) -> None:
        with contextlib.suppress(DaemonDown):
            ControlClient(self.paths.socket).sync()

    def recover(self, tolerant: bool = False) -> None:
        """Finish (or finish undoing) the change an earlier command left; `tolerant`: one that
        cannot be finished now is a note, not an error (for commands that only read)."""
        try:
            outcome = journal.recover(self.paths, self._sync)
        except AgentDirectoryError as exc:
            if not tolerant:
                raise
            self.note(printable(f"acxfs: note: {exc}"))
            return
        if outcome is not None and outcome.undone is not None:
            self.note(printable("acxfs: note: undid a library change an earlier command could "
                                f"not finish ({outcome.undone})"))
        elif outcome is not None:
            self.note("acxfs: note: finished a library change an earlier command left unfinished")
        for line in outcome.skipped if outcome is not None else []:
            self.note(printable(f"acxfs: note: {line}"))

    # --- add, update, revert -------------------------------------------------------------

    def add(self, files: list[str], agent_names: list[str] | None,
            allow_downgrade: bool = False, update_only: bool = False,
            allow_key_change: bool = False, remote: Remote | None = None,
            updates: str | None = None) -> int:
        """Install each bundle (the files, then what `remote` fetches), or update the
        installed revision of its identity; `updates`: the mode each is kept current in
        (`auto`, `notify`, `off`; None: as it was, `notify` for a new identity)."""
        with journal.locked(self.paths):
            self.recover()
            state = self.state()
            trust = self.trust(state)
            directories = agents.directories(agent_names, self.home)
            checked: list[Checked] = []
            loading = False
            try:
                for file in files:
                    checked.append(self._check_new(file, state, trust, checked, update_only,
                                                   allow_downgrade, allow_key_change))
                for label, result in remote.fetch(state, trust) if remote else []:
                    checked.append(self._admit(label, result, state, checked, update_only,
                                               allow_downgrade, allow_key_change))
                plan = Plan.of(state)
                for c in checked:
                    plan.install(c.revision, directories, self.paths.mnt)
                    if updates is not None:
                        plan.after.installed[c.revision.identity].updates = updates
                owners.check_skills(plan.before, plan.after)
                if remote:
                    remote.record(plan.after)
                self._refuse_conflicts(plan)
                journal.fault_point("add:checked")
                loading = True
                self._serve([c.revision for c in checked], state)
                journal.fault_point("add:served")
            except BaseException:
                self.abandon(checked, loading)
                raise
            outcome = journal.carry_out(self.paths, plan.intent("add", self.paths.mnt),
                                        self._sync)
        self._tell(outcome)
        for c in checked:
            rev = c.revision
            item = plan.after.installed[rev.identity]
            for skill in sorted(rev.skills):
                where = ", ".join(str(Path(d) / skill) for d in item.directories)
                self.say(printable(f"{skill}: {rev.identity} {rev.version} -> {where}"))
            if item.previous is not None:
                self.say(printable(f"{rev.identity}: {item.previous.version} -> {rev.version} "
                                   f"(acxfs revert {rev.identity} goes back)"))
        return 0

    def revert(self, names: list[str]) -> int:
        """Serve each identity's previous revision again (its floor stays where it is)."""
        with journal.locked(self.paths):
            self.recover()
            state = self.state()
            identities = list(dict.fromkeys(self.resolve(state, name) for name in names))
            plan = Plan.of(state)
            for identity in identities:
                plan.revert(identity, self.paths.mnt)
            owners.check_skills(plan.before, plan.after)
            self._refuse_conflicts(plan)
            self._serve([plan.after.installed[i].current for i in identities], state)
            outcome = journal.carry_out(self.paths, plan.intent("revert", self.paths.mnt),
                                        self._sync)
        self._tell(outcome)
        for identity in identities:
            item = plan.after.installed[identity]
            self.say(printable(f"{item.current.identity}: back to {item.current.version}"))
        return 0

    def change(self, op: str, edit: Callable[[LibraryState, Plan], None]) -> None:
        """A change worked out by `edit` on the plan of the current state, then carried out."""
        with journal.locked(self.paths):
            self.recover()
            state = self.state()
            plan = Plan.of(state)
            edit(state, plan)
            outcome = journal.carry_out(self.paths, plan.intent(op, self.paths.mnt), self._sync)
        self._tell(outcome)

    @staticmethod
    def _refuse_conflicts(plan: Plan) -> None:
        """Refuse the change when an agent directory it links in is another user's, or a
        link it would make has something not acxfs's in its way (a directory served whole,
        before or after, is its link in its parent: no other link is made in it while it
        is one)."""
        whole = set(plan.before.whole) | set(plan.after.whole)
        guard.check_agent_dirs([link.directory for link in
                                [*plan.make, *plan.remove, *(new for _, new in plan.repoint)]
                                if link.directory not in whole] +
                               [str(Path(directory).parent) for directory in sorted(whole)])
        for link in plan.make:
            if link.directory in whole:
                continue
            problem = agent_links.conflict(link)
            if problem:
                raise RefusedError(f"{problem}; acxfs never replaces what it did not make")

    def _tell(self, outcome: journal.Outcome) -> None:
        for line in outcome.skipped:
            self.note(printable(f"acxfs: note: {line}"))

    def import_verified(self, file: str, trust: TrustContext) -> Checked:
        """`file` copied into the store and checked in full (RefusedError below verified)."""
        try:
            return import_bundle(file, self.paths, trust)
        except UntrustedError as exc:
            raise untrusted(file, exc, file=True) from exc

    def _check_new(self, file: str, state: LibraryState, trust: TrustContext,
                   earlier: list[Checked], update_only: bool, allow_downgrade: bool,
                   allow_key_change: bool) -> Checked:
        result = self.import_verified(file, trust)
        return self._admit(file, result, state, earlier, update_only, allow_downgrade,
                           allow_key_change)

    def _admit(self, file: str, result: Checked, state: LibraryState, earlier: list[Checked],
               update_only: bool, allow_downgrade: bool, allow_key_change: bool) -> Checked:
        """Refuse a checked store file the library cannot take (its new file then removed)."""
        rev = result.revision
        try:
            self.policy.check_publisher(rev.publisher)
            self.policy.check_keyid(rev.keyid)
            if any(c.revision.identity == rev.identity for c in earlier):
                raise RefusedError(f"{file}: {rev.identity} is named twice in this command")
            installed = state.installed.get(rev.identity)
            if installed is None and update_only:
                raise RefusedError(f"{file}: {rev.identity} is not installed (acxfs add it)")
            if installed is not None and installed.current.digest == rev.digest:
                raise RefusedError(f"{file}: {rev.identity} {rev.version} is installed already")
            owners.check_publisher(rev, state, allow_key_change)
            versions.check_floor(rev, installed, state.floors.get(rev.identity),
                                 allow_downgrade)
            for skill in rev.skills:
                owner = state.owner_of_skill(skill) or next(
                    (c.revision.identity for c in earlier if skill in c.revision.skills), None)
                if owner is not None and owner != rev.identity:
                    raise RefusedError(f"{file}: skill {skill!r} is already offered by {owner}; "
                                       "two bundles cannot serve one skill name")
        except RefusedError:
            result.discard(self.paths)
            raise
        return result

    def abandon(self, checked: list[Checked], loaded: bool) -> None:
        """Take back a change refused before its intent was written: the store copies it
        brought go, and the daemon (when it `loaded` them) drops what it loaded for it."""
        for c in checked:
            c.discard(self.paths)
        if loaded:
            with contextlib.suppress(AcxfsError):
                self._sync()

    def _serve(self, revisions: list[Revision], state: LibraryState) -> None:
        """Have the daemon (started when needed) check and serve each revision."""
        if not control.running(self.paths.socket):
            self._clear_orphan()
            self._start(state, foreground=False, say=lambda message: None)
        for rev in revisions:
            answer = ControlClient(self.paths.socket).load(rev.file)
            if not answer.get("ok"):
                raise RefusedError(f"the library daemon refused {rev.identity} {rev.version}: "
                                   f"{answer.get('error')}")
            if answer.get("path") != str(self.paths.mnt / rev.prefix):
                raise EnvironmentProblem(f"the library daemon serves {rev.identity} at "
                                         f"{answer.get('path')}, not where it was expected "
                                         "(restart it: acxfs down && acxfs up)")

    # --- remove --------------------------------------------------------------------------

    def resolve(self, state: LibraryState, name: str) -> str:
        """The identity `name` names: an identity, or a skill of exactly one bundle."""
        return self._resolve(state, name)[0]

    @staticmethod
    def _resolve(state: LibraryState, name: str) -> tuple[str, bool]:
        """The identity `name` names, and whether it named it by a skill.  `IDENTITY/` names
        an identity only; a name that is an identity and another bundle's skill is refused."""
        if name.endswith("/") and name.removesuffix("/") in state.installed:
            return name.removesuffix("/"), False
        offering = sorted(i for i, item in state.installed.items() if name in item.current.skills)
        if name in state.installed:
            others = [i for i in offering if i != name]
            if others:
                raise RefusedError(
                    f"{name!r} names both the bundle {name} and a skill of {', '.join(others)}; "
                    f"name the bundle as '{name}/', or the skill's bundle by its identity")
            return name, False
        if len(offering) == 1:
            return offering[0], True
        if offering:
            raise RefusedError(f"{name!r} names a skill of several bundles: "
                               f"{', '.join(offering)}; name the bundle")
        raise RefusedError(f"nothing installed is called {name!r} (see: acxfs list)")

    def remove(self, names: list[str], forget: bool = False) -> int:
        """Remove bundles named by identity or by their only skill; with `forget`, their
        floors and publisher bindings too (also of an identity no longer installed)."""
        with journal.locked(self.paths):
            self.recover()
            state = self.state()
            identities = [self._removed(state, name, forget) for name in names]
            after = LibraryState(state.trust_dir, dict(state.installed), dict(state.floors),
                                 projects=state.projects, bindings=dict(state.bindings),
                                 sources=dict(state.sources),
                                 refresh_every=state.refresh_every, whole=dict(state.whole))
            gone: list[Link] = []
            for identity in dict.fromkeys(identities):
                item = after.installed.pop(identity, None)
                if item is not None:
                    gone.extend(item.links)
                if forget:
                    after.floors.pop(identity, None)
                    after.bindings.pop(identity, None)
            intent = library_intent("remove", state, after, self.paths.mnt, remove=gone)
            outcome = journal.carry_out(self.paths, intent, self._sync)
        self._tell(outcome)
        for identity in dict.fromkeys(identities):
            done = "removed" if identity in state.installed else "forgot the floor and publisher of"
            self.say(printable(f"{done} {identity}"))
        return 0

    def _removed(self, state: LibraryState, name: str, forget: bool) -> str:
        """The identity `remove name` removes (refused: a skill of a bundle with others)."""
        remembered = name in state.floors or name in state.bindings
        if forget and remembered and name not in state.installed and not any(
                name in item.current.skills for item in state.installed.values()):
            return name
        identity, by_skill = self._resolve(state, name)
        skills = sorted(state.installed[identity].current.skills)
        if by_skill and len(skills) > 1:
            raise RefusedError(
                f"{name!r} is one of the {len(skills)} skills of {identity} ({', '.join(skills)}); "
                f"nothing was removed: acxfs removes whole bundles (acxfs remove {identity} "
                "removes all of them)")
        return identity

    # --- up / down -----------------------------------------------------------------------

    def up(self, foreground: bool = False, reload: bool = False) -> int:
        """Start the daemon (or, with `reload`, have the running one re-check every bundle);
        then give links to the bundles served and take them from those that are not."""
        with journal.locked(self.paths):
            self.recover()
            state = self.state()
            self.trust(state)
            running = control.running(self.paths.socket)
            if running and reload:
                answer = ControlClient(self.paths.socket).reload()
                if not answer.get("ok"):
                    raise EnvironmentProblem("the library daemon could not re-check the library: "
                                             f"{answer.get('error')}")
            elif running:  # with -f too: one daemon per library, and a service sees success
                self.say(f"the library daemon already serves {self.paths.mnt}")
                self._sync()  # what the policy now bars goes, what it allows again comes
            else:
                self._clear_orphan()
            if not running and not foreground:
                self._start(state, foreground=False, say=self.say)
            if running or not foreground:
                self._reconcile(state)
                self._report_links(self.state())
                return 0
        self._report_links(state)
        return self._start(state, foreground=True, say=self.say, on_live=self.reconcile_locked)

    def _start(self, state: LibraryState, foreground: bool, say: Say,
               on_live: Callable[[], None] | None = None) -> int:
        """Start the daemon (see `daemon.start`).  Its module and the mount stack under it
        (libfuse's binding, the operations) load here: a command that finds a daemon running
        asks it over its socket and never loads them."""
        from acxfs.library.serving import daemon
        return daemon.start(self.paths, state, foreground=foreground, say=say, on_live=on_live)

    def reload(self) -> None:
        """After a trust change: re-check every bundle if the daemon runs."""
        if control.running(self.paths.socket):
            self.up(reload=True)

    def reconcile_locked(self) -> None:
        with journal.locked(self.paths):
            self._reconcile(self.state())

    def _reconcile(self, state: LibraryState) -> None:
        status = self.daemon_status()
        if status is None:
            return
        served = status.get("served")
        refused = status.get("refused")
        assert isinstance(served, dict) and isinstance(refused, dict)
        if not all(is_served_name(name) for name in served):  # an earlier acxfs's daemon
            self.note("acxfs: note: the library daemon was started by an earlier acxfs; "
                      "links change once it is restarted: acxfs down && acxfs up")
            return
        plan = Plan.of(state)
        plan.follow_layout(self.paths.mnt)
        for identity, item in state.installed.items():
            prefix = item.current.prefix
            barred = self.policy.refusal_of(item.current.source, item.current.publisher,
                                            item.current.keyid)
            if prefix in served and barred is None and item.suspended \
                    and item.withdrawn is None:
                plan.resume(identity, self.paths.mnt)
                self.note(printable(f"acxfs: note: serving {identity} again; linked"))
            elif (prefix not in served or barred) and not item.suspended \
                    and item.withdrawn is None:
                plan.suspend(identity)
                why = barred or refused.get(prefix, "not loaded")
                self.note(printable(f"acxfs: note: not serving {identity}: {why}; links "
                                    "removed"))
        make, remove, notes = project_plan.reconcile(plan.after, served, refused, self.paths.mnt)
        plan.make.extend(make)
        plan.remove.extend(remove)
        for line in notes:
            self.note(printable(f"acxfs: note: {line}"))
        if plan.make or plan.remove or plan.repoint or plan.views_changed(self.paths.mnt):
            self._tell(journal.carry_out(self.paths, plan.intent("up", self.paths.mnt), self._sync))

    def _report_links(self, state: LibraryState) -> None:
        links = state.links()
        seen: set[str] = set()
        for link, condition in zip(links, agent_links.states_in(links, state.whole),
                                   strict=True):
            path = link.directory if link.directory in state.whole else str(link.path)
            if condition != "ok" and path not in seen:
                seen.add(path)
                self.note(printable(f"acxfs: note: link {path} is {condition} "
                                    "(changed by hand: left as it is)"))

    # --- layout ----------------------------------------------------------------------------

    def layout(self, agent_names: list[str] | None, whole: bool | None) -> int:
        """Serve the skill directories of `agent_names` whole (one link each, to a view of
        the daemon: agents start as from plain copies, but nothing else can be put there)
        or, `whole` False, as a directory of links again; None: say how each is served."""
        directories = [str(d) for d in agents.directories(agent_names, self.home)]
        with journal.locked(self.paths):
            self.recover()
            state = self.state()
            plan = Plan.of(state)
            for directory in directories if whole is not None else []:
                if whole and directory not in state.whole:
                    recorded = {(link.name, link.target) for link in state.links()
                                if link.directory == directory}
                    problem = agent_links.foreign_entries(directory, recorded)
                    if problem is not None:
                        raise RefusedError(f"{problem}; only a directory that is absent or "
                                           "holds nothing but acxfs's links is served whole")
                    plan.serve_whole(directory)
                elif not whole and directory in state.whole:
                    plan.serve_links(directory)
            self._refuse_conflicts(plan)
            if plan.views_changed(self.paths.mnt) or plan.make or plan.remove:
                self._tell(journal.carry_out(self.paths, plan.intent("layout", self.paths.mnt),
                                             self._sync))
            after = self.state()
        for directory in directories:
            if directory in after.whole:
                self.say(printable(f"{directory}: served whole -> {after.whole[directory]}"))
            else:
                self.say(printable(f"{directory}: a directory of links"))
        if whole and not control.running(self.paths.socket):
            self.note("acxfs: note: the library daemon is not running; the directories served "
                      "whole dangle until: acxfs up")
        return 0

    def _clear_orphan(self) -> None:
        """Before a daemon starts: unmount what a dead daemon, or one without its control
        socket, left on the library's mountpoint."""
        found = self._orphan()
        if found is not None:
            self._stop(found.pid)
            self.note(f"acxfs: note: stopped {found.describe()}")

    def down(self) -> int:
        """Stop the daemon, found by its socket or else by its mount."""
        if control.running(self.paths.socket):
            self._stop()
            self.say("stopped the library daemon; links dangle until: acxfs up")
            return 0
        found = self._orphan()
        if found is None:
            self.say("the library daemon is not running")
            return 0
        self._stop(found.pid)
        self.say(f"stopped {found.describe()}; links dangle until: acxfs up")
        return 0

    # As for `_start`, the daemon's module and the mount stack load in these two, by the
    # commands that look for or stop a daemon no socket answers for.

    def _orphan(self) -> Orphan | None:
        """The library's mount that no daemon answers for on its socket (see `daemon.orphan`)."""
        from acxfs.library.serving import daemon
        return daemon.orphan(self.paths)

    def _stop(self, pid: int | None = None) -> None:
        """Unmount the library's mount and wait for its daemon `pid`, when known (see
        `daemon.stop`)."""
        from acxfs.library.serving import daemon
        daemon.stop(self.paths, pid)
