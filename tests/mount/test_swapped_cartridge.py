"""A cartridge swapped on disk after its check: the daemon keeps serving the file it checked.

Between `acxfs mount`'s check and the first read, the cartridge is renamed over, rewritten as
a new file at the same path, or replaced by an unchecked database whose `data` column is an
expensive generated column.  Every read through the live mount then gives the signed bytes or
EIO within a bound (never the swapped file's bytes, never a hang), and `acxfs umount` ends the
daemon (`mounted()` fails the test otherwise)."""

from __future__ import annotations

import errno
import os
import sqlite3
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from acxfs.errors import EnvironmentProblem
from acxfs.formats.acx import connection
from scripts import cartwriter as cw
from scripts import mounting
from tests.support.demo import PUBLISHER

READ_BOUND = 15.0  # seconds for one read of a swapped file, at most

FILES = {
    "rom/skills/swap-me/SKILL.md": b"---\nname: swap-me\ndescription: The signed one.\n---\n"
                                   b"# Signed\n",
    "rom/skills/swap-me/references/notes.md": b"signed notes\n" * 200,
    "rom/skills/swap-me/references/big.md": os.urandom(300_000).hex().encode(),
}
EVIL = {name: b"---\nname: swap-me\ndescription: EVIL.\n---\nunsigned " + name.encode()
        for name in FILES}


def _signed(tmp_path: Path, signer: cw.Signer) -> tuple[Path, Path]:
    cart = cw.build_cartridge(tmp_path / "cart.acx", FILES, signer=signer, publisher=PUBLISHER)
    key = tmp_path / "signer.pub.pem"
    key.write_text(signer.public_pem)
    return cart, key


def _evil_cartridge(path: Path, signer: cw.Signer) -> Path:
    """A cartridge signed by the same key whose files say something else."""
    return cw.build_cartridge(path, EVIL, signer=signer, publisher=PUBLISHER)


def _expensive(path: Path) -> Path:
    """A database that would take minutes of CPU to answer any read of `data`."""
    term = "length(replace(hex(zeroblob(200000)),'0','ab'))"
    inner = "max(" + ",".join([term] * 100) + ")"
    expensive = "max(" + ",".join([inner] * 100) + ")"
    conn = sqlite3.connect(path)
    conn.execute("PRAGMA application_id=1094932529")
    conn.execute("CREATE TABLE sqlar(name TEXT, mode INT, mtime INT, sz INT, data BLOB)")
    conn.executemany("INSERT INTO sqlar(rowid, name, mode, mtime, sz) VALUES (?, ?, 420, 0, 5)",
                     [(rowid, f"rom/{rowid}") for rowid in range(1, 64)])
    conn.commit()
    # The column becomes generated only now: SQLite would compute it for every insert.
    conn.execute("PRAGMA writable_schema=ON")
    conn.execute("UPDATE sqlite_master SET sql = ? WHERE name = 'sqlar'", (
        "CREATE TABLE sqlar(name TEXT, mode INT, mtime INT, sz INT, "
        f"data BLOB GENERATED ALWAYS AS (zeroblob({expensive})) VIRTUAL)",))
    conn.commit()
    conn.close()
    return path


def _rename_over(cart: Path, tmp_path: Path, signer: cw.Signer) -> None:
    os.rename(_evil_cartridge(tmp_path / "evil.acx", signer), cart)


def _rename_over_and_plant_deleted_name(cart: Path, tmp_path: Path, signer: cw.Signer) -> None:
    # /proc/self/fd/N of a file renamed over reads "NAME (deleted)": a path anyone who can
    # write the directory can fill with their own file.
    _rename_over(cart, tmp_path, signer)
    _evil_cartridge(Path(f"{cart} (deleted)"), signer)


def _replace_in_place(cart: Path, tmp_path: Path, signer: cw.Signer) -> None:
    cart.unlink()
    _evil_cartridge(cart, signer)


def _expensive_rename_over(cart: Path, tmp_path: Path, signer: cw.Signer) -> None:
    os.rename(_expensive(tmp_path / "slow.acx"), cart)
    _expensive(Path(f"{cart} (deleted)"))


def _expensive_in_place(cart: Path, tmp_path: Path, signer: cw.Signer) -> None:
    cart.unlink()
    _expensive(cart)


SWAPS: dict[str, Callable[[Path, Path, cw.Signer], None]] = {
    "rename_over": _rename_over,
    "rename_over_and_plant_deleted_name": _rename_over_and_plant_deleted_name,
    "replace_in_place": _replace_in_place,
    "expensive_generated_column_renamed_over": _expensive_rename_over,
    "expensive_generated_column_in_place": _expensive_in_place,
}


def _read(path: Path) -> bytes | int:
    try:
        return path.read_bytes()
    except OSError as exc:
        return exc.errno or -1


@pytest.mark.fuse
@pytest.mark.slow
@pytest.mark.parametrize("swap", sorted(SWAPS))
def test_a_cartridge_swapped_after_its_check_is_served_as_checked(
    swap: str, tmp_path: Path, signer: cw.Signer
) -> None:
    cart, key = _signed(tmp_path, signer)
    mnt = tmp_path / "mnt"
    with mounting.mounted(cart, mnt, "--trust-key", key) as live:
        SWAPS[swap](cart, tmp_path, signer)
        for name, signed_bytes in FILES.items():
            started = time.monotonic()
            got = _read(mnt / name)
            took = time.monotonic() - started
            assert took < READ_BOUND, f"{name}: a read took {took:.1f} s"
            # The daemon holds the checked file open: it reads that file, signed bytes only.
            assert got == signed_bytes, (
                f"{name}: {errno.errorcode.get(got, got) if isinstance(got, int) else got[:60]}")
        started = time.monotonic()
    # mounted() has run `acxfs umount` and waited for the daemon to exit
    assert not mounting.pid_alive(live.pid)
    assert time.monotonic() - started < 12.0


def _loop(path: Path) -> Path:
    """A database whose `sqlar` is a view that never ends."""
    conn = sqlite3.connect(path)
    conn.execute("CREATE VIEW sqlar AS WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL "
                 "SELECT x + 1 FROM c) SELECT x - x AS rowid, zeroblob(1) AS data FROM c")
    conn.close()
    return path


@pytest.mark.parametrize("build", [_expensive, _loop], ids=["generated_column", "endless_view"])
def test_a_serving_statement_on_an_unchecked_file_ends_within_its_bound(
    build: Callable[[Path], Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(connection, "STEP_SECONDS", 0.5)
    pool = connection.ConnectionPool(str(build(tmp_path / "hostile.acx")))
    try:
        started = time.monotonic()
        with pytest.raises((sqlite3.Error, EnvironmentProblem)), pool.connection() as conn:
            conn.execute("SELECT data FROM sqlar WHERE rowid = 1").fetchone()
        assert time.monotonic() - started < 3.0
    finally:
        pool.close()


def test_a_connection_on_another_file_than_the_pinned_one_is_refused(
    tmp_path: Path, signer: cw.Signer
) -> None:
    cart, _ = _signed(tmp_path, signer)
    pin = connection.PinnedFile(str(cart))
    try:
        _rename_over_and_plant_deleted_name(cart, tmp_path, signer)
        # SQLite resolves /proc/self/fd/N to "NAME (deleted)", the planted file: refused.
        with pytest.raises(sqlite3.Error, match="changed since it was checked"), \
                connection.pinned(pin):
            connection.connect_readonly(str(cart))
    finally:
        pin.close()
