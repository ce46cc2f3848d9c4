"""What a source said is merged into the library's memory of it, never written over it: two
commands that read one source from the same state (a refresh round and an `add`) and record
one after the other, in either order, leave every pulled release and coordinate either of
them learned, and the newest index and ledger times of both.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass

import pytest

from acxfs.library.store.state import LibraryState
from acxfs.library.updates.remote import Options, Sources
from acxfs.sources.memory import SourceMemory
from acxfs.sources.release import Lifecycle, Release
from acxfs.sources.spec import SourceSpec, parse_source

SOURCE = "https://registry.example.org/"
T1, T2, T3 = "2026-11-20T00:00:00Z", "2026-11-21T00:00:00Z", "2026-11-22T00:00:00Z"
SEEN = "2026-12-01T00:00:00Z"
WITHDRAWN = Lifecycle("withdrawn", T1, "leaks credentials")


@dataclass
class Read:
    """A client whose reading of the source is over: its memory as it grew."""

    spec: SourceSpec
    memory: SourceMemory

    def load(self, allow_stale: bool) -> None:
        pass

    def release(self, name: str, version: str | None) -> Release:
        raise AssertionError("nothing is asked of the source here")

    def remember(self, names: set[str], now: str) -> None:
        pass

    def status_of(self, name: str, version: str) -> Lifecycle | None:
        return None


def reader(state: LibraryState, generated: str, pulled: list[str],
           coordinates: dict[str, str] | None = None, updated: str | None = None) -> Sources:
    """A command that loaded the source's memory from `state`, then learned the rest."""
    spec = parse_source(SOURCE)
    memory = SourceMemory.from_doc(state.sources[spec.key].to_doc())
    memory.coordinates.update(coordinates or {})
    for coordinate in pulled:
        memory.remember_pulled(coordinate, WITHDRAWN)
    memory.accept_time("generated", generated, SEEN)
    if updated is not None:
        memory.accept_time("updated", updated, SEEN)
    return Sources(Options(), state, clients={spec.key: Read(spec, memory)})


def recorded(state: LibraryState, command: Sources) -> LibraryState:
    """The state after `command`'s change, worked out from `state` (read under the lock)."""
    after = copy.deepcopy(state)
    command.record(after, {})
    return after


@pytest.mark.parametrize("refresh_first", [True, False])
def test_two_commands_that_read_one_source_both_keep_what_they_learned(
        refresh_first: bool) -> None:
    key = parse_source(SOURCE).key
    start = LibraryState("/trust", sources={key: SourceMemory(
        generated_at=T1, generated_seen=SEEN, coordinates={"a/x 1.0.0": "sha256:" + "1" * 64},
        pulled={"a/x 0.9.0": WITHDRAWN})})
    refresh = reader(start, T2, ["a/x 1.0.0"])
    add = reader(start, T3, ["a/y 2.0.0"], {"a/y 2.0.0": "sha256:" + "2" * 64}, updated=T2)
    first, second = (refresh, add) if refresh_first else (add, refresh)
    memory = recorded(recorded(start, first), second).sources[key]
    assert set(memory.pulled) == {"a/x 0.9.0", "a/x 1.0.0", "a/y 2.0.0"}
    assert set(memory.coordinates) == {"a/x 1.0.0", "a/y 2.0.0"}
    assert (memory.generated_at, memory.updated_at) == (T3, T2)


def test_a_coordinate_or_withdrawal_recorded_first_is_kept_as_it_was() -> None:
    held = SourceMemory(generated_at=T2, generated_seen=SEEN,
                        coordinates={"a/x 1.0.0": "sha256:" + "1" * 64},
                        pulled={"a/x 1.0.0": WITHDRAWN})
    learned = SourceMemory(generated_at=T1, generated_seen=SEEN,
                           coordinates={"a/x 1.0.0": "sha256:" + "9" * 64},
                           pulled={"a/x 1.0.0": Lifecycle("yanked", T1, "other")})
    merged = held.merged(learned)
    assert merged.to_doc() == held.to_doc()
