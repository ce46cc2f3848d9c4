"""The mutators: each turns a copy of a valid signed cartridge into one kind of hostile variant.

Byte flips and truncation of the database file, row edits, deletions and injections, BLOBs
swapped between files of equal size, tables rebuilt without their primary key holding a
duplicated key, edited JSON in the envelope, the statement and the trust registry, edited
`objects` rows, huge sizes and deflate bombs, ROM rows renamed into `save/` and back, schema
tricks, header fields, signed and unsigned cartridge keys. Every decision comes from a
`Chooser`, so a mutant is replayed by its seed and index or shrunk by hypothesis. A mutator only
edits the copy; whether acxfs keeps its invariant on the result is `invariant.check_mutant`'s job.
"""

from __future__ import annotations

import json
import shutil
import sqlite3
from collections.abc import Sequence
from pathlib import Path

from scripts.hostile import mutate_rows, mutate_signed, mutate_tables
from scripts.hostile.bases import Base, Chooser
from scripts.hostile.mutant import REGISTERED, Mutant, Mutator

# The order is part of a mutant's identity: `choose_mutators` picks by position, so mutant INDEX
# of run SEED stays the same mutant only while this order does.
MUTATOR_NAMES: tuple[str, ...] = (
    "byte_flip", "truncate", "blob_bytes", "row_edit", "row_delete", "row_inject", "blob_swap",
    "dup_name", "envelope_json", "statement_json", "objects_edit", "huge_size", "zone_rename",
    "schema", "header", "meta_edit", "unsigned_fields", "registry",
)
_MODULES = (mutate_rows, mutate_signed, mutate_tables)  # importing them registers their mutators
MUTATORS: dict[str, Mutator] = {name: REGISTERED[name] for name in MUTATOR_NAMES}
if set(REGISTERED) != set(MUTATOR_NAMES):
    raise RuntimeError(f"mutators registered but not ordered: {set(REGISTERED) - set(MUTATORS)}")
# Mutations that leave the file a well-formed SQLite database (safe to stack before others).
_FILE_LEVEL = {"byte_flip", "truncate"}


def make_mutant(base: Base, workdir: Path, ch: Chooser, names: Sequence[str]) -> Mutant:
    """Copy `base` into `workdir` and apply the named mutators in order."""
    workdir.mkdir(parents=True, exist_ok=True)
    path = workdir / "mutant.acx"
    for stale in workdir.glob("mutant.acx*"):
        stale.unlink()
    shutil.copyfile(base.path, path)
    use_registry = base.registry is not None and ch.integer(0, 1) == 1
    if use_registry:
        reg = workdir / "registry.json"
        reg.write_text(json.dumps(base.registry), encoding="utf-8")
        trust = ["--registry", str(reg)]
    else:
        trust = ["--trust-key", str(base.key_file)]
    mutant = Mutant(base, path, workdir, trust)
    ordered = sorted(names, key=lambda n: n in _FILE_LEVEL)  # file-level damage goes last
    for name in ordered:
        try:
            mutant.steps.append(MUTATORS[name](mutant, ch))
        except (sqlite3.Error, ValueError, KeyError, IndexError, TypeError, AttributeError) as exc:
            # an earlier step left nothing this one can edit (unreadable file, odd JSON)
            mutant.steps.append(f"{name}: skipped ({type(exc).__name__}: {exc})"[:200])
    return mutant


def choose_mutators(ch: Chooser) -> list[str]:
    count = ch.choice([1, 1, 1, 2, 3])
    return [ch.choice(MUTATOR_NAMES) for _ in range(count)]
