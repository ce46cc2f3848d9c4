"""What the last checks of the sources found (`checks.json`): per source, when it was last
checked successfully, its last failure and when to ask it again; per installed identity,
the release that waits for it and why an automatic update of it was not applied.

Invariant: these are observations, never decisions: nothing here makes acxfs serve, link or
trust anything (that is `library.json`, changed only through the journal).  The record is
written whole (synced, renamed) under the library's lock and read back as untrusted input;
one that cannot be read is an empty record (every source due for a check), never an error,
so a damaged file costs one round of checks and nothing installed.
"""

from __future__ import annotations

import datetime as dt
import json
from dataclasses import asdict, dataclass, field
from pathlib import Path

from acxfs.errors import AcxfsError
from acxfs.library.store.state import write_private
from acxfs.safe import own_files
from acxfs.safe.own_files import Field, integer, map_of, optional, text

SCHEMA = "acxfs.checks/1"
MAX_FAILURES = 5  # failures in a row are counted up to this (where the backoff stops growing)
MAX_BYTES = 4 * 1024 * 1024
MAX_DEPTH = 6


@dataclass
class SourceCheck:
    """One source as the checks found it."""

    checked_at: str | None = None  # the last successful check (ISO 8601 UTC)
    attempted_at: str | None = None  # the last check, successful or not
    error: str | None = None  # the last failure in one line, None once a check succeeds
    failures: int = 0  # failed checks in a row, at most MAX_FAILURES
    not_before: str | None = None  # no scheduled check before this (backoff, Retry-After)

    def failed_again(self, stamp: str, error: str) -> SourceCheck:
        """This source after one more failed check at `stamp` (its backoff not yet set)."""
        return SourceCheck(self.checked_at, stamp, error,
                           min(self.failures + 1, MAX_FAILURES), None)


@dataclass
class BundleCheck:
    """One installed identity as the last check of its source found it."""

    update_available: str | None = None  # the version `acxfs update` would install
    error: str | None = None  # why that update was not applied (auto), or its source's


@dataclass
class Checks:
    sources: dict[str, SourceCheck] = field(default_factory=dict)  # by normalised source
    bundles: dict[str, BundleCheck] = field(default_factory=dict)  # by identity
    last_round: str | None = None  # when the last round of checks began

    def to_json(self) -> str:
        doc = {"schema": SCHEMA, "lastRound": self.last_round,
               "sources": {k: asdict(v) for k, v in sorted(self.sources.items())},
               "bundles": {k: asdict(v) for k, v in sorted(self.bundles.items())}}
        return json.dumps(doc, indent=2, sort_keys=True) + "\n"


def _schema(value: str) -> str | None:
    return None if value == SCHEMA else f"not {SCHEMA}"


def _instant(value: str) -> str | None:
    try:
        parse_time(value)
    except ValueError:
        return "not an ISO 8601 UTC time"
    return None


def _failures(value: object, where: str) -> int:
    """A stored count of failures, taken as within 0..MAX_FAILURES whatever the file says."""
    return min(max(integer(value, where), 0), MAX_FAILURES)


def _any_key(value: str) -> str | None:
    return None


def _table() -> own_files.Table[Checks]:
    when = optional(text(_instant))
    source = own_files.Table(SourceCheck, {
        "checked_at": Field(when), "attempted_at": Field(when),
        "error": Field(optional(text())), "failures": Field(_failures),
        "not_before": Field(when),
    })
    bundle = own_files.Table(BundleCheck, {
        "update_available": Field(optional(text())), "error": Field(optional(text())),
    })
    return own_files.Table(Checks, {
        "schema": Field(text(_schema), attr=None),
        "lastRound": Field(when, attr="last_round"),
        "sources": Field(map_of(_any_key, source)),
        "bundles": Field(map_of(_any_key, bundle)),
    })


def load_checks(path: Path) -> Checks:
    """The record at `path` (an empty one when it is missing or cannot be read)."""
    try:
        found = own_files.read_record(path, _table(), max_bytes=MAX_BYTES, max_depth=MAX_DEPTH)
    except (AcxfsError, OSError):
        return Checks()
    return found if found is not None else Checks()


def save_checks(path: Path, checks: Checks) -> None:
    write_private(path, checks.to_json())


def time_text(when: dt.datetime) -> str:
    return when.astimezone(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def parse_time(text_: str) -> dt.datetime:
    when = dt.datetime.strptime(text_, "%Y-%m-%dT%H:%M:%SZ")
    return when.replace(tzinfo=dt.UTC)
