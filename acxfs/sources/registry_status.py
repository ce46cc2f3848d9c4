"""`acxfs withdraw`: a lifecycle entry in an ACX registry's `status.json` ledger
(`acx.registry-status/1`), and the index regenerated with it.

Invariant: the ledger only grows.  Every entry already there stays as it was, except the one
entry of the release named, which may only escalate (deprecated, then superseded, then
withdrawn; the standard allows one entry per release, so an escalation replaces it in place)
and is never taken back.  The same request again changes no byte.  `updatedAt` (and the
entry's `recordedAt`) is the given clock, made strictly later than the ledger's previous
`updatedAt` even within the same millisecond, so a reader that refuses an older ledger
accepts this one.  The standard's ledger knows three statuses: `revoked` and `yanked` are
written as `withdrawn` (what every reader pulls), the word asked for leading the reason.  An
entry names a release by its exact identity and digest, read from the cartridge in the tree,
and a successor must be published there too.
"""

from __future__ import annotations

import datetime as dt
import json
import tempfile
from dataclasses import dataclass

from acxfs import semver
from acxfs.errors import EnvironmentProblem, SourceError
from acxfs.sources import acx_index
from acxfs.sources import registry_layout as layout
from acxfs.sources.registry_entry import Summary
from acxfs.sources.registry_writer import State, regenerate

STATUSES = ("revoked", "withdrawn", "yanked", "deprecated", "superseded")
WRITTEN = {"revoked": "withdrawn", "yanked": "withdrawn"}
RANK = {"deprecated": 1, "superseded": 2, "withdrawn": 3}
MILLI = dt.timedelta(milliseconds=1)


@dataclass(frozen=True)
class Withdrawn:
    name: str
    version: str
    status: str  # as written in the ledger
    asked: str  # as the user named it
    recorded_at: str
    successor: str | None
    changed: bool

    @property
    def line(self) -> str:
        said = self.status if self.asked == self.status else f"{self.asked} (recorded as " \
            f"{self.status})"
        by = f" by {self.successor}" if self.successor else ""
        if not self.changed:
            return f"{self.name} {self.version} is {said}{by} already (nothing changed)"
        return f"{self.name} {self.version} is {said}{by} since {self.recorded_at}"


def parse_coordinate(text: str) -> tuple[str, str]:
    """PUBLISHER/ID@VERSION -> (PUBLISHER/ID, VERSION)."""
    name, at, version = text.rpartition("@")
    if not at or "/" not in name or not semver.is_semver(version):
        raise EnvironmentProblem(f"{text}: not PUBLISHER/ID@VERSION")
    return name, version


def stamp(now: dt.datetime, after: str | None) -> str:
    """`now` in UTC to the millisecond, made later than the instant `after`."""
    moment = now.astimezone(dt.UTC).replace(microsecond=now.microsecond // 1000 * 1000)
    if after is not None:
        previous = acx_index.instant(after).astimezone(dt.UTC)
        if moment <= previous:
            moment = previous.replace(microsecond=previous.microsecond // 1000 * 1000) + MILLI
    return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{moment.microsecond // 1000:03d}Z"


def _identity(s: Summary) -> dict[str, object]:
    publisher, ident, version = s.coordinate
    return {"artifactType": "agent", "publisherId": publisher, "id": ident,
            "version": version, "digest": s.digest}


def _find(state: State, name: str, version: str, where: str) -> Summary:
    for s in state.summaries:
        publisher, ident, v = s.coordinate
        if f"{publisher}/{ident}" == name and semver.parse(v) == semver.parse(version):
            return s
    have = sorted({s.coordinate[2] for s in state.summaries
                   if f"{s.coordinate[0]}/{s.coordinate[1]}" == name}, key=semver.parse)
    raise SourceError(f"{where} has no {name} {version} "
                      f"({'it has ' + ', '.join(have) if have else 'it has no release of it'})")


def withdraw(coordinate: str, registry: str, asked: str, reason: str, successor: str | None,
             now: dt.datetime, advisory: str | None = None) -> Withdrawn:
    if asked not in STATUSES:
        raise EnvironmentProblem(f"--status {asked}: not one of {', '.join(STATUSES)}")
    name, version = parse_coordinate(coordinate)
    status = WRITTEN.get(asked, asked)
    text = reason.strip() if asked == status else f"{asked}: {reason.strip()}"
    if len(reason.strip()) < 10 or len(text) > 1000:
        raise EnvironmentProblem("--reason: 10 to 1000 characters (the ledger's bounds)")
    if status == "superseded" and successor is None:
        raise EnvironmentProblem("--status superseded needs --successor VERSION")
    if advisory is not None and not advisory.startswith("https://"):
        raise EnvironmentProblem("--advisory: not an https:// URL")
    result: list[Withdrawn] = []

    def change(state: State) -> dict[str, object] | None:
        target = _find(state, name, version, registry)
        entry: dict[str, object] = {"artifact": _identity(target), "status": status,
                                    "reason": text, "recordedAt": ""}
        after = None
        if successor is not None:
            if semver.parse(successor) == semver.parse(version):
                raise EnvironmentProblem("--successor: another version than the one withdrawn")
            after = _find(state, name, successor, registry)
            entry["successor"] = _identity(after)
        if advisory is not None:
            entry["advisory"] = advisory
        doc = state.status_doc or {"schemaVersion": acx_index.STATUS_SCHEMA,
                                   "updatedAt": None, "entries": []}
        held = doc.get("entries")
        entries: list[dict[str, object]] = [e for e in held if isinstance(e, dict)] \
            if isinstance(held, list) else []
        label = f"{name} {target.coordinate[2]}"
        shown_successor = f"{name} {after.coordinate[2]}" if after else None
        at = next((n for n, e in enumerate(entries) if e.get("artifact") == entry["artifact"]),
                  None)
        if at is not None:
            old = entries[at]
            if (old.get("status"), old.get("reason"), old.get("successor"),
                    old.get("advisory")) == (status, text, entry.get("successor"), advisory):
                result.append(Withdrawn(name, target.coordinate[2], status, asked,
                                        str(old.get("recordedAt")), shown_successor, False))
                return None
            if RANK.get(str(old.get("status")), 0) >= RANK[status]:
                raise SourceError(f"{label} is {old.get('status')} already (since "
                                  f"{old.get('recordedAt')}); a ledger entry only escalates, "
                                  "deprecated to superseded to withdrawn")
        previous = doc.get("updatedAt")
        entry["recordedAt"] = stamp(now, previous if isinstance(previous, str) else None)
        if at is None:
            entries.append(entry)
        else:
            entries[at] = entry
        new = {"schemaVersion": acx_index.STATUS_SCHEMA, "updatedAt": entry["recordedAt"],
               "entries": entries}
        acx_index.parse_status(json.dumps(new).encode("utf-8"), "the new ledger")
        result.append(Withdrawn(name, target.coordinate[2], status, asked,
                                str(entry["recordedAt"]), shown_successor, True))
        return new

    with tempfile.TemporaryDirectory(prefix="acxfs-withdraw-") as work, \
            layout.opened(registry, create=False) as reg:
        if layout.read_file(reg, layout.INDEX) is None:
            raise SourceError(f"{registry}: no index.json; acxfs publish makes one")
        regenerate(reg, work, change)
    return result[0]
