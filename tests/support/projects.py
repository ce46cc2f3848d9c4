"""Projects as their tests see them: machines (each a HOME of its own with its own trust store
and library), signed cartridges, git repositories and what a project tree holds.

Invariant: a `Machine` runs the real `acxfs` command in its own environment only; `machines`
stops every machine's library daemon at the end and fails the test if a mount outlives it.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from scripts.mounting import acxfs, acxfs_mounts_under, force_cleanup, run
from tests.support.library import library_may_run

PUBLISHER = "io.github.me"
GIT_ENV = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.org",
           "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@example.org",
           "GIT_CONFIG_NOSYSTEM": "1"}


@dataclass
class Machine:
    """One user on one machine: a HOME, its XDG directories and its trust store."""

    root: Path

    @property
    def home(self) -> Path:
        return self.root / "home"

    @property
    def env(self) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("XDG_", "ACXFS_"))}
        env.update({"HOME": str(self.home), "ACXFS_TRUST_DIR": str(self.root / "trust"),
                    "XDG_CONFIG_HOME": str(self.root / "config"),
                    "XDG_STATE_HOME": str(self.root / "state"),
                    "XDG_CACHE_HOME": str(self.root / "cache"), **GIT_ENV})
        return env

    @property
    def store(self) -> Path:
        return self.home / ".local" / "share" / "acxfs" / "store"

    def make(self) -> Machine:
        for name in ("home", "config", "state", "cache"):
            (self.root / name).mkdir(parents=True, exist_ok=True)
        return self

    def acxfs(self, *args: object, cwd: Path | None = None,
              kill_at: str | None = None) -> subprocess.CompletedProcess[str]:
        env = self.env
        if kill_at is not None:
            env["ACXFS_TEST_KILL_AT"] = kill_at
        return acxfs(*args, env=env, cwd=cwd, timeout=90)

    def ok(self, *args: object, cwd: Path | None = None) -> str:
        result = self.acxfs(*args, cwd=cwd)
        assert result.returncode == 0, (args, result.stdout, result.stderr)
        return result.stdout

    def git(self, *args: object, cwd: Path) -> str:
        result = run(["git", *args], cwd=cwd, env=self.env)
        assert result.returncode == 0, (args, result.stdout, result.stderr)
        return result.stdout

    def listing(self) -> dict[str, Any]:
        doc = json.loads(self.ok("list", "--json"))
        assert isinstance(doc, dict)
        return doc

    def stop(self) -> list[str]:
        if library_may_run(self.home):
            self.acxfs("down")
        left = acxfs_mounts_under(self.root)
        for mountpoint in left:
            force_cleanup(mountpoint)
        return left


@contextlib.contextmanager
def machines(tmp_path: Path, *names: str) -> Iterator[list[Machine]]:
    """Machines under tmp_path, each library stopped at the end."""
    made = [Machine(tmp_path / name).make() for name in names]
    try:
        yield made
    finally:
        left = [m for machine in made for m in machine.stop()]
        assert not left, f"library mounts left behind: {left}"


def skill_text(name: str, version: str) -> str:
    return (f"---\nname: {name}\ndescription: {name} at version {version}.\n---\n\n"
            f"# {name}\n\nRelease {version}.\n")


def pack(machine: Machine, out_dir: Path, artifact: str, version: str, *skills: str) -> Path:
    """A cartridge of PUBLISHER/artifact at `version`, signed by `machine`'s local key."""
    src = out_dir / f"src-{artifact}-{version}"
    for name in skills:
        (src / name / "references").mkdir(parents=True, exist_ok=True)
        (src / name / "SKILL.md").write_text(skill_text(name, version))
        (src / name / "references" / "guide.md").write_text(f"{name} {version} guide\n" * 50)
    out = out_dir / f"{artifact}-{version}.acx"
    machine.ok("pack", *(src / n for n in skills), "-o", out, "--publisher", PUBLISHER,
               "--id", artifact, "--version", version)
    return out


def init_repo(machine: Machine, path: Path) -> Path:
    path.mkdir(parents=True)
    machine.git("init", "-q", "-b", "main", ".", cwd=path)
    (path / "README.md").write_text("a project\n")
    return path


def tree_through_links(project: Path) -> dict[str, str]:
    """Every file reached through the project's skill links: path -> sha256 of its bytes."""
    found: dict[str, str] = {}
    for agent in (".agents", ".claude"):
        skills = project / agent / "skills"
        if not skills.is_dir():
            continue
        for entry in sorted(skills.iterdir()):
            for dirpath, _, filenames in os.walk(entry, followlinks=True):
                for name in filenames:
                    path = Path(dirpath) / name
                    found[str(path.relative_to(project))] = hashlib.sha256(
                        path.read_bytes()).hexdigest()
    return found


def links_in(project: Path) -> dict[str, str]:
    """The project's skill-directory entries: path relative to it -> link target."""
    found: dict[str, str] = {}
    for agent in (".agents", ".claude"):
        skills = project / agent / "skills"
        if skills.is_dir():
            for entry in sorted(skills.iterdir()):
                found[str(entry.relative_to(project))] = (
                    os.readlink(entry) if entry.is_symlink() else "not a link")
    return found


def exclude_lines(project: Path) -> list[str]:
    text = (project / ".git" / "info" / "exclude").read_text()
    return [line for line in text.splitlines() if line.startswith("/")]


def one_line_error(result: subprocess.CompletedProcess[str], code: int) -> str:
    """The one stderr line of a refused command that exited `code`."""
    assert result.returncode == code, (result.returncode, result.stdout, result.stderr)
    assert "Traceback" not in result.stderr
    lines = result.stderr.splitlines()
    assert len(lines) == 1, lines
    assert lines[0].startswith("acxfs: error: "), lines
    return lines[0]
