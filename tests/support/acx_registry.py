"""ACX registries the tests build: releases packed and signed with `acxfs pack`, laid out at
their coordinates and indexed the way the standard's builder does (every field of an
`acx.registry-index/1` cartridge entry), with an `acx.registry-status/1` ledger.

Invariant: the index is written from the packed files themselves (their size and their
signed ROM manifest hash, read by acxfs's own check without trust), so a test that wants a
lying index changes the written file, never this builder.
"""

from __future__ import annotations

import json
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from acxfs import formats
from acxfs.trust.policy import TrustContext
from scripts.mounting import acxfs
from tests.support.library import ok

FIXTURES = Path(__file__).parent.parent / "fixtures"
SNAPSHOT = FIXTURES / "registry"
PUBLISHER = "io.github.tester"


@dataclass(frozen=True)
class Packed:
    publisher: str
    id: str
    version: str
    file: Path

    @property
    def name(self) -> str:
        return f"{self.publisher}/{self.id}"

    @property
    def path(self) -> str:
        return f"cartridges/{self.publisher}/{self.id}/{self.version}/cartridge.acx"

    def rom_hash(self) -> str:
        return formats.identity(formats.check(str(self.file), TrustContext())).release


def write_skill(root: Path, name: str, text: str) -> Path:
    skill = root / name
    skill.mkdir(parents=True)
    (skill / "SKILL.md").write_text(
        f"---\nname: {name}\ndescription: {text}\n---\n\n# {name}\n\n{text}\n")
    return skill


def pack(work: Path, version: str, *, artifact: str = "helper", skill: str = "helper-skill",
         publisher: str = PUBLISHER, key: Path | None = None, text: str = "") -> Packed:
    """A signed release (the local key, or `key`) whose skill says which version it is."""
    src = work / f"src-{artifact}-{version}-{key.stem if key else 'local'}"
    skill_dir = write_skill(src, skill, text or f"The {artifact} skill, release {version}.")
    out = work / f"{artifact}-{version}-{key.stem if key else 'local'}.acx"
    args: list[object] = ["pack", skill_dir, "-o", out, "--publisher", publisher,
                          "--id", artifact, "--version", version]
    if key is not None:
        args += ["--key", key]
    ok(acxfs(*args))
    return Packed(publisher, artifact, version, out)


def entry(p: Packed, bytes_: int | None = None) -> dict[str, Any]:
    """An index entry as the standard's builder writes it."""
    rom = p.rom_hash()
    return {
        "id": p.id, "slug": f"{p.publisher}__{p.id}", "path": p.path, "name": p.id.title(),
        "publisher": p.publisher, "role": "software_engineer", "provider": "claude",
        "model": "claude-sonnet-5", "version": p.version, "description": f"{p.id} agent",
        "license": "Apache-2.0", "authors": [{"name": p.publisher}], "tags": [p.id],
        "homepage": None, "trust": "portable", "trustStatus": "warning", "specClean": True,
        "romHash": rom, "digest": rom,
        "bytes": p.file.stat().st_size if bytes_ is None else bytes_,
        "capabilities": [], "level": None, "levelClaim": {},
        "registryStatus": {"status": "active", "reason": None, "recordedAt": None,
                           "successor": None, "advisory": None},
        "latest": False,
    }


def status_entry(p: Packed, status: str, reason: str, recorded: str = "2026-11-01T00:00:00Z",
                 successor: Packed | None = None) -> dict[str, Any]:
    def ident(q: Packed) -> dict[str, Any]:
        return {"artifactType": "agent", "publisherId": q.publisher, "id": q.id,
                "version": q.version, "digest": q.rom_hash()}

    doc: dict[str, Any] = {"artifact": ident(p), "status": status, "reason": reason,
                           "recordedAt": recorded}
    if successor is not None:
        doc["successor"] = ident(successor)
    return doc


def build(root: Path, releases: list[Packed], *, status: list[dict[str, Any]] | None = None,
          generated: str = "2026-11-20T00:00:00.000Z",
          updated: str = "2026-11-20T00:00:00.000Z") -> Path:
    """A registry directory at `root`: each release at its coordinate, index.json and (unless
    `status` is None) status.json."""
    root.mkdir(parents=True, exist_ok=True)
    for p in releases:
        target = root / p.path
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(p.file, target)
    write_index(root, [entry(p) for p in releases], generated)
    if status is not None:
        write_status(root, status, updated)
    return root


def write_index(root: Path, cartridges: list[dict[str, Any]],
                generated: str = "2026-11-20T00:00:00.000Z") -> None:
    doc = {"schemaVersion": "acx.registry-index/1", "generatedAt": generated,
           "artifactCount": len(cartridges), "count": len(cartridges),
           "cartridges": cartridges, "workflowCount": 0, "workflows": [],
           "agentGraphCount": 0, "agentGraphs": [], "templateCount": 0, "templates": []}
    (root / "index.json").write_text(json.dumps(doc, indent=2) + "\n")


def write_status(root: Path, entries: list[dict[str, Any]],
                 updated: str = "2026-11-20T00:00:00.000Z") -> None:
    doc = {"schemaVersion": "acx.registry-status/1", "updatedAt": updated, "entries": entries}
    (root / "status.json").write_text(json.dumps(doc, indent=2) + "\n")


def read_index(root: Path) -> dict[str, Any]:
    doc = json.loads((root / "index.json").read_text())
    assert isinstance(doc, dict)
    return doc
