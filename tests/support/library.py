"""The skills library as its tests see it: where it lives in the test's HOME, the real `acxfs`
command's answers, and the library taken down after a test.

Invariant: every path here is computed from ``$HOME`` at the moment of the call (conftest's
isolated HOME of the running test), never cached; `stop_library` runs `acxfs down` unless no
process of this HOME and no acxfs mount below it is left to stop, then detaches any acxfs
mount still under HOME and fails the test if there was one; `ok` and
`listing` fail the test on a non-zero exit and show the command, its stdout and its stderr;
`linked_description` reads a skill's SKILL.md through the link an agent would follow.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import yaml

from scripts.liveness import processes_with_env
from scripts.mounting import acxfs, acxfs_mounts_under, force_cleanup
from tests.support.demo import PUBLISHER


def home() -> Path:
    """The test's HOME, where the library and the agents' skill directories are."""
    return Path(os.environ["HOME"])


def data_dir() -> Path:
    """The library's own state: ``$HOME/.local/share/acxfs``."""
    return home() / ".local" / "share" / "acxfs"


def agent_dirs() -> tuple[Path, Path]:
    """The skill directories the library links into: Codex's, then Claude Code's."""
    return home() / ".agents" / "skills", home() / ".claude" / "skills"


def ok(result: subprocess.CompletedProcess[str]) -> str:
    """The stdout of a command that must have succeeded."""
    assert result.returncode == 0, (result.args, result.stdout, result.stderr)
    return result.stdout


def listing() -> dict[str, Any]:
    """`acxfs list --json`, parsed."""
    doc = json.loads(ok(acxfs("list", "--json")))
    assert isinstance(doc, dict)
    return doc


def library_may_run(of_home: Path) -> bool:
    """Whether `acxfs down` has anything to stop for `of_home`: a process started with it as
    HOME (a daemon, found by its socket, is one), or an acxfs mount below it (a daemon's
    stale mount, or one that lost its socket)."""
    return bool(acxfs_mounts_under(of_home) or processes_with_env("HOME", of_home))


def stop_library() -> None:
    """Stop the library daemon (`acxfs down`, when there may be one: `library_may_run`); fail
    if a mount outlives it (after detaching it)."""
    if library_may_run(home()):
        acxfs("down")
    left = acxfs_mounts_under(home())
    for mountpoint in left:
        force_cleanup(mountpoint)
    assert not left, f"library mounts left behind: {left}"


def pack(skill: Path, out: Path, *, version: str = "1.0.0", epoch: int | None = None) -> Path:
    """`acxfs pack` of one skill directory with the local key (PUBLISHER); ``epoch``:
    SOURCE_DATE_EPOCH (the mtime every file of the cartridge gets)."""
    env = dict(os.environ)
    if epoch is not None:
        env["SOURCE_DATE_EPOCH"] = str(epoch)
    ok(acxfs("pack", skill, "-o", out, "--publisher", PUBLISHER, "--version", version,
             env=env))
    return out


def frontmatter(text: str) -> dict[str, Any]:
    """The YAML frontmatter of a SKILL.md."""
    head, sep, _ = text.removeprefix("---\n").partition("\n---")
    assert text.startswith("---\n") and sep, text[:200]
    loaded = yaml.safe_load(head)
    assert isinstance(loaded, dict)
    return loaded


def linked_description(agent_dir: Path, name: str) -> str:
    """The description of skill ``name`` as its SKILL.md reads through the link in
    ``agent_dir``, or through ``agent_dir`` itself where it is one link, served whole (that
    is, from the library daemon)."""
    link = agent_dir / name
    assert link.is_symlink() or agent_dir.is_symlink(), link
    meta = frontmatter((link / "SKILL.md").read_text(encoding="utf-8"))
    assert meta["name"] == name
    return str(meta["description"])
