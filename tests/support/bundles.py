"""Bundles for the library's tests: cartridges packed by the real `acxfs pack`, `.azp` packages
from the independent writer signed for the publisher asked, and what the agent directories
hold.

Invariant: every cartridge here is packed by the real command in the test's isolated state
(its local key unless `key` is given), every package signed by the key it is given and
trusted only through the real `acxfs trust add KEYFILE --publisher ID`; nothing here reads
acxfs's own modules.
"""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import nacl.signing

from scripts.mounting import acxfs
from tests.support import azpwriter as aw
from tests.support.library import agent_dirs, home


def skill_md(name: str, text: str) -> str:
    return f"---\nname: {name}\ndescription: {name} from {text}.\n---\n\n# {name}\n\n{text}.\n"


def pack(tmp_path: Path, publisher: str, artifact: str, version: str, *skills: str,
         key: Path | None = None, tag: str = "", env: dict[str, str] | None = None) -> Path:
    """A cartridge `publisher/artifact` at `version` offering `skills` (each SKILL.md says
    which version and tag it is)."""
    src = tmp_path / f"src-{publisher}-{artifact}-{version}{tag}"
    for name in skills:
        (src / name).mkdir(parents=True)
        (src / name / "SKILL.md").write_text(skill_md(name, f"{artifact} {version}{tag}"))
    out = tmp_path / f"{publisher}-{artifact}-{version}{tag}.acx"
    args: list[object] = ["pack", *(src / n for n in skills), "-o", out, "--publisher",
                          publisher, "--id", artifact, "--version", version]
    if key is not None:
        args += ["--key", key]
    result = acxfs(*args, env=env)
    assert result.returncode == 0, result.stderr
    return out


def azp(tmp_path: Path, package_id: str, version: str, *skills: str, publisher: str,
        key: nacl.signing.SigningKey, tag: str = "") -> Path:
    """A `kind: "skill"` package `package_id` at `version`, its manifest's `publisher` field
    `publisher`, signed by `key`."""
    payload = {f"skills/{name}/SKILL.md": skill_md(name, f"{package_id} {version}{tag}").encode()
               for name in skills}
    manifest = aw.skill_manifest(
        payload, id=package_id, version=version, publisher=publisher,
        skill={"skills": [{"id": n, "name": n, "description": f"{n}."} for n in skills]})
    return aw.write_azp(tmp_path / f"{package_id}-{version}{tag}.azp", payload, manifest,
                        key=key)


def trust_key(tmp_path: Path, key: nacl.signing.SigningKey, publisher: str) -> str:
    """Pin `key` for `publisher` with the real `acxfs trust add`; its keyid."""
    result = acxfs("trust", "add", aw.key_file(tmp_path, key), "--publisher", publisher)
    assert result.returncode == 0, result.stderr
    return aw.keyid(key)


def agent_entries() -> dict[str, str]:
    """Every entry of both default agent directories: a link's target, or what it is."""
    found: dict[str, str] = {}
    for directory in agent_dirs():
        if directory.is_dir():
            for entry in sorted(directory.iterdir()):
                found[str(entry)] = os.readlink(entry) if entry.is_symlink() else "not a link"
    return found


def temporaries() -> list[str]:
    """The temporary entries (`.acxfs-*.tmp`) in the agent directories."""
    return [name for name in agent_entries() if Path(name).name.startswith(".acxfs-")]


def link_of(agent_dir: Path, skill: str) -> str:
    return os.readlink(agent_dir / skill)


def assert_one_line_error(result: subprocess.CompletedProcess[str], pattern: str,
                          code: int = 1) -> None:
    """The command failed with `code` and said exactly one line, matching `pattern`."""
    assert result.returncode == code, (result.stdout, result.stderr)
    assert "Traceback" not in result.stderr
    lines = result.stderr.splitlines()
    assert len(lines) == 1, lines
    assert re.fullmatch(pattern, lines[0]), lines[0]


def claude_dir() -> Path:
    return home() / ".claude" / "skills"
