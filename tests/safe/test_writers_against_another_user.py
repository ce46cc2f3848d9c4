"""`extract` and `pack`, run as root into a directory another user can write, never write,
chmod or read through a link that user swaps in between acxfs's steps.

The attacker (a child process running as `nobody`) acts at a step both the old path-based
writers and the descriptor-based ones go through: between two files of an extract (the
source's `blob`), and between making a cartridge's temporary file and filling it (pack's
`_compress`).  A pack input flipping between a regular file and a link to a secret is raced
by a `nobody` process for a bounded number of packs.
"""

from __future__ import annotations

import contextlib
import os
import signal
import stat
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from acxfs import formats
from acxfs.content.cache import process_cache
from acxfs.errors import EnvironmentProblem, PackError
from acxfs.formats.acx import pack as packer
from acxfs.safe import _ops as safe_ops
from acxfs.safe import dirs as safe_dirs
from acxfs.signing.keys import PrivateKey
from acxfs.trust.store import load_trust
from acxfs.views.extract import extract
from tests.support import attacker
from tests.support.attacker import NOBODY, SECRET, as_nobody, drop_to_nobody

PUBLISHER = "io.github.example"

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="the attacks need root and nobody")


def assert_secret_untouched(secret: Path) -> None:
    attacker.assert_secret_untouched(secret)
    assert stat.S_IMODE(os.stat(secret).st_mode) == 0o700


def swap_for_link(directory: Path, target: Path) -> Callable[[], None]:
    """The attacker's move: every root-owned `.acxfs*` entry of `directory` moved aside and
    replaced by a link to `target`."""

    def move() -> None:
        for name in os.listdir(directory):
            path = directory / name
            if name.startswith(".acxfs") and os.lstat(path).st_uid == 0:
                os.rename(path, directory / f"moved-{name}")
                os.symlink(target, path)

    return move


def test_extract_never_writes_through_a_staging_directory_swapped_for_a_link(
    make_cartridge: Callable[..., Path], trusted_registry: Path, shared: Path, secret: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    source, _ = formats.open_source(str(make_cartridge()), load_trust([str(trusted_registry)]),
                                    process_cache())
    real_blob = type(source).blob
    calls = [0]

    def blob(self: Any, entry: Any) -> Any:  # between two files: the attacker moves
        calls[0] += 1
        if calls[0] == 2:
            as_nobody(swap_for_link(shared, secret))
        return real_blob(self, entry)

    monkeypatch.setattr(type(source), "blob", blob)
    dest = shared / "out"
    try:
        with pytest.raises(EnvironmentProblem):
            extract(source, dest)
    finally:
        source.close()
    assert calls[0] >= 2, "the attack never ran"
    assert_secret_untouched(secret)
    assert not dest.exists() and not dest.is_symlink()


def test_extract_of_a_skill_writes_only_its_own_new_directory(
    make_cartridge: Callable[..., Path], trusted_registry: Path, shared: Path,
) -> None:
    source, _ = formats.open_source(str(make_cartridge()), load_trust([str(trusted_registry)]),
                                    process_cache())
    try:
        assert extract(source, shared / "skill", "rom/skills/demo-skill") == 3
    finally:
        source.close()
    assert sorted(os.listdir(shared)) == ["skill"]
    modes = {p.relative_to(shared).as_posix(): stat.S_IMODE(p.stat().st_mode)
             for p in [shared / "skill", *(shared / "skill").rglob("*")]}
    mask = os.umask(0)
    os.umask(mask)
    assert modes["skill"] == 0o755 & ~mask
    assert modes["skill/SKILL.md"] == 0o644 & ~mask
    assert set(modes.values()) <= {0o755 & ~mask, 0o644 & ~mask}, modes


def _skill(base: Path, name: str = "race-skill") -> Path:
    skill = base / name
    (skill / "references").mkdir(parents=True)
    (skill / "SKILL.md").write_text(f"---\nname: {name}\ndescription: A skill raced by "
                                    "another user.\n---\n\n# Race\n", encoding="utf-8")
    (skill / "references" / "notes.md").write_text("notes\n", encoding="utf-8")
    return skill


def test_pack_never_writes_through_a_temporary_file_swapped_for_a_link(
    tmp_path: Path, shared: Path, secret: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    skill = _skill(tmp_path)
    real_compress = packer._compress
    calls = [0]

    def compress(data: bytes, how: packer.Deflate) -> bytes:  # after the temporary file exists
        calls[0] += 1
        if calls[0] == 1:
            as_nobody(swap_for_link(shared, secret / "victim"))
        return real_compress(data, how)

    monkeypatch.setattr(packer, "_compress", compress)
    output = shared / "x.acx"
    with pytest.raises(EnvironmentProblem):
        packer.pack([skill], output, PUBLISHER, PrivateKey.generate())
    assert calls[0] >= 1, "the attack never ran"
    assert_secret_untouched(secret)
    assert not output.exists() and not output.is_symlink()


def test_pack_output_is_made_with_its_mode_in_a_shared_directory(tmp_path: Path,
                                                                 shared: Path) -> None:
    packer.pack([_skill(tmp_path)], shared / "x.acx", PUBLISHER, PrivateKey.generate())
    mask = os.umask(0)
    os.umask(mask)
    st = os.lstat(shared / "x.acx")
    assert stat.S_ISREG(st.st_mode) and stat.S_IMODE(st.st_mode) == 0o644 & ~mask
    assert sorted(os.listdir(shared)) == ["x.acx"]


def test_a_pack_input_flipping_to_a_link_never_gets_the_secret_signed(
    tmp_path: Path, shared: Path, secret: Path,
) -> None:
    skill = _skill(shared)
    os.chmod(skill / "references", 0o777)  # the attacker's own directory of the skill
    flip = skill / "references" / "flip.md"
    flip.write_bytes(b"harmless\n")
    os.chown(flip, NOBODY, NOBODY)
    spare = shared / "attacker"  # the attacker's own directory, on the same filesystem
    spare.mkdir()
    os.chown(spare, NOBODY, NOBODY)
    link = spare / "l"
    os.symlink(secret / "victim", link)
    os.lchown(link, NOBODY, NOBODY)
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the attacker: regular file, link, regular file, ...
        try:
            drop_to_nobody()
            while True:  # each exchange swaps the two names atomically
                with contextlib.suppress(OSError):
                    safe_ops._renameat2(-100, str(link), -100, str(flip),
                                         safe_dirs.RENAME_EXCHANGE)
        finally:
            os._exit(0)
    leaked = refused = packed = 0
    try:
        for _ in range(3000):  # a path-based reader leaks about once in 400 packs here
            try:
                files = packer.collect_skill(skill)
            except (PackError, EnvironmentProblem) as exc:  # a link, or gone for an instant
                assert "not a regular file" in str(exc) or "cannot read" in str(exc), exc
                refused += 1
                continue
            packed += 1
            if any(SECRET in f.data for f in files):
                leaked += 1
                break
    finally:
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
    assert leaked == 0, f"the secret was read {leaked} times in {packed} packs"
    assert refused > 0 and packed > 0, (refused, packed)  # the race really ran both ways
