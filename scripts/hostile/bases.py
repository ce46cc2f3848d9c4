"""Where mutants start: valid signed cartridges, and the choosers that drive every mutation.

A `Base` is a cartridge that verifies as trusted, with the original bytes of every file and a
registry and key file that trust its signer: three written by the independent writer
(`cartwriter`, raw DEFLATE, zlib with directory rows, stored), and the real cartridges of
`tests/fixtures/real/` when asked. `build_bases` checks each one verifies before it is used.
A `Chooser` is where a mutation's decisions come from: a seeded `Random` (replayable by seed
and index) or hypothesis (shrinkable).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import random
import shutil
import sqlite3
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Protocol, TypeVar

from scripts import cartwriter as cw
from scripts.hostile.running import run_main

T = TypeVar("T")

# The suite's real cartridges: read as data files when present, never imported.
REAL = Path(__file__).resolve().parents[2] / "tests" / "fixtures" / "real"

PUBLISHER = "io.github.example"
SIGNER = cw.new_signer(bytes(range(32)))  # the writer bases' publisher key
ATTACKER = cw.new_signer(bytes(range(200, 232)))  # a key no base trusts


# ============================================================================ choosers


class Chooser(Protocol):
    """Where a mutation's decisions come from: a seeded Random, or hypothesis (shrinkable)."""

    def integer(self, lo: int, hi: int) -> int: ...

    def choice(self, items: Sequence[T]) -> T: ...

    def blob(self, lo: int, hi: int) -> bytes: ...


class RandomChooser:
    def __init__(self, rng: random.Random) -> None:
        self.rng = rng

    def integer(self, lo: int, hi: int) -> int:
        return self.rng.randint(lo, hi)

    def choice(self, items: Sequence[T]) -> T:
        return items[self.rng.randrange(len(items))]

    def blob(self, lo: int, hi: int) -> bytes:
        return self.rng.randbytes(self.rng.randint(lo, hi))


def chooser_for(seed: int, index: int) -> RandomChooser:
    digest = hashlib.sha256(f"acxfs-fuzz:{seed}:{index}".encode()).digest()
    return RandomChooser(random.Random(int.from_bytes(digest[:8], "big")))


# ============================================================================ bases


@dataclasses.dataclass(frozen=True, repr=False)
class Base:
    """A valid signed cartridge, its original bytes per path, and how to trust its signer."""

    name: str
    path: Path
    files: dict[str, bytes]  # every sqlar file row: name -> original uncompressed bytes
    key_file: Path  # SPKI PEM of the signer (for --trust-key)
    registry: dict[str, Any] | None  # a registry trusting the signer (for --registry), or None
    signed_meta: dict[str, str]  # what `inspect --json` shows as signedMeta for the original
    signed: bool = True  # False for real fixtures we cannot re-sign (we never hold their key)

    def __repr__(self) -> str:
        return f"Base({self.name})"

    @property
    def rom(self) -> dict[str, bytes]:
        return {k: v for k, v in self.files.items() if k.startswith("rom/")}


SKILL_MD = b"""---
name: demo-skill
description: A small demo skill used by the acxfs fuzzer. Use it when fuzzing acxfs.
license: Apache-2.0
metadata:
  version: 1.0.0
---

# Demo skill

Read `references/guide.md`, then run `scripts/run.sh`.
"""


def _base_files(variant: int) -> dict[str, bytes]:
    rng = random.Random(1000 + variant)
    words = [b"alpha", b"beta", b"gamma", b"delta", b"omega", b"signed", b"bytes", b"rom"]
    text = b" ".join(rng.choice(words) for _ in range(40_000))  # ~230 KB, compresses well
    files = {
        "rom/skills/demo-skill/SKILL.md": SKILL_MD,
        "rom/skills/demo-skill/references/guide.md": b"# Guide\n\nStep one: read. Step two.\n",
        "rom/skills/demo-skill/scripts/run.sh": b"#!/bin/sh\necho 'demo skill ran'\n",
        "rom/knowledge/NOTES.md": b"# Notes\n\nThese notes are signed ROM content.\n",
        # equal sizes, different bytes: swap targets
        "rom/data/eq-a.txt": b"A" * 3000 + b"first file of three\n",
        "rom/data/eq-b.txt": b"B" * 3000 + b"second file of thre\n",
        "rom/data/eq-c.bin": rng.randbytes(3020),
        "rom/data/big.txt": text,  # bomb target: sz large enough to hide a deflate bomb
        "rom/data/random.bin": rng.randbytes(70_000),  # incompressible: overflow pages
        "rom/data/empty.txt": b"",
        "save/notes/session.md": b"unsigned SAVE zone notes\n",
        "save/state.json": b'{"turn": 3}\n',
    }
    return files


def _write_base(workdir: Path, name: str, variant: int, **kw: Any) -> Base:
    files = _base_files(variant)
    path = workdir / f"{name}.acx"
    cw.build_cartridge(
        path, files, signer=SIGNER, publisher=PUBLISHER,
        capabilities={"cap-demo": cw.jcs({"id": "cap-demo", "taskType": "demo"}).decode()},
        memories={"m1": cw.jcs({"id": "m1", "title": "demo memory"}).decode()},
        unbound_meta={"acx.vec0_format": "1"}, **kw,
    )
    key = workdir / "signer.pub.pem"
    key.write_text(SIGNER.public_pem, encoding="ascii")
    registry = json.loads(cw.registry_json([cw.registry_entry(SIGNER, PUBLISHER)]))
    return Base(name, path, files, key, registry, {})


def _real_base(workdir: Path, fixture: Path, registry_file: Path | None) -> Base:
    path = workdir / fixture.name
    shutil.copyfile(fixture, path)
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        files = {
            name: cw.inflate(data, sz)
            for name, mode, sz, data in conn.execute("SELECT name, mode, sz, data FROM sqlar")
            if not (mode or 0) & 0o040000
        }
        (pem,) = conn.execute(
            "SELECT public_key_pem FROM signatures WHERE target='rom-manifest'"
        ).fetchone()
    finally:
        conn.close()
    key = workdir / (fixture.stem + ".pub.pem")
    key.write_text(pem, encoding="ascii")
    registry = json.loads(registry_file.read_text()) if registry_file else None
    return Base(fixture.stem, path, files, key, registry, {}, signed=False)


def build_bases(workdir: Path, include_real: bool = True) -> list[Base]:
    """The valid cartridges every mutant starts from (each checked to verify as trusted)."""
    workdir.mkdir(parents=True, exist_ok=True)
    bases = [
        _write_base(workdir, "writer-raw", 0, deflate="raw"),
        _write_base(workdir, "writer-zlib-dirs", 1, deflate="zlib", sqlar_dirs=True,
                    modes={"rom/skills/demo-skill/scripts/run.sh": 0o100755}),
        _write_base(workdir, "writer-stored", 2, deflate="none"),
    ]
    if include_real and REAL.is_dir():
        for name in ("rex-calder-1.0.0.acx", "ada-ridge-1.0.0.acx"):
            if (REAL / name).exists():
                bases.append(_real_base(workdir, REAL / name, None))
        scenario = REAL / "scenario-research-designer.acx"
        if scenario.exists():
            bases.append(_real_base(
                workdir, scenario, REAL / "scenario-research-designer.registry.json"))
    checked = []
    for base in bases:
        verdict = run_main(["verify", "--deep", str(base.path), "--trust-key", str(base.key_file)])
        if verdict.code != 0:
            raise RuntimeError(f"base {base.name} does not verify: {verdict.out}{verdict.err}")
        doc = json.loads(run_main(["inspect", "--json", str(base.path), "--trust-key",
                                   str(base.key_file)]).out)
        registry = base.registry or json.loads(cw.registry_json([cw.registry_entry(
            base.key_file.read_text(), doc["signedMeta"].get("acx.publisher_id", PUBLISHER))]))
        checked.append(dataclasses.replace(base, signed_meta=doc["signedMeta"],
                                           registry=registry))
    return checked
