"""`acxfs update [IDENTITY...] [--from SOURCE]` and `update --check`: each identity installed
from a source, brought to its source's newest release; revisions the source pulled unlinked.

An identity installed from an OCI repository follows the tag it came from: a version tag, to
the highest release tag above it; another tag (`latest`), to the manifest that tag names
now; a digest never moves.

Invariant: what an update would do is worked out first, from the sources read once, and
`--check` stops there, changing nothing (exit 1 when `update` would change something).  An
installed revision its source withdrew, yanked or revoked stops being served (its links
removed, the reason recorded for `list`) unless policy says `"withdrawn": "warn"`; a newer
release is installed through the normal `add`, floors and all.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from acxfs import semver
from acxfs.errors import RefusedError
from acxfs.library.changes import journal
from acxfs.library.changes.plan import Plan
from acxfs.library.manager import Library
from acxfs.library.store.state import Installed, LibraryState, Revision
from acxfs.library.updates.remote import Fetch, Options, Sources
from acxfs.sources import kinds
from acxfs.sources.oci.reference import follow_of, split_coordinate
from acxfs.sources.oci.source import OciSource
from acxfs.text import printable


@dataclass
class Work:
    updates: list[tuple[str, str, str, str]] = field(default_factory=list)  # id, from, to, source
    asks: dict[str, str] = field(default_factory=dict)  # identity -> what to ask, if not `to`
    pulled: dict[str, str] = field(default_factory=dict)  # identity -> why it is not served
    surveyed: dict[str, str] = field(default_factory=dict)  # identity -> digest looked up
    reader: Sources | None = None

    @property
    def changes(self) -> bool:
        return bool(self.updates or self.pulled)


@dataclass(frozen=True)
class Finding:
    """What a source says of one installed revision: the release `update` would move it to
    (`newer`: what it shows, what it asks the source for), and whether the source pulled the
    revision itself (`pulled`: why it is no longer served)."""

    newer: tuple[str, str] | None
    pulled: str | None


def look(client: kinds.Client, rev: Revision, same_source: bool) -> Finding:
    """The source's word on `rev` (its client loaded)."""
    if isinstance(client, OciSource):
        return Finding(_oci_moved(client, rev, same_source), None)
    newest = client.release(rev.identity, None)
    newer = None
    if semver.parse(newest.version) > semver.parse(rev.version) and not (
            newest.lifecycle and newest.lifecycle.pulled):
        newer = (newest.version, newest.version)
    life = client.status_of(rev.identity, rev.version)
    why = None
    if life is not None and life.pulled:
        why = (f"{rev.identity} {rev.version} is {life.status} ({client.spec.key}"
               f"{', ' + life.date[:10] if life.date else ''}): "
               f"{life.reason or 'no reason given'}")
    return Finding(newer, why)


def survey(library: Library, names: list[str], source: str | None, options: Options,
           warn_only: bool) -> Work:
    """What `update` would do, changing nothing: the library is read under its lock, the
    sources after it is let go (a source that stalls holds up no other command; what is
    changed later is worked out again under the lock, from the state then)."""
    with journal.locked(library.paths):
        library.recover()
        state = library.state()
        identities = [library.resolve(state, n) for n in names] if names else sorted(
            i for i, item in state.installed.items() if item.current.source)
        asked: list[tuple[str, Installed, str]] = []
        for identity in dict.fromkeys(identities):
            item = state.installed[identity]
            where = source or item.current.source
            if where is None:
                raise RefusedError(f"{identity} was installed from a file, not a source; "
                                   "name one with --from SOURCE, or: acxfs update FILE")
            asked.append((identity, item, where))
    reader = Sources(options, state, cache=library.paths.http_cache)
    work = Work(reader=reader)
    for identity, item, where in asked:
        rev = item.current
        work.surveyed[identity] = rev.digest
        client = reader.client(where, identity)
        found = look(client, rev, where == rev.source)
        if found.newer is not None:
            shown, ask = found.newer
            work.updates.append((identity, rev.version, shown, client.spec.key))
            if ask != shown:
                work.asks[identity] = ask
        elif found.pulled is not None and item.withdrawn is None:
            if warn_only:
                library.note(printable(f"acxfs: warning: {found.pulled}"))
            else:
                work.pulled[identity] = found.pulled
    return work


def _oci_moved(client: OciSource, rev: Revision,
               same_repository: bool) -> tuple[str, str] | None:
    """What an OCI-installed revision updates to (None: nothing), as (what `update` shows,
    what it asks the repository for): the highest release tag above it, or the manifest the
    tag it came from (`latest`) names now, asked by that tag so that it keeps following it;
    a digest never moves."""
    selector = follow_of(rev.coordinate or "") if same_repository else None
    if selector is not None and selector.startswith("sha256:"):
        return None
    newest = client.release(rev.identity, selector)
    _, now = split_coordinate(newest.coordinate)
    _, had = split_coordinate(rev.coordinate or "")
    moved_to = client.artifacts.get(now)
    if now == had or (moved_to is not None and moved_to.layer == f"sha256:{rev.digest}"):
        return None  # the same manifest, or the same bundle pushed again
    if newest.version and semver.parse(newest.version) <= semver.parse(rev.version):
        return None
    ask = selector or client.named
    shown = newest.version or ask or newest.coordinate
    return shown, ask or shown



def check_doc(work: Work) -> dict[str, object]:
    """`update --check --json`: what `update` would do (docs/json.md)."""
    return {"updates": [{"identity": i, "from": old, "to": new, "source": where}
                        for i, old, new, where in work.updates],
            "pulled": dict(work.pulled), "upToDate": not work.changes,
            "exitCode": 1 if work.changes else 0}


def update(library: Library, names: list[str], source: str | None, options: Options,
           check: bool, allow_downgrade: bool, warn_only: bool = False) -> int:
    work = survey(library, names, source, options, warn_only)
    if check:
        for identity, old, new, where in work.updates:
            library.say(printable(f"{identity}: {old} -> {new} ({where})"))
    for why in work.pulled.values():
        library.say(printable(f"{why}; {'update removes' if check else 'removed'} its links"))
    if check:
        if not work.changes:
            library.say("everything installed from a source is up to date")
        return 1 if work.changes else 0
    if work.pulled:
        assert work.reader is not None
        reader = work.reader

        def unlink(state: LibraryState, plan: Plan) -> None:
            for identity, why in work.pulled.items():
                now = plan.after.installed.get(identity)
                if now is not None and now.current.digest == work.surveyed[identity]:
                    plan.suspend(identity)
                    plan.after.installed[identity].withdrawn = why
            reader.record(plan.after, {})

        library.change("update", unlink)
    if work.updates:
        requests: list[tuple[str, str | None, str]] = [
            (identity, work.asks.get(identity, new), where)
            for identity, _, new, where in work.updates]
        fetch = Fetch(requests, Sources(options, cache=library.paths.http_cache),
                      library.paths, library.note)
        library.add([], None, allow_downgrade=allow_downgrade, update_only=True,
                    allow_key_change=options.allow_key_change, remote=fetch)
    if not work.changes:
        library.say("everything installed from a source is up to date")
    return 0

