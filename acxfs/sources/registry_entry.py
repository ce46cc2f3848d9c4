"""One cartridge's entry in an `acx.registry-index/1`, derived as the standard's builder
derives it (docs/publishing.md, "The index").

Invariant: an entry is computed only from a private copy of the cartridge that passed its
check against the registry's own trust (its `trust-registry.json`, else none: the trust an
index states is what the registry knows, never the publisher's machine), and only from the
copy: its signed cartridge facts, its verified ROM files, its `capabilities`, `attestations`
and `memory` rows.  No level credential is ever resolved (the builder resolves none), so
`level` is null and every capability unverified.  Whether the standard's builder would list
the cartridge is said in `issues` (empty: it would), never guessed from anything else.
"""

from __future__ import annotations

import contextlib
import json
import math
from dataclasses import dataclass, field

from acxfs import formats
from acxfs.container import Source
from acxfs.content.cache import process_cache
from acxfs.formats.acx.check import AcxReport
from acxfs.formats.acx.discovery import discovery_rows
from acxfs.trust.policy import TrustContext

LANCE_COLUMNS = 14  # the builder's acx.lance-memory/1 column count
MEMORY_FIELDS = ("id", "title", "summary", "sourceType", "portable", "codebaseFingerprint",
                 "timestamp", "impact", "xpAwarded", "tags", "artifactFingerprint", "zone")
RANK = {"verified": 4, "revoked": 3, "invalid": 2, "unresolved": 1}
PACKAGE_SPEC = "rom/package-spec.json"
LANCE_SCHEMA = "rom/schema/lance-memory.json"


@dataclass
class Summary:
    """A cartridge as the index lists it: `entry` in the builder's field order (without
    `registryStatus` and `latest`, which depend on the whole registry)."""

    entry: dict[str, object]
    created_at: str | None  # its acx.created_at: a candidate for the index's generatedAt
    issues: list[str] = field(default_factory=list)  # why the builder would not list it

    @property
    def coordinate(self) -> tuple[str, str, str]:
        e = self.entry
        return str(e["publisher"]), str(e["id"]), str(e["version"])

    @property
    def digest(self) -> str:
        return str(self.entry["digest"])


def summarize(copy: str, path: str, size: int, trust: TrustContext) -> Summary:
    """The entry of the cartridge whose private copy is `copy`, listed at `path` (relative
    to the registry) with `size` bytes.  The copy must have passed `formats.check` already."""
    report = formats.check(copy, trust, deep=True)
    verdict = report.verdict
    cartridge = report.cartridge if isinstance(report, AcxReport) else None
    meta = dict(cartridge.rows.meta) if cartridge is not None else {}
    source, _ = formats.open_source(copy, trust, process_cache(), min_trust="portable")
    with contextlib.closing(source):
        files = {name: _file(source, name) for name in _wanted(source)}
    rows = discovery_rows(copy)
    attestations = _attestations(rows.attestations)
    capabilities = _capabilities(rows.capabilities, attestations)
    memory, save = list(rows.memory), rows.save_rows
    spec_issues = _spec_issues(files, memory, meta.get("acx.embedding_engine"))
    publisher, ident = meta.get("acx.publisher_id", ""), meta.get("acx.artifact_id", "")
    role = meta.get("acx.role") or ""
    entry: dict[str, object] = {
        "id": ident, "slug": f"{publisher}__{ident}", "path": path,
        "name": meta.get("acx.agent_name", ""), "publisher": publisher, "role": role,
        "provider": meta.get("acx.provider", ""), "model": meta.get("acx.model", ""),
        "version": meta.get("acx.artifact_version", ""),
        "description": meta.get("acx.description")
        or f"A portable {(role or 'agent').replace('_', ' ')} cartridge.",
        "license": meta.get("acx.license") or None,
        "authors": _json_array(meta.get("acx.authors")),
        "tags": _json_array(meta.get("acx.tags")),
        "homepage": meta.get("acx.homepage") or None,
        "trust": verdict.trust, "trustStatus": verdict.status, "specClean": not spec_issues,
        "romHash": meta.get("acx.rom_manifest_hash"),
        "digest": meta.get("acx.rom_manifest_hash"), "bytes": size,
        "capabilities": capabilities, "level": None, "levelClaim": _level_claim(attestations),
    }
    issues = [f"unclean package: {'; '.join(spec_issues)}"] if spec_issues else []
    issues += [f"the cartridge has no {key}" for key in ("acx.role", "acx.provider", "acx.model")
               if not meta.get(key)]
    if not meta.get("acx.cartridge_id", "").startswith(f"{publisher}/{ident}@"):
        issues.append("acx.cartridge_id conflicts with the publisher/artifact identity")
    if save:
        issues.append("its SAVE zone holds data (a registry cartridge is ROM only)")
    return Summary(entry, meta.get("acx.created_at"), issues)


# --- the ROM files and rows the builder reads ---------------------------------------------


def _wanted(source: Source) -> list[str]:
    return [n for n in (PACKAGE_SPEC, LANCE_SCHEMA, *_required(source))
            if source.tree.lookup(n) is not None]


def _required(source: Source) -> list[str]:
    """The sqlar paths the package spec marks required (files, not directories)."""
    spec = _json(_file(source, PACKAGE_SPEC)) if source.tree.lookup(PACKAGE_SPEC) else None
    artifacts = spec.get("artifacts") if isinstance(spec, dict) else None
    out = []
    for a in artifacts if isinstance(artifacts, list) else []:
        if isinstance(a, dict) and a.get("required") and a.get("kind") == "sqlar":
            name = a.get("path")
            if isinstance(name, str) and name and not name.endswith("/"):
                out.append(name)
    return out


def _file(source: Source, name: str) -> bytes | None:
    entry = source.tree.lookup(name)
    if entry is None or entry.is_dir:
        return None
    return source.read(entry, 0, entry.size)


def _json(data: object) -> object:
    if not isinstance(data, (bytes, str)):
        return None
    try:
        return json.loads(data)
    except (ValueError, UnicodeDecodeError, RecursionError):
        return None


def _json_array(text: str | None) -> list[object]:
    value = _json(text)
    return value if isinstance(value, list) else []


def _spec_issues(files: dict[str, bytes | None], memory: list[object],
                 engine_text: str | None) -> list[str]:
    """What the builder's package-spec validation finds wrong (empty: `specClean`)."""
    spec = _json(files.get(PACKAGE_SPEC))
    if files.get(PACKAGE_SPEC) is None:
        return [f"missing {PACKAGE_SPEC}"]
    if not isinstance(spec, dict):
        return [f"{PACKAGE_SPEC} is not a JSON object"]
    issues = []
    if spec.get("schemaVersion") != "acx.package-spec/1":
        issues.append(f"unexpected package-spec version {spec.get('schemaVersion')}")
    for n, payload in enumerate(memory):
        issues += _memory_issues(n, _json(payload))
    engine = _json(engine_text)
    lance = _json(files.get(LANCE_SCHEMA))
    if files.get(LANCE_SCHEMA) is None:
        issues.append(f"missing {LANCE_SCHEMA}")
    elif isinstance(lance, dict):
        dim = lance.get("embeddingEngine", {}).get("dim") if isinstance(
            lance.get("embeddingEngine"), dict) else None
        if dim != (engine.get("dim") if isinstance(engine, dict) else None):
            issues.append("lance schema dim differs from the engine's")
        columns = lance.get("columns")
        if not isinstance(columns, list) or len(columns) != LANCE_COLUMNS:
            issues.append("lance schema column count drift")
    artifacts = spec.get("artifacts")
    for a in artifacts if isinstance(artifacts, list) else []:
        name = a.get("path") if isinstance(a, dict) else None
        if isinstance(a, dict) and a.get("required") and a.get("kind") == "sqlar" and \
                isinstance(name, str) and name and not name.endswith("/") and not files.get(name):
            issues.append(f"required artifact missing: {name}")
    return issues


def _memory_issues(n: int, r: object) -> list[str]:
    if not isinstance(r, dict):
        return [f"record[{n}] is not an object"]
    issues = [f"record[{n}] missing '{f}'" for f in MEMORY_FIELDS if f not in r]
    if not isinstance(r.get("portable"), bool):
        issues.append(f"record[{n}].portable not boolean")
    if r.get("impact") not in ("positive", "neutral", "negative"):
        issues.append(f"record[{n}].impact invalid")
    if r.get("zone") not in ("rom", "save"):
        issues.append(f"record[{n}].zone invalid")
    if not isinstance(r.get("tags"), list):
        issues.append(f"record[{n}].tags not array")
    if r.get("portable") and r.get("codebaseFingerprint") is not None:
        issues.append(f"record[{n}] portable=true must have null codebaseFingerprint")
    if not r.get("portable") and r.get("codebaseFingerprint") is None:
        issues.append(f"record[{n}] portable=false must have a codebaseFingerprint")
    return issues


# --- level claims and capabilities, unresolved as the builder leaves them -----------------


@dataclass(frozen=True)
class _Attestation:
    state: str  # unresolved or invalid: nothing is resolved here
    level: float | int | None
    tier: str | None
    references: tuple[str, ...]


def _attestations(rows: tuple[tuple[object, object], ...]) -> list[_Attestation]:
    out = []
    for att_id, document in rows:
        vc = _json(document)
        refs: list[object] = [att_id]
        level: float | int | None = None
        tier = None
        state = "invalid" if vc is None and document != "null" else "unresolved"
        if isinstance(vc, dict):
            refs += [vc.get("id"), (vc.get("credentialStatus") or {}).get("id")
                     if isinstance(vc.get("credentialStatus"), dict) else None]
            level, tier = _claim(vc)
            issuer = vc.get("issuer", {}).get("id") if isinstance(vc.get("issuer"), dict) else None
            method = vc.get("proof", {}).get("verificationMethod") if isinstance(
                vc.get("proof"), dict) else None
            if not isinstance(issuer, str) or not issuer or not isinstance(method, str) or \
                    not method or (method != issuer and not method.startswith(f"{issuer}#")):
                state = "invalid"
        unique = tuple(dict.fromkeys(r for r in refs if isinstance(r, str) and r))
        out.append(_Attestation(state, level, tier, unique))
    return out


def _claim(vc: dict[str, object]) -> tuple[float | int | None, str | None]:
    subject = vc.get("credentialSubject")
    results = subject.get("result") if isinstance(subject, dict) else None
    first = results[0] if isinstance(results, list) and results else None
    if not isinstance(first, dict):
        return None, None
    level = first.get("acx:acxLevel")
    tier = first.get("acx:careerTier")
    finite = isinstance(level, (int, float)) and not isinstance(level, bool) and \
        math.isfinite(level)
    return (level if finite else None), (tier if isinstance(tier, str) else None)


def _by_level(a: _Attestation) -> float:
    return -(a.level if a.level is not None else -1)


def _level_claim(attestations: list[_Attestation]) -> dict[str, object]:
    claimed = sorted((a for a in attestations if a.level is not None or a.tier is not None),
                     key=_by_level)
    strongest = sorted(attestations, key=lambda a: -RANK.get(a.state, 0))
    selected = claimed[0] if claimed else strongest[0] if strongest else None
    return {"acxLevel": claimed[0].level if claimed else None,
            "careerTier": claimed[0].tier if claimed else None,
            "verificationState": selected.state if selected else "unresolved"}


def _capabilities(rows: tuple[object, ...],
                  attestations: list[_Attestation]) -> list[dict[str, object]]:
    out = []
    for text in rows:
        cap = _json(text)
        if not cap:
            continue  # unreadable or empty: the builder lists no capability for the row
        if not isinstance(cap, dict):
            continue
        refs = cap.get("evidenceRefs")
        wanted = [r.get("ref") for r in (refs if isinstance(refs, list) else [])
                  if isinstance(r, dict) and r.get("kind") == "level-attestation"
                  and isinstance(r.get("ref"), str)]
        matches = [next(a for a in attestations if ref in a.references) for ref in wanted
                   if any(ref in a.references for a in attestations)]
        best = sorted(matches, key=lambda a: -RANK.get(a.state, 0))
        proficiency = cap.get("proficiency")
        out.append({
            "taskType": cap.get("taskType"), "stack": cap.get("stack") or [],
            "domain": cap.get("domain") or None,
            "claimedVerified": isinstance(proficiency, dict) and proficiency.get("verified")
            is True,
            "verified": False, "verificationState": best[0].state if best else "unresolved",
        })
    return out
