"""Hostile inputs for acxfs: mutated signed cartridges, the invariant they must keep, the
reproducers of the bugs fuzzing found, and load on a live mount.

The invariant (`invariant`): whatever a mutant holds, `verify`, `verify --deep` and `inspect`
end with a verdict line and an allowed exit code, never a traceback, a hang or a control
character from the file; what acxfs accepts it serves as exactly the signed bytes or not at
all. The suite drives the mutators with hypothesis (`tests/test_fuzz.py`); the long run is
`python -m scripts.fuzz`, the load run `python -m scripts.stress` (`load`).

Modules: `bases` (valid signed cartridges and choosers), `mutant` (a mutant, the registry, the
shared random edits), `mutate_rows`, `mutate_signed`, `mutate_tables` (the mutators),
`mutators` (their fixed order, `make_mutant`), `running` (the CLI in-process), `invariant`,
`repro` (fixed bugs), `pool` (worker processes of the long run), `load` (readers on a live
mount).
"""

from __future__ import annotations

from scripts.hostile.bases import Base, Chooser, RandomChooser, build_bases, chooser_for
from scripts.hostile.invariant import Result, check_mount, check_mutant
from scripts.hostile.mutant import Mutant
from scripts.hostile.mutators import MUTATOR_NAMES, MUTATORS, choose_mutators, make_mutant
from scripts.hostile.repro import (
    FIXED_BUGS,
    FixedBug,
    classify,
    regressed_bugs,
    repro_blob_read_error,
    repro_duplicate_meta,
    repro_registry_unhashable,
    repro_schema_name_not_utf8,
    repro_spill_oserror,
    repro_unsafe_name_in_verdict,
    repro_untrusted_text_printed,
    unknown_violations,
)
from scripts.hostile.running import Run, run_main

__all__ = [
    "FIXED_BUGS",
    "MUTATORS",
    "MUTATOR_NAMES",
    "Base",
    "Chooser",
    "FixedBug",
    "Mutant",
    "RandomChooser",
    "Result",
    "Run",
    "build_bases",
    "check_mount",
    "check_mutant",
    "choose_mutators",
    "chooser_for",
    "classify",
    "make_mutant",
    "regressed_bugs",
    "repro_blob_read_error",
    "repro_duplicate_meta",
    "repro_registry_unhashable",
    "repro_schema_name_not_utf8",
    "repro_spill_oserror",
    "repro_unsafe_name_in_verdict",
    "repro_untrusted_text_printed",
    "run_main",
    "unknown_violations",
]
