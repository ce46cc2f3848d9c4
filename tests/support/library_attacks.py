"""What the library's attack tests share: bundles packed by the real `acxfs pack`, a home
another local user can reach, the library's lock held by the test, and a library state
written by hand.

Invariant: `reachable_home` puts HOME, the XDG directories and the trust store in a fresh
directory under /tmp that `nobody` can traverse (pytest's own tmp_path is 0700) and takes the
library down and the directory away afterwards; `held_lock` holds the POSIX lock the library's
commands take, from this process, until its block ends; `blocked_on_lock` says whether a
process waits for a POSIX lock; `hand_state` is a state `acxfs` accepts, naming files that
need not exist.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from scripts.mounting import acxfs, acxfs_command, acxfs_mounts_under, force_cleanup
from tests.support.library import data_dir, home, ok, stop_library

PUBLISHER = "io.github.tester"


def write_skill(root: Path, name: str) -> Path:
    skill = root / name
    (skill / "references").mkdir(parents=True)
    (skill / "SKILL.md").write_text(
        f"---\nname: {name}\ndescription: The {name} test skill.\n---\n\n# {name}\n\nUse it.\n")
    (skill / "references" / "guide.md").write_text(f"How to use {name}.\n")
    return skill


def pack(where: Path, *skills: str, artifact: str, version: str = "1.0.0") -> Path:
    """A bundle of `skills` signed with the local key (`acxfs keygen` first)."""
    src = where / f"src-{artifact}-{version}"
    dirs = [write_skill(src, name) for name in skills]
    out = where / f"{artifact}-{version}.acx"
    ok(acxfs("pack", *dirs, "-o", out, "--publisher", PUBLISHER, "--version", version,
             "--id", artifact))
    return out


@contextlib.contextmanager
def reachable_home(monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A HOME (with its XDG directories and trust store) that `nobody` can traverse, with a
    local key; the library is stopped and the directory removed afterwards."""
    base = Path(tempfile.mkdtemp(prefix="acxfs-home-", dir="/tmp"))
    os.chmod(base, 0o755)
    user = base / "home"
    user.mkdir(mode=0o755)
    for name, value in {"HOME": user, "XDG_CONFIG_HOME": user / ".config",
                        "XDG_STATE_HOME": user / ".local" / "state",
                        "XDG_CACHE_HOME": user / ".cache",
                        "ACXFS_TRUST_DIR": user / ".config" / "acxfs"}.items():
        monkeypatch.setenv(name, str(value))
    monkeypatch.delenv("XDG_DATA_HOME", raising=False)
    try:
        ok(acxfs("keygen"))
        yield user
    finally:
        try:
            stop_library()
        finally:
            for mountpoint in acxfs_mounts_under(base):
                force_cleanup(mountpoint)
            shutil.rmtree(base, ignore_errors=True)


@contextlib.contextmanager
def held_lock(lock: Path) -> Iterator[None]:
    """Hold the library's lock from this process (its commands then wait for it)."""
    fd = os.open(lock, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o600)
    try:
        fcntl.lockf(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def blocked_on_lock(pid: int) -> bool:
    """Whether process `pid` waits for a POSIX lock (a `->` row of /proc/locks)."""
    with open("/proc/locks", encoding="ascii") as handle:
        for line in handle:
            fields = line.split()
            if "->" in fields and fields[fields.index("->") + 1:][3:4] == [str(pid)]:
                return True
    return False


def start(*args: object) -> subprocess.Popen[str]:
    """`acxfs ARGS...` started, not waited for."""
    return subprocess.Popen([*acxfs_command(), *(str(a) for a in args)], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, text=True)


def hand_state(identity: str = f"{PUBLISHER}/pair", skills: tuple[str, ...] = ("alpha",),
               file: str | None = None) -> dict[str, Any]:
    """A library state `acxfs` accepts: `identity` installed with `skills`, linked into
    Claude Code's directory, its store file `file` (default: a store name)."""
    digest = "a" * 64
    prefix = f"{identity.replace('/', '+')}@1.0.0-{digest[:12]}"
    claude = str(home() / ".claude" / "skills")
    revision = {
        "digest": digest, "file": file or f"{digest}.acx", "format": "acx",
        "identity": identity, "version": "1.0.0", "manifest": "sha256:" + "b" * 64,
        "keyid": "ed25519:" + "c" * 64, "publisher": PUBLISHER,
        "skills": {name: f"rom/skills/{name}" for name in skills},
        "installed_at": "2026-12-01T00:00:00Z",
    }
    links = [{"directory": claude, "name": name,
              "target": str(data_dir() / "mnt" / prefix / name)} for name in skills]
    return {"schema": "acxfs.library/1", "trustDir": os.environ["ACXFS_TRUST_DIR"],
            "installed": {identity: {"current": revision, "previous": None,
                                     "directories": [claude], "links": links,
                                     "suspended": False}},
            "floors": {}}


def write_library_file(name: str, content: str | bytes) -> Path:
    """`content` as the library's file `name` (its directory made, mode 0700)."""
    data_dir().mkdir(parents=True, exist_ok=True, mode=0o700)
    path = data_dir() / name
    path.write_bytes(content.encode() if isinstance(content, str) else content)
    return path


def dumps(doc: object) -> str:
    return json.dumps(doc, indent=1)
