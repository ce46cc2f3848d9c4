"""`acxfs refresh`: one round of checks of the sources the library's revisions came from, as
the daemon's timer runs it (`--scheduled`) or a user asks for it now.

Invariant: each source is read once per round however many bundles came from it, through
the same client, bounds and memory as `update` (an older index is a rollback, a changed
coordinate refused, a withdrawal the source drops stays in force), with conditional
requests, so an unchanged source costs no body.  What the round may change follows each
bundle's mode and nothing else: a release its source withdrew, yanked or revoked loses its
links and is no longer served in every mode (projects included: their links go, their lock
never changes), unless the policy says `"withdrawn": "warn"`; `auto` installs the release
`update` would pick through the same fully checked `add` (floors, bindings, policy, trust),
and what that refuses is shown, not applied; `notify` and `off` never move.  A source that
cannot be read, lies or rolls back changes nothing installed: it is recorded as that
source's `checkError`, and a scheduled round asks it again only after a backoff (doubling per
failure, at most 16 intervals, and never before its `Retry-After`).  The library's lock is
held to read the state and to apply each change (which checks the state again), never while
a source is read: a stalled source keeps no other command waiting.
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime as dt
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import NamedTuple

from acxfs.errors import (
    AcxfsError,
    DaemonDown,
    KeyChangeError,
    NetworkError,
    PolicyRefusal,
    RollbackError,
    SourceError,
    StaleIndexError,
)
from acxfs.library.changes import journal
from acxfs.library.changes.plan import Plan
from acxfs.library.manager import Library
from acxfs.library.serving.control import ControlClient
from acxfs.library.store.checks import (
    MAX_FAILURES,
    BundleCheck,
    Checks,
    SourceCheck,
    load_checks,
    parse_time,
    save_checks,
    time_text,
)
from acxfs.library.store.state import DEFAULT_REFRESH_EVERY, LibraryState
from acxfs.library.updates.remote import Fetch, Options, Sources
from acxfs.library.updates.updates import look
from acxfs.sources import kinds
from acxfs.text import printable

MAX_BACKOFF_ROUNDS = 15  # a failing source is skipped at most this many rounds in a row
RETRY_AFTER_CAP = 24 * 3600.0  # seconds: a longer Retry-After is taken as this


@dataclass
class Round:
    """What one round found and did."""

    checked: list[str] = field(default_factory=list)  # sources read
    failed: dict[str, str] = field(default_factory=dict)  # source -> its checkError
    skipped: list[str] = field(default_factory=list)  # sources in backoff
    pulled: dict[str, str] = field(default_factory=dict)  # identity -> why, unlinked now
    project_pulled: list[tuple[str, str, str]] = field(default_factory=list)  # dir, id, why
    moved: list[tuple[str, str, str]] = field(default_factory=list)  # identity, from, to
    waiting: dict[str, str] = field(default_factory=dict)  # identity -> version
    refused: dict[str, str] = field(default_factory=dict)  # identity -> why not applied
    received: int = 0  # body bytes the sources sent

    def lines(self, changes_only: bool = False) -> list[str]:
        """What people are told; `changes_only` (the daemon's log): what the round changed
        and what failed, not what still waits."""
        out = [f"{why}; links removed" for why in self.pulled.values()]
        out += [f"{why}; its links in {directory} removed (acxfs.lock unchanged)"
                for directory, _, why in self.project_pulled]
        out += [f"{i}: {old} -> {new} (updates: auto; acxfs revert {i} goes back)"
                for i, old, new in self.moved]
        out += [f"{i}: {v} waits: acxfs update {i}" for i, v in sorted(self.waiting.items())
                if i not in self.refused and not changes_only]
        out += [f"{i}: {v} waits, not applied: {self.refused[i]}"
                for i, v in sorted(self.waiting.items()) if i in self.refused]
        out += [f"{i}: check failed: {why}" for i, why in sorted(self.refused.items())
                if i not in self.waiting]
        out += [f"{source}: {error}" for source, error in sorted(self.failed.items())]
        return [printable(line) for line in out]

    def to_doc(self) -> dict[str, object]:
        return {"checked": self.checked, "failed": self.failed, "skipped": self.skipped,
                "pulled": self.pulled,
                "projectPulled": [{"project": d, "identity": i, "reason": w}
                                  for d, i, w in self.project_pulled],
                "moved": [{"identity": i, "from": a, "to": b} for i, a, b in self.moved],
                "waiting": self.waiting, "refused": self.refused, "bytes": self.received}


def check_error(exc: AcxfsError) -> str:
    """A failed check as one line that says its kind first."""
    text = " ".join(str(exc).split())
    if isinstance(exc, RollbackError):
        return f"rollback: {text}"
    if isinstance(exc, StaleIndexError):
        return f"stale: {text}"
    if isinstance(exc, KeyChangeError):
        return f"refused key: {text}"
    if isinstance(exc, NetworkError):
        return f"unreachable: {text}"
    if isinstance(exc, PolicyRefusal):
        return f"policy: {text}"
    if isinstance(exc, SourceError):
        return f"refused: {text}"
    return f"failed: {text}"


def _backoff(check: SourceCheck, now: dt.datetime, interval: float,
             retry_after: float | None) -> str | None:
    """When a scheduled round may ask a source again after `check.failures` failures."""
    skip = min(2 ** (min(max(check.failures, 1), MAX_FAILURES) - 1) - 1, MAX_BACKOFF_ROUNDS)
    wait = (skip + 0.5) * interval if skip else 0.0
    if retry_after is not None:
        wait = max(wait, min(retry_after, RETRY_AFTER_CAP))
    return time_text(now + dt.timedelta(seconds=wait)) if wait else None


def _due(check: SourceCheck | None, now: dt.datetime) -> bool:
    return check is None or check.not_before is None or parse_time(check.not_before) <= now


Scope = tuple[str | None, str]  # (project directory or None for the user's library, identity)


class Install(NamedTuple):
    """An auto update the survey found: what to ask its source, and the revision it found
    installed (the update is left alone once another is)."""

    identity: str
    ask: str
    source: str
    digest: str


def _by_source(state: LibraryState) -> dict[str, list[Scope]]:
    """Every installed revision that came from a source, grouped by that source."""
    found: dict[str, list[Scope]] = {}
    for identity, item in sorted(state.installed.items()):
        if item.current.source is not None:
            found.setdefault(item.current.source, []).append((None, identity))
    for directory, project in sorted(state.projects.items()):
        for identity, b in sorted(project.bundles.items()):
            if b.revision.source is not None:
                found.setdefault(b.revision.source, []).append((directory, identity))
    return found


@dataclass
class Refresher:
    """One round for `library`, reading sources as `options` says; `clock` gives now."""

    library: Library
    options: Options
    warn_only: bool = False  # the policy keeps serving what a source pulled
    clock: Callable[[], dt.datetime] = lambda: dt.datetime.now(dt.UTC)
    result: Round = field(default_factory=Round)
    _retry_after: dict[str, float | None] = field(default_factory=dict)  # source -> seconds

    def run(self, scheduled: bool) -> Round:
        now = self.clock()
        reader, installs = self._survey(now, scheduled)
        self._install(reader, installs)
        with journal.locked(self.library.paths):
            checks = load_checks(self.library.paths.checks)
            self._fold(checks, now)
            save_checks(self.library.paths.checks, checks)
        return self.result

    # --- the survey: sources read, nothing changed ---------------------------------------

    def _survey(self, now: dt.datetime, scheduled: bool) -> tuple[Sources, list[Install]]:
        """The sources read (each once, its client kept in the reader for the round's
        installs) and what they say: the auto updates to install.  The lock is held only to
        read the state; the sources are read without it (a stalled one keeps no other
        command waiting), and what they said is applied by changes that check the state
        again under it."""
        lib = self.library
        with journal.locked(lib.paths):
            lib.recover()
            state = lib.state()
            checks = load_checks(lib.paths.checks)
        reader = Sources(self.options, state, cache=lib.paths.http_cache)
        installs: list[Install] = []
        pulled_projects: list[tuple[str, str, str, str]] = []  # dir, id, digest, why
        for key, scopes in _by_source(state).items():
            if scheduled and not _due(checks.sources.get(key), now):
                self.result.skipped.append(key)
                continue
            try:
                client = reader.client(key, scopes[0][1])
                for directory, identity in scopes:
                    try:
                        self._look(state, client, directory, identity, installs,
                                   pulled_projects)
                    except SourceError as exc:  # this bundle only (gone from the index)
                        if isinstance(exc, RollbackError):
                            raise
                        if directory is None:
                            self.result.refused[identity] = check_error(exc)
            except (AcxfsError, ValueError, OSError) as exc:  # never the whole round
                retry = exc.retry_after if isinstance(exc, NetworkError) else None
                self.result.failed[key] = check_error(exc) if isinstance(
                    exc, AcxfsError) else f"failed: {type(exc).__name__}: {exc}"
                self._retry_after[key] = retry
                continue
            self.result.checked.append(key)
        self.result.received = reader.http.received
        probe = LibraryState(state.trust_dir, sources=dict(state.sources))
        reader.record(probe, {})
        learned = json.dumps({k: v.to_doc() for k, v in probe.sources.items()},
                             sort_keys=True) != json.dumps(
            {k: v.to_doc() for k, v in state.sources.items() if k in probe.sources},
            sort_keys=True)
        if self.result.pulled or pulled_projects or learned:
            self._unlink(reader, pulled_projects, state)
        return reader, installs

    def _look(self, state: LibraryState, client: kinds.Client, directory: str | None,
              identity: str, installs: list[Install],
              pulled_projects: list[tuple[str, str, str, str]]) -> None:
        from_source = state.installed[identity].current if directory is None else \
            state.projects[directory].bundles[identity].revision
        found = look(client, from_source, True)
        if directory is not None:
            bundle = state.projects[directory].bundles[identity]
            if found.pulled is not None and bundle.withdrawn is None and not self.warn_only:
                pulled_projects.append((directory, identity, from_source.digest, found.pulled))
                self.result.project_pulled.append((directory, identity, found.pulled))
            return
        item = state.installed[identity]
        if found.pulled is not None and item.withdrawn is None:
            if self.warn_only:
                self.library.note(printable(f"acxfs: warning: {found.pulled}"))
            else:
                self.result.pulled[identity] = found.pulled
        if found.newer is None or item.updates == "off":
            return
        shown, ask = found.newer
        self.result.waiting[identity] = shown
        if item.updates == "auto":
            installs.append(Install(identity, ask, item.current.source or "",
                                    item.current.digest))

    def _unlink(self, reader: Sources, pulled_projects: list[tuple[str, str, str, str]],
                surveyed: LibraryState) -> None:
        """One change: unlink what the sources pulled, and keep what they said."""
        versions = {i: surveyed.installed[i].current.digest for i in self.result.pulled}

        def edit(state: LibraryState, plan: Plan) -> None:
            for identity, why in self.result.pulled.items():
                item = plan.after.installed.get(identity)
                if item is not None and item.current.digest == versions[identity]:
                    plan.suspend(identity)
                    item.withdrawn = why
            for directory, identity, digest, why in pulled_projects:
                project = plan.after.projects.get(directory)
                bundle = project.bundles.get(identity) if project else None
                if bundle is not None and bundle.revision.digest == digest:
                    plan.remove.extend(bundle.links)
                    bundle.links, bundle.suspended, bundle.withdrawn = [], True, why
            reader.record(plan.after, {})

        self.library.change("refresh", edit)

    # --- auto: the same add as `update` --------------------------------------------------

    def _install(self, reader: Sources, installs: list[Install]) -> None:
        """Each auto update through `add`, its release asked of the client the survey
        loaded (no source's index is read twice in a round); one whose bundle changed since
        the survey (removed, updated, reverted, no longer auto) is left to the next round."""
        quiet = dataclasses.replace(self.library, say=lambda line: None)
        for identity, ask, source, surveyed in installs:
            had = self.library.state().installed.get(identity)
            if had is None or had.current.digest != surveyed or had.updates != "auto":
                continue
            before = had.current.version
            fetch = Fetch([(identity, ask, source)], reader, self.library.paths,
                          self.library.note)
            try:
                quiet.add([], None, update_only=True, remote=fetch)
            except AcxfsError as exc:
                self.result.refused[identity] = check_error(exc)
                continue
            after = self.library.state().installed.get(identity)
            now = after.current.version if after is not None else before
            self.result.moved.append((identity, before, now))
            self.result.waiting.pop(identity, None)

    # --- the record of checks ------------------------------------------------------------

    def _fold(self, checks: Checks, now: dt.datetime) -> None:
        """Put this round's findings into the record of checks."""
        state = self.library.state()
        interval = float(state.refresh_every or DEFAULT_REFRESH_EVERY)
        stamp = time_text(now)
        checks.last_round = stamp
        for key in self.result.checked:
            checks.sources[key] = SourceCheck(stamp, stamp, None, 0, None)
        for key, error in self.result.failed.items():
            had = checks.sources.get(key) or SourceCheck()
            failed = had.failed_again(stamp, error)
            failed.not_before = _backoff(failed, now, interval, self._retry_after.get(key))
            checks.sources[key] = failed
        by_source = _by_source(state)
        for key in (*self.result.checked, *self.result.failed):
            for directory, identity in by_source.get(key, []):
                if directory is not None:
                    continue
                if key in self.result.failed:
                    had_bundle = checks.bundles.get(identity) or BundleCheck()
                    checks.bundles[identity] = BundleCheck(had_bundle.update_available,
                                                           self.result.failed[key])
                else:
                    checks.bundles[identity] = BundleCheck(
                        self.result.waiting.get(identity), self.result.refused.get(identity))
        for identity in list(checks.bundles):
            if identity not in state.installed:
                del checks.bundles[identity]
        for key in list(checks.sources):
            if key not in by_source:
                del checks.sources[key]


# --- the settings: how often, and what each bundle does --------------------------------------


def set_interval(library: Library, seconds: int | None) -> None:
    """The daemon checks every `seconds` (None: never) from now on; a running daemon's timer
    starts its wait anew with it."""

    def edit(state: LibraryState, plan: Plan) -> None:
        plan.after.refresh_every = seconds

    library.change("refresh", edit)
    with contextlib.suppress(DaemonDown):
        ControlClient(library.paths.socket).schedule()


def set_mode(library: Library, names: list[str], mode: str) -> list[str]:
    """Keep each named identity current in `mode`; the identities."""
    chosen: list[str] = []

    def edit(state: LibraryState, plan: Plan) -> None:
        chosen.extend(dict.fromkeys(library.resolve(state, name) for name in names))
        for identity in chosen:
            plan.after.installed[identity].updates = mode

    library.change("refresh", edit)
    return chosen
