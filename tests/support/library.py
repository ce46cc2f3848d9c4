"""The skills library as its tests see it: where it lives in the test's HOME, the real `acxfs`
command's answers, and the library taken down after a test.

Invariant: every path here is computed from ``$HOME`` at the moment of the call (conftest's
isolated HOME of the running test), never cached; `stop_library` always runs `acxfs down`,
then detaches any acxfs mount still under HOME and fails the test if there was one; `ok` and
`listing` fail the test on a non-zero exit and show the command, its stdout and its stderr.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

from scripts.mounting import acxfs, acxfs_mounts_under, force_cleanup


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


def stop_library() -> None:
    """Stop the library daemon; fail if a mount outlives it (after detaching it)."""
    acxfs("down")
    left = acxfs_mounts_under(home())
    for mountpoint in left:
        force_cleanup(mountpoint)
    assert not left, f"library mounts left behind: {left}"
