"""`acxfs publish`: a bundle `verify` accepts, copied to its coordinate in an ACX registry,
and the registry's `index.json` regenerated as the standard's builder writes it.

Invariant: the bytes published are the bytes checked (one private copy gets `verify`'s full
check against the trust store and is what is placed); every cartridge already in the tree is
re-checked from a private copy and the index is rebuilt from those copies and `status.json`
alone, so the same registry always gives the same bytes: `generatedAt` is the builder's, the
latest of `status.json`'s `updatedAt` and the listed cartridges' signed `acx.created_at`,
never a clock.  A coordinate is immutable: the same bytes again change nothing, other bytes
are refused.  Every refusal happens before the first write, and a failed write takes back
what it placed (`acxfs.sources.registry_layout`).
"""

from __future__ import annotations

import functools
import json
import re
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field

from acxfs import formats, semver
from acxfs.errors import RefusedError, SourceError, TrustConfigError
from acxfs.safe.inputs import copy_input
from acxfs.sources import acx_index
from acxfs.sources import registry_layout as layout
from acxfs.sources.registry_entry import Summary, summarize
from acxfs.trust.policy import TrustContext, parse_registry

EPOCH = "1970-01-01T00:00:00.000Z"  # the builder's generatedAt of an empty registry
# The index schema's publisher: reverse DNS without the ledger's /path suffix.
PUBLISHER = re.compile(r"(?:[a-z0-9](?:[a-z0-9-]*[a-z0-9])?\.)+[a-z0-9][a-z0-9-]*")


@dataclass(frozen=True)
class State:
    """What a registry holds, read and checked: its cartridges' entries and its ledger."""

    summaries: list[Summary]
    found: list[layout.Found]
    status_doc: dict[str, object] | None  # status.json as written (None: absent)
    index_bytes: bytes | None


@dataclass
class Published:
    name: str
    version: str
    path: str  # the cartridge below the registry
    digest: str
    size: int
    written: bool  # the cartridge was placed now (False: those bytes were there already)
    index_written: bool
    warnings: list[str] = field(default_factory=list)

    @property
    def line(self) -> str:
        if not self.written:
            return f"{self.name} {self.version} is already published at {self.path} ({self.digest})"
        return f"published {self.name} {self.version} at {self.path} ({self.digest})"


def registry_trust(reg: layout.RegistryDir) -> TrustContext:
    """The registry's own `trust-registry.json` (unreadable or absent: no key, as the
    builder takes it): the trust the index states."""
    data = layout.read_file(reg, layout.TRUST)
    if data is None:
        return TrustContext()
    try:
        return TrustContext(registry=parse_registry(data.decode("utf-8"),
                                                    reg.where(layout.TRUST)))
    except (TrustConfigError, UnicodeDecodeError):
        return TrustContext()


def read_state(reg: layout.RegistryDir, work: str) -> State:
    """Read and check everything the index is made from; refuse what the builder rejects."""
    index_bytes = layout.read_file(reg, layout.INDEX)
    if index_bytes is not None:
        acx_index.parse_index(index_bytes, reg.where(layout.INDEX))  # refuses a malformed one
    status_bytes = layout.read_file(reg, layout.STATUS)
    status_doc = None
    if status_bytes is not None:
        acx_index.parse_status(status_bytes, reg.where(layout.STATUS))
        status_doc = json.loads(status_bytes)
    trust = registry_trust(reg)
    found = layout.cartridges(reg, work)
    summaries = [listed(reg.where(f.rel), f.copy, f.rel, f.size, trust) for f in found]
    return State(summaries, found, status_doc, index_bytes)


def listed(shown: str, copy: str, rel: str, size: int, trust: TrustContext) -> Summary:
    """The entry of one cartridge copy, or the refusal the builder would give."""
    report = formats.check(copy, trust, deep=True)
    verdict = report.verdict
    if not formats.named(report, "acx") or verdict.is_integrity_failure \
            or verdict.trust == "legacy":
        raise SourceError(f"{shown}: {verdict.line}; the standard's builder rejects it")
    identity = formats.identity(report)
    expected = f"cartridges/{identity.publisher}/{identity.artifact}/{identity.version}/" \
        "cartridge.acx"
    if rel != expected:
        raise SourceError(f"{shown}: holds {identity.name} {identity.version}, whose path is "
                          f"{expected}")
    check_identity(shown, identity.publisher, identity.artifact, identity.version)
    return summarize(copy, rel, size, trust)


def check_identity(shown: str, publisher: str | None, ident: str, version: str) -> None:
    if publisher is None or not PUBLISHER.fullmatch(publisher):
        raise SourceError(f"{shown}: publisher {publisher!r} is not a reverse-DNS name the "
                          "registry index can list")
    if not acx_index.AGENT_ID.fullmatch(ident):
        raise SourceError(f"{shown}: id {ident!r} is not a registry agent id "
                          "([a-z][a-z0-9-]{0,63})")
    if not semver.is_semver(version):
        raise SourceError(f"{shown}: version {version!r} is not SemVer")


# --- the index --------------------------------------------------------------------------


def _collate(text: str) -> tuple[str, str]:
    """JavaScript's `localeCompare` order for the names registries carry (letters compared
    without case first, a lower-case letter before its capital)."""
    return text.casefold(), text.swapcase()


def _order(a: dict[str, object], b: dict[str, object]) -> int:
    for x, y in ((_level(b), _level(a)), *((_collate(str(a[k])), _collate(str(b[k])))
                                            for k in ("name", "publisher", "id"))):
        if x != y:
            return -1 if x < y else 1  # type: ignore[operator]
    va, vb = semver.parse(str(a["version"])), semver.parse(str(b["version"]))
    return 0 if va == vb else (-1 if vb < va else 1)


def _level(entry: dict[str, object]) -> float:
    level = entry.get("level")
    value = level.get("acxLevel") if isinstance(level, dict) else None
    return float(value) if isinstance(value, (int, float)) else -1.0


def lifecycle(status_doc: dict[str, object] | None, s: Summary) -> dict[str, object]:
    """The entry's `registryStatus`: its ledger entry by exact identity, else active."""
    publisher, ident, version = s.coordinate
    entries = status_doc.get("entries") if status_doc else None
    for item in entries if isinstance(entries, list) else []:
        art = item.get("artifact") if isinstance(item, dict) else None
        if isinstance(art, dict) and (art.get("artifactType"), art.get("publisherId"),
                                      art.get("id"), art.get("version"), art.get("digest")) \
                == ("agent", publisher, ident, version, s.digest):
            return {"status": item["status"], "reason": item["reason"],
                    "recordedAt": item["recordedAt"], "successor": item.get("successor"),
                    "advisory": item.get("advisory")}
    return {"status": "active", "reason": None, "recordedAt": None, "successor": None,
            "advisory": None}


def generated_at(status_doc: dict[str, object] | None, summaries: list[Summary]) -> str:
    """The latest of the ledger's `updatedAt` (absent: the epoch) and every listed
    cartridge's `acx.created_at`, as written; equal instants: the last in scan order."""
    updated = status_doc.get("updatedAt") if status_doc else EPOCH
    stamps = []
    for text in [updated, *(s.created_at for s in summaries)]:
        try:
            stamps.append((acx_index.instant(text), str(text)))
        except ValueError:
            continue
    stamps.sort(key=lambda t: t[0])
    return stamps[-1][1] if stamps else EPOCH


def build_index(summaries: list[Summary], status_doc: dict[str, object] | None) -> bytes:
    """The index bytes the standard's builder writes for these cartridges and this ledger."""
    entries: list[dict[str, object]] = []
    newest: dict[tuple[str, str], dict[str, object]] = {}
    for s in summaries:
        entry = dict(s.entry)
        entry["registryStatus"] = lifecycle(status_doc, s)
        key = (str(entry["publisher"]), str(entry["id"]))
        best = newest.get(key)
        if best is None or semver.parse(str(entry["version"])) > semver.parse(
                str(best["version"])):
            newest[key] = entry
        entries.append(entry)
    for entry in entries:
        entry["latest"] = newest[(str(entry["publisher"]), str(entry["id"]))] is entry
    entries.sort(key=functools.cmp_to_key(_order))
    doc = {"schemaVersion": acx_index.INDEX_SCHEMA,
           "generatedAt": generated_at(status_doc, summaries),
           "artifactCount": len(entries), "count": len(entries), "cartridges": entries,
           "workflowCount": 0, "workflows": [], "agentGraphCount": 0, "agentGraphs": [],
           "templateCount": 0, "templates": []}
    try:
        return (json.dumps(doc, indent=2, ensure_ascii=False) + "\n").encode("utf-8")
    except UnicodeEncodeError:
        raise SourceError("a cartridge's facts hold text that is not Unicode; the index "
                          "cannot list it") from None


# --- publishing -------------------------------------------------------------------------


def publish(bundle: str, registry: str, trust: TrustContext) -> Published:
    with tempfile.TemporaryDirectory(prefix="acxfs-publish-") as work:
        copy = f"{work}/bundle"
        size, sha = _copy_bundle(bundle, copy)
        report = formats.check(copy, trust, deep=True)
        if not formats.named(report, "acx"):
            raise SourceError(f"{bundle}: an azphalt package; an ACX registry carries "
                              "cartridges (acxfs push publishes it to an OCI registry)")
        if report.verdict.exit_code != 0:
            raise RefusedError(f"{bundle}: {report.verdict.line}; acxfs publishes only what "
                               "verify accepts", exit_code=report.verdict.exit_code)
        identity = formats.identity(report)
        check_identity(bundle, identity.publisher, identity.artifact, identity.version)
        rel = f"cartridges/{identity.publisher}/{identity.artifact}/{identity.version}/" \
            "cartridge.acx"
        with layout.opened(registry, create=True) as reg:
            state = read_state(reg, work)
            return _place(reg, state, bundle, (copy, size, sha), rel, identity.name,
                          identity.version)


def _place(reg: layout.RegistryDir, state: State, bundle: str, file: tuple[str, int, str],
           rel: str, name: str, version: str) -> Published:
    copy, size, sha = file
    held = next((f for f in state.found if f.rel == rel), None)
    if held is not None and held.sha256 != sha:
        raise SourceError(f"{reg.where(rel)}: {name} {version} is published already with other "
                          f"bytes (sha256:{held.sha256}, not sha256:{sha}); a published "
                          "version is immutable: publish a new version")
    summaries = list(state.summaries)
    mine = next((s for f, s in zip(state.found, summaries, strict=True) if f.rel == rel), None)
    if mine is None:
        mine = listed(bundle, copy, rel, size, registry_trust(reg))
        summaries.append(mine)
    warnings = [f"the standard's builder would not list {name} {version}: {why}"
                for why in mine.issues]
    index = build_index(summaries, state.status_doc)
    written = held is None
    try:
        if written:
            layout.place_cartridge(reg, rel, copy)
        if index != state.index_bytes:
            layout.write_file(reg, layout.INDEX, index)
    except BaseException:
        layout.undo(reg)
        raise
    layout.forget(reg)
    return Published(name, version, reg.where(rel), mine.digest, size, written,
                     index != state.index_bytes, warnings)


def regenerate(reg: layout.RegistryDir, work: str,
               change: Callable[[State], dict[str, object] | None]) -> State:
    """Read the registry, let `change` return a new ledger (None: none), and write the
    ledger and the index it gives; the state read."""
    state = read_state(reg, work)
    status_doc = change(state)
    if status_doc is None:
        return state
    index = build_index(state.summaries, status_doc)
    ledger = (json.dumps(status_doc, indent=2, ensure_ascii=False) + "\n").encode("utf-8")
    old = layout.read_file(reg, layout.STATUS)
    layout.write_file(reg, layout.STATUS, ledger)
    try:
        if index != state.index_bytes:
            layout.write_file(reg, layout.INDEX, index)
    except BaseException:
        if old is not None:
            layout.write_file(reg, layout.STATUS, old)
        raise
    return state


def _copy_bundle(bundle: str, copy: str) -> tuple[int, str]:
    """Copy `bundle` (a regular file, never written) to the private file `copy`; its size
    and sha256 hex."""
    return copy_input(bundle, copy, layout.BUNDLE_LIMIT, "bundle acxfs publishes")
