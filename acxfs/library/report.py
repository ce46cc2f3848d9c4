"""What `acxfs list` shows: the library's record joined with what its daemon says now.

Invariant: every field comes from the library's own state or the daemon's answer; text that
came from a bundle is escaped by the renderer, and `--json` fields are the ones documented in
docs/library.md.
"""

from __future__ import annotations

import datetime as dt
import os
from pathlib import Path

from acxfs import semver
from acxfs.library.changes import journal
from acxfs.library.links import agent_links
from acxfs.library.manager import Library
from acxfs.library.store import lockfile
from acxfs.library.store.checks import Checks, load_checks, parse_time
from acxfs.library.store.state import Installed, LibraryState, Revision
from acxfs.sources.oci.reference import is_oci, reference_of
from acxfs.text import printable


def _revision_fields(identity: str, rev: Revision) -> dict[str, object]:
    """What `list --json` says of any installed revision, in its scope's entry."""
    return {"identity": identity, "version": rev.version, "format": rev.format,
            "digest": rev.digest, "manifest": rev.manifest, "keyid": rev.keyid,
            "publisher": rev.publisher}


def _not_served(rev: Revision, status: dict[str, object] | None, served: dict[str, str],
                refused: dict[str, str]) -> str | None:
    """Why the daemon does not serve `rev` now (None: it does)."""
    if status is None:
        return "the library daemon is not running (acxfs up)"
    if rev.prefix not in served:
        return refused.get(rev.prefix, "not loaded")
    return None


def describe_library(library: Library) -> dict[str, object]:
    """The library as one JSON document (after finishing an unfinished change)."""
    with journal.locked(library.paths):
        library.recover(tolerant=True)
        state = library.state()
    library.note_trust(state)
    status = library.daemon_status()
    checks = load_checks(library.paths.checks)
    served = _mapping(status, "served")
    refused = _mapping(status, "refused")
    bundles: list[dict[str, object]] = []
    for identity, item in sorted(state.installed.items()):
        rev = item.current
        why = (f"{item.withdrawn}; links removed" if item.withdrawn is not None
               else _not_served(rev, status, served, refused))
        bundles.append({
            **_revision_fields(identity, rev), "installedAt": rev.installed_at,
            "skills": sorted(rev.skills), "path": str(library.paths.mnt / rev.prefix),
            "served": why is None, "why": why,
            "source": rev.source, "coordinate": rev.coordinate,
            "reference": reference_of(rev.source, rev.coordinate or "")
            if rev.source and is_oci(rev.source) else None,
            "lifecycle": lifecycle_of(state, rev),
            "previous": None if item.previous is None else {
                "version": item.previous.version, "digest": item.previous.digest,
                "served": status is not None and item.previous.prefix in served},
            "links": [{"path": str(link.path), "target": link.target, "state": condition}
                      for link, condition in zip(item.links, agent_links.states_in(
                          item.links, state.whole), strict=True)],
            **_freshness(checks, identity, item),
        })
    return {
        "library": str(library.paths.root), "trustStore": state.trust_dir,
        "daemon": None if status is None else {"pid": status.get("pid"),
                                               "mountpoint": status.get("mountpoint")},
        "bundles": bundles,
        "failures": _items(status, "failures"),
        "floors": {k: {"version": f.version, "installedAt": f.installed_at}
                   for k, f in sorted(state.floors.items())},
        "projects": _projects(library, state, status, served, refused),
        "publishers": {k: {"publisher": b.publisher, "keyid": b.keyid, "since": b.bound_at}
                       for k, b in sorted(state.bindings.items())},
        "refreshEvery": state.refresh_every,
        "lastCheck": checks.last_round,
        "whole": {directory: {"view": view, "state": agent_links.state_of(
            agent_links.whole_link(directory, view))} for directory, view in
            sorted(state.whole.items())},
    }


def _freshness(checks: Checks, identity: str, item: Installed) -> dict[str, object]:
    """What the checks of its source say of an installed identity (`list --json`)."""
    source = checks.sources.get(item.current.source) if item.current.source else None
    bundle = checks.bundles.get(identity)
    error = (bundle.error if bundle else None) or (source.error if source else None)
    waiting = bundle.update_available if bundle and item.updates != "off" else None
    if waiting is not None and semver.is_semver(waiting) and \
            semver.parse(waiting) <= semver.parse(item.current.version):
        waiting = None  # installed since the check (acxfs update)
    return {"updates": item.updates, "checkedAt": source.checked_at if source else None,
            "checkError": error, "updateAvailable": waiting}


def ago(when: str, now: dt.datetime | None = None) -> str:
    """`when` (ISO 8601 UTC) as people say it: "4 min ago"."""
    seconds = ((now or dt.datetime.now(dt.UTC)) - parse_time(when)).total_seconds()
    for unit, size in (("d", 86400), ("h", 3600), ("min", 60)):
        if seconds >= size:
            return f"{int(seconds // size)} {unit} ago"
    return "just now" if seconds < 5 else f"{int(seconds)} s ago"


def _projects(library: Library, state: LibraryState, status: dict[str, object] | None,
              served: dict[str, str], refused: dict[str, str]) -> list[dict[str, object]]:
    """Each project: its directory, its lock, whether either is gone, its bundles and links."""
    found: list[dict[str, object]] = []
    for directory, project in sorted(state.projects.items()):
        lock = lockfile.path_of(Path(directory))
        bundles: list[dict[str, object]] = []
        for identity, b in sorted(project.bundles.items()):
            rev = b.revision
            why = (f"{b.withdrawn}; project links removed" if b.withdrawn is not None
                   else _not_served(rev, status, served, refused))
            bundles.append({
                **_revision_fields(identity, rev), "skills": sorted(rev.skills),
                "agents": sorted(b.agents), "path": str(library.paths.mnt / rev.prefix),
                "served": why is None, "why": why,
                "links": [{"path": str(link.path), "target": link.target,
                           "state": agent_links.state_of(link)} for link in b.links],
            })
        found.append({"dir": directory, "lock": str(lock),
                      "dirGone": not os.path.isdir(directory),
                      "lockGone": not os.path.lexists(lock), "bundles": bundles})
    return found


def lifecycle_of(state: LibraryState, rev: Revision) -> str | None:
    """What the revision's source says of it now: a pulled release acxfs remembers, else what
    the source said when it was installed."""
    memory = state.sources.get(rev.source) if rev.source else None
    pulled = memory.pulled.get(f"{rev.identity} {rev.version}") if memory else None
    return pulled.describe() if pulled is not None else rev.lifecycle


def _mapping(status: dict[str, object] | None, key: str) -> dict[str, str]:
    value = status.get(key) if status else None
    return {str(k): str(v) for k, v in value.items()} if isinstance(value, dict) else {}


def _items(status: dict[str, object] | None, key: str) -> list[object]:
    value = status.get(key) if status else None
    return list(value) if isinstance(value, list) else []


def render_library(doc: dict[str, object]) -> str:
    lines: list[str] = []
    daemon = doc["daemon"]
    lines.append(f"daemon: pid {daemon['pid']} on {daemon['mountpoint']}" if isinstance(
        daemon, dict) else "daemon: not running (links dangle until: acxfs up)")
    bundles = doc["bundles"]
    assert isinstance(bundles, list)
    if not bundles:
        lines.append("no bundles installed (acxfs add FILE)")
    for b in bundles:
        state = "served" if b["served"] else f"NOT served: {b['why']}"
        lines.append(f"{b['identity']} {b['version']} ({b['format']}, {state})")
        lines.append(f"  skills: {', '.join(b['skills'])}")
        if b["source"]:
            life = f" ({b['lifecycle']})" if b["lifecycle"] else ""
            where = b["reference"] or f"{b['source']} {b['coordinate']}"
            lines.append(f"  from: {where}{life}")
        if b["source"]:
            checked = f", checked {ago(b['checkedAt'])}" if b["checkedAt"] else ", not checked yet"
            lines.append(f"  updates: {b['updates']}{checked}")
        if b["checkError"]:
            lines.append(f"  check failed: {b['checkError']}")
        if b["updateAvailable"]:
            lines.append(f"  {b['updateAvailable']} waits: acxfs update {b['identity']}")
        if b["previous"]:
            lines.append(f"  previous: {b['previous']['version']} (acxfs revert {b['identity']})")
        for link in b["links"]:
            mark = "" if link["state"] == "ok" else f"  [{link['state']}]"
            lines.append(f"  {link['path']}{mark}")
    projects = doc["projects"]
    assert isinstance(projects, list)
    for project in projects:
        gone = ""
        if project["dirGone"]:
            gone = f"  [directory gone: acxfs remove --project {project['dir']}]"
        elif project["lockGone"]:
            gone = "  [acxfs.lock gone]"
        lines.append(f"project {project['dir']}{gone}")
        for b in project["bundles"]:
            state = "served" if b["served"] else f"NOT served: {b['why']}"
            lines.append(f"  {b['identity']} {b['version']} ({b['format']}, {state})")
            for link in b["links"]:
                mark = "" if link["state"] == "ok" else f"  [{link['state']}]"
                lines.append(f"    {link['path']}{mark}")
    failures = doc["failures"]
    assert isinstance(failures, list)
    for f in failures:
        lines.append(f"FAILED verification: {f['bundle']}/{f['path']}: {f['reason']}")
    return "".join(printable(line) + "\n" for line in lines)
