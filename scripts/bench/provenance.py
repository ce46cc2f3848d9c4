"""What a benchmark's figures are figures of: the acxfs commit measured, the host they were taken
on, and the acxfs package byte-compiled the way a regular install is. Shared by every benchmark.
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
import platform
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def acxfs_revision() -> str:
    """The commit of the acxfs tree measured, with '+dirty' when acxfs/ has local changes."""
    def git(*args: str) -> str:
        return subprocess.run(["git", "-C", str(REPO), *args], capture_output=True, text=True,
                              timeout=30, check=False).stdout.strip()

    with contextlib.suppress(OSError, subprocess.SubprocessError):
        dirty = "+dirty" if git("status", "--porcelain", "acxfs") else ""
        return (git("rev-parse", "--short", "HEAD") or "unknown") + dirty
    return "unknown"


def host_facts() -> dict[str, object]:
    """The host, for a JSON report: node name, cores, kernel release, Python version."""
    return {"node": platform.node(), "cores": os.cpu_count(), "kernel": platform.release(),
            "python": platform.python_version()}


def host_line(revision: str) -> str:
    """The host and the commit measured, as one sentence of a Markdown report."""
    return (f"Host: {platform.node()}, {os.cpu_count()} cores, Linux {platform.release()}, "
            f"Python {platform.python_version()}; acxfs at {revision}.")


def compile_acxfs() -> str:
    """Byte-compile the acxfs package as `pip install` does for a regular install (ratarmount
    is measured installed that way): an editable install run with PYTHONDONTWRITEBYTECODE
    would otherwise compile its sources at every command, some 40-60 ms each here. Returns
    what was done, for the log."""
    spec = importlib.util.find_spec("acxfs")
    if spec is None or spec.origin is None:
        return "acxfs not found: nothing byte-compiled"
    package = Path(spec.origin).parent
    done = subprocess.run([sys.executable, "-m", "compileall", "-q", str(package)],
                          capture_output=True, text=True, check=False, timeout=300)
    return (f"byte-compiled {package}" if done.returncode == 0 else
            f"could not byte-compile {package}: {done.stderr.strip()[-200:]}")
