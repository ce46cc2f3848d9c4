"""Mutation fuzzing, bounded for CI: hostile variants of signed cartridges keep the invariant.

The mutators, the invariant and the known-bug reproducers live in `scripts.hostile` (the
long run is `python -m scripts.fuzz`); here hypothesis drives the same mutators (a few hundred
examples in all, shrinkable), and the attacks that matter most are spelled out as named tests.
The invariant, for every mutant:
`verify` and `verify --deep` end with a verdict line and an exit code in {0, 3, 4, 5, 6} (2 only
for an unusable mutated registry), never a traceback or a hang; when `verify` accepts, `cat` of
every file prints exactly the signed bytes or fails with exit 5 and prints nothing; `inspect`
shows as signed only the signed facts; a mount serves the signed bytes or EIO.

The bugs fuzzing found are fixed and their reproducers below must stay harmless; every fuzz
hit counts.
"""

from __future__ import annotations

import contextlib
import json
import signal
import sqlite3
import subprocess
import sys
import tempfile
import zlib
from collections.abc import Iterator, Sequence
from pathlib import Path
from types import FrameType
from typing import Any, TypeVar, cast

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from scripts import hostile

REPO = Path(__file__).resolve().parent.parent
T = TypeVar("T")


EXAMPLES_PER_MUTATOR = 15  # x 18 mutators + 40 stacked: about 310 mutants in the suite
EXAMPLE_TIMEOUT = 60  # seconds: a mutant that takes longer is a hang


class HypothesisChooser:
    """The mutators' decisions drawn by hypothesis, so a failing mutant shrinks."""

    def __init__(self, data: st.DataObject) -> None:
        self.data = data

    def integer(self, lo: int, hi: int) -> int:
        return self.data.draw(st.integers(lo, hi))

    def choice(self, items: Sequence[T]) -> T:
        return self.data.draw(st.sampled_from(list(items)))

    def blob(self, lo: int, hi: int) -> bytes:
        return self.data.draw(st.binary(min_size=lo, max_size=hi))


@pytest.fixture(scope="module")
def bases(tmp_path_factory: pytest.TempPathFactory) -> list[Any]:
    """The valid signed cartridges mutants start from (writer-made and the real fixtures)."""
    root = tmp_path_factory.mktemp("fuzz-bases")
    with pytest.MonkeyPatch.context() as patch:  # module scope: isolate the trust store here
        patch.setenv("ACXFS_TRUST_DIR", str(root / "trust"))
        patch.setenv("XDG_STATE_HOME", str(root / "state"))
        return cast(list[Any], hostile.build_bases(root / "bases"))


@pytest.fixture(scope="module")
def live_bugs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    root = tmp_path_factory.mktemp("fuzz-repro")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("ACXFS_TRUST_DIR", str(root / "trust"))
        patch.setenv("XDG_STATE_HOME", str(root / "state"))
        return cast(dict[str, Any], hostile.regressed_bugs(root))


@contextlib.contextmanager
def time_limit(seconds: int) -> Iterator[None]:
    """Turn a hang into a TimeoutError (caught by run_main and reported as a violation)."""

    def expire(signum: int, frame: FrameType | None) -> None:
        raise TimeoutError(f"no result after {seconds} s: a hang")

    previous = signal.signal(signal.SIGALRM, expire)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


def check(bases: list[Any], live_bugs: dict[str, Any], ch: Any, names: Sequence[str]) -> Any:
    with tempfile.TemporaryDirectory(prefix="mutant-") as scratch:
        base = ch.choice(bases)
        mutant = hostile.make_mutant(base, Path(scratch), ch, names)
        with time_limit(EXAMPLE_TIMEOUT):
            result = hostile.check_mutant(mutant)
    hostile.classify(result, live_bugs)
    unknown = hostile.unknown_violations(result)
    tb = next((v for v in result.violations if v.startswith("TRACEBACK ")), "")
    assert not unknown, f"{result.steps}: {unknown}\n{tb}"
    return result


FUZZ_SETTINGS = settings(
    max_examples=EXAMPLES_PER_MUTATOR, deadline=None, database=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow,
                           HealthCheck.data_too_large],
)


@pytest.mark.parametrize("mutator", hostile.MUTATOR_NAMES)
@FUZZ_SETTINGS
@given(data=st.data())
def test_single_mutation_keeps_the_invariant(
    bases: list[Any], live_bugs: dict[str, Any], mutator: str, data: st.DataObject
) -> None:
    check(bases, live_bugs, HypothesisChooser(data), [mutator])


@settings(FUZZ_SETTINGS, max_examples=40)
@given(data=st.data())
def test_stacked_mutations_keep_the_invariant(
    bases: list[Any], live_bugs: dict[str, Any], data: st.DataObject
) -> None:
    ch = HypothesisChooser(data)
    names = [ch.choice(hostile.MUTATOR_NAMES) for _ in range(ch.integer(2, 3))]
    check(bases, live_bugs, ch, names)


# --- named attacks (deterministic) -----------------------------------------------------------


class Fixed:
    """A chooser that answers from a script: each call takes the next value that fits."""

    def __init__(self, *answers: Any) -> None:
        self.answers = list(answers)

    def _next(self) -> Any:
        return self.answers.pop(0) if self.answers else 0

    def integer(self, lo: int, hi: int) -> int:
        value = self._next()
        return value if isinstance(value, int) and lo <= value <= hi else lo

    def choice(self, items: Sequence[T]) -> T:
        value = self._next()
        if value in items:
            return cast(T, value)
        return items[value] if isinstance(value, int) and 0 <= value < len(items) else items[0]

    def blob(self, lo: int, hi: int) -> bytes:
        return b"\x00" * lo


def _writer_base(bases: list[Any], name: str = "writer-raw") -> Any:
    return next(b for b in bases if b.name == name)


def _mutant(bases: list[Any], tmp_path: Path, edit: Any, base: str = "writer-raw") -> Any:
    """A trusted (--trust-key) copy of a writer base, edited by `edit(conn)`."""
    chosen = _writer_base(bases, base)
    mutant = hostile.make_mutant(chosen, tmp_path / "m", Fixed(0), [])
    with contextlib.closing(sqlite3.connect(mutant.path)) as conn:
        edit(conn)
        conn.commit()
    return mutant


def swap_equal_size_blobs(conn: sqlite3.Connection) -> None:
    a = conn.execute("SELECT data FROM sqlar WHERE name='rom/data/eq-a.txt'").fetchone()[0]
    b = conn.execute("SELECT data FROM sqlar WHERE name='rom/data/eq-b.txt'").fetchone()[0]
    conn.execute("UPDATE sqlar SET data=? WHERE name='rom/data/eq-a.txt'", (b,))
    conn.execute("UPDATE sqlar SET data=? WHERE name='rom/data/eq-b.txt'", (a,))


def deflate_bomb(conn: sqlite3.Connection) -> None:
    """64 MiB of zeros in ~64 KB of raw DEFLATE, in place of a 230 KB file (sz unchanged)."""
    packer = zlib.compressobj(9, zlib.DEFLATED, -15)
    bomb = b"".join(packer.compress(bytes(1 << 20)) for _ in range(64)) + packer.flush()
    conn.execute("UPDATE sqlar SET data=? WHERE name='rom/data/big.txt'", (bomb,))


def edit_content_keep_oid(conn: sqlite3.Connection) -> None:
    conn.execute("UPDATE sqlar SET data=CAST(replace(CAST(data AS TEXT), 'Step', 'Stop') AS "
                 "BLOB) WHERE name='rom/skills/demo-skill/references/guide.md'")


def edit_unsigned_mtime_and_mode(conn: sqlite3.Connection) -> None:
    conn.execute("UPDATE sqlar SET mtime=9223372036854775807, mode=33261 "
                 "WHERE name LIKE 'rom/%' AND (mode & 16384) = 0")


def test_swapped_equal_size_blobs_are_never_served(bases: list[Any], tmp_path: Path) -> None:
    result = hostile.check_mutant(_mutant(bases, tmp_path, swap_equal_size_blobs))
    assert not result.violations
    assert (result.shallow, result.deep) == (0, 5)  # sizes match the manifest; digests do not
    assert result.reads_failed == 2  # exactly the two swapped files fail, exit 5, no bytes


def test_deflate_bomb_stops_at_the_signed_size(bases: list[Any], tmp_path: Path) -> None:
    result = hostile.check_mutant(_mutant(bases, tmp_path, deflate_bomb))
    assert not result.violations
    assert (result.shallow, result.deep, result.reads_failed) == (0, 5, 1)


def test_content_edited_with_stale_oid_fails_that_file_only(
    bases: list[Any], tmp_path: Path
) -> None:
    result = hostile.check_mutant(_mutant(bases, tmp_path, edit_content_keep_oid, "writer-stored"))
    assert not result.violations
    assert (result.shallow, result.deep, result.reads_failed) == (0, 5, 1)


def test_rom_row_renamed_into_save_is_refused(bases: list[Any], tmp_path: Path) -> None:
    def rename(conn: sqlite3.Connection) -> None:
        conn.execute("UPDATE sqlar SET name='save/knowledge/NOTES.md' "
                     "WHERE name='rom/knowledge/NOTES.md'")

    result = hostile.check_mutant(_mutant(bases, tmp_path, rename))
    assert not result.violations
    assert result.shallow == result.deep == 5
    assert "rom/knowledge/NOTES.md is in the signed manifest but not in the ROM" in result.verdict


def test_save_row_renamed_into_rom_is_refused(bases: list[Any], tmp_path: Path) -> None:
    def rename(conn: sqlite3.Connection) -> None:
        conn.execute("UPDATE sqlar SET name='rom/state.json' WHERE name='save/state.json'")

    result = hostile.check_mutant(_mutant(bases, tmp_path, rename))
    assert not result.violations
    assert result.shallow == 5 and "rom/state.json is not covered" in result.verdict


def test_equivalent_reencoding_is_still_served(bases: list[Any], tmp_path: Path) -> None:
    """zlib, raw DEFLATE and stored rows of the same bytes are the same signed file."""
    from scripts import cartwriter as cw

    def recompress(conn: sqlite3.Connection) -> None:
        for name, sz, data, codec in [
            (*conn.execute("SELECT name, sz, data FROM sqlar WHERE name=?", (n,)).fetchone(), c)
            for n, c in [("rom/data/big.txt", "zlib"), ("rom/knowledge/NOTES.md", "none")]
        ]:
            conn.execute("UPDATE sqlar SET data=? WHERE name=?",
                         (cw.compress(cw.inflate(data, sz), codec), name))

    result = hostile.check_mutant(_mutant(bases, tmp_path, recompress))
    assert not result.violations and not result.inconsistencies
    assert (result.shallow, result.deep, result.reads_failed) == (0, 0, 0)


def test_unsigned_mtime_and_mode_never_change_the_bytes(bases: list[Any], tmp_path: Path) -> None:
    result = hostile.check_mutant(_mutant(bases, tmp_path, edit_unsigned_mtime_and_mode))
    assert not result.violations
    assert (result.shallow, result.deep, result.reads_failed) == (0, 0, 0)


def test_url_safe_unpadded_payload_still_verifies(bases: list[Any], tmp_path: Path) -> None:
    import base64

    def reencode(conn: sqlite3.Connection) -> None:
        (text,) = conn.execute("SELECT envelope FROM signatures").fetchone()
        env = json.loads(text)
        body = base64.b64decode(env["payload"])
        env["payload"] = base64.urlsafe_b64encode(body).decode().rstrip("=")
        conn.execute("UPDATE signatures SET envelope=?", (json.dumps(env),))

    result = hostile.check_mutant(_mutant(bases, tmp_path, reencode))
    assert not result.violations and result.deep == 0


def test_statement_edited_and_signed_by_attacker_claiming_the_signer_keyid(
    bases: list[Any], tmp_path: Path
) -> None:
    mutant = hostile.make_mutant(_writer_base(bases), tmp_path / "m", Fixed(0), [])
    hostile.MUTATORS["statement_json"](mutant, Fixed("publisher", "io.github.attacker",
                                                  "attacker-claims-signer"))
    result = hostile.check_mutant(mutant)
    assert not result.violations
    assert result.shallow == 5 and "DSSE verification failed" in result.verdict


def test_cartridge_table_view_is_malformed(bases: list[Any], tmp_path: Path) -> None:
    def view(conn: sqlite3.Connection) -> None:
        conn.executescript("ALTER TABLE sqlar RENAME TO sqlar_real;"
                           "CREATE VIEW sqlar AS SELECT * FROM sqlar_real;")

    result = hostile.check_mutant(_mutant(bases, tmp_path, view))
    assert not result.violations and result.shallow == 6


# --- acxfs bugs found by fuzzing, fixed: their reproducers must stay harmless ------------------


def test_blob_read_error_is_a_verdict_not_a_traceback(tmp_path: Path) -> None:
    assert not hostile.repro_blob_read_error(tmp_path)


def test_duplicated_cartridge_key_is_not_shown_as_signed(tmp_path: Path) -> None:
    assert not hostile.repro_duplicate_meta(tmp_path)


def test_registry_with_list_status_is_an_unusable_registry(tmp_path: Path) -> None:
    assert not hostile.repro_registry_unhashable(tmp_path)


def test_unverified_keyid_is_printed_safely(tmp_path: Path) -> None:
    assert not hostile.repro_untrusted_text_printed(tmp_path)


def test_unsafe_name_is_not_printed_raw(tmp_path: Path) -> None:
    assert not hostile.repro_unsafe_name_in_verdict(tmp_path)


def test_schema_name_not_utf8_is_malformed_not_a_traceback(tmp_path: Path) -> None:
    assert not hostile.repro_schema_name_not_utf8(tmp_path)


def test_spill_failure_is_an_error_line_not_a_traceback(tmp_path: Path) -> None:
    assert not hostile.repro_spill_oserror(tmp_path)


# --- mounting accepted mutants ---------------------------------------------------------------


MOUNTED_ATTACKS = {  # name: (edit, base, files whose read must fail with EIO)
    "content edited, oid stale": (edit_content_keep_oid, "writer-stored", 1),
    "equal-size BLOBs swapped": (swap_equal_size_blobs, "writer-raw", 2),
    "deflate bomb": (deflate_bomb, "writer-raw", 1),
    "unsigned mtime and mode": (edit_unsigned_mtime_and_mode, "writer-zlib-dirs", 0),
}


@pytest.mark.fuse
@pytest.mark.slow
@pytest.mark.parametrize("attack", sorted(MOUNTED_ATTACKS))
def test_accepted_mutant_mount_serves_signed_bytes_or_eio(
    bases: list[Any], tmp_path: Path, attack: str
) -> None:
    edit, base_name, expected_eio = MOUNTED_ATTACKS[attack]
    mutant = _mutant(bases, tmp_path, edit, base_name)
    base = _writer_base(bases, base_name)
    problems, reads = hostile.check_mount(mutant.path, base, mutant.trust_args, tmp_path / "mnt")
    assert problems == []
    assert reads["EIO"] == expected_eio
    assert reads["signed bytes"] == len(base.rom) - expected_eio


# --- the long-run script itself --------------------------------------------------------------


@pytest.mark.slow  # the long-run script, in a child
def test_fuzz_script_runs_and_summarises(tmp_path: Path) -> None:
    out = tmp_path / "summary.json"
    done = subprocess.run(
        [sys.executable, "-m", "scripts.fuzz", "--count", "24", "--seed", "3",
         "--workers", "2", "--mount-sample", "0", "--no-real",
         "--json", str(out), "--workdir", str(tmp_path)],
        capture_output=True, text=True, timeout=300, check=False, cwd=REPO,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    summary = json.loads(out.read_text())
    assert summary["count"] == 24
    assert sum(summary["outcomes"].values()) == 24
    assert summary["violations_unknown"] == 0
    assert "mutants in" in done.stdout
