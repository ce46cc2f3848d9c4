"""The repository is self-contained: its tests and scripts read only what it holds.

No file of the repository (tracked or not yet tracked, docstrings and docs included) names the
reference material kept beside the checkout, so a clone alone runs its own tests; the real
artifacts the tests use are copies in `tests/fixtures/`, exactly the files its README lists,
with the digests it gives; the test helpers are imported as a package, never by editing
`sys.path` or by loading a script from its file.
"""

from __future__ import annotations

import ast
import hashlib
import re
import subprocess
from pathlib import Path

import pytest

from tests.support import FIXTURES

REPO = Path(__file__).resolve().parent.parent
# Spelled in pieces, so that this file does not name what it forbids.
OUTSIDE = re.compile("|".join(re.escape(p) for p in ("../" + "shared", "/work/" + "shared")))
LISTED = re.compile(r"^\| `([^`]+)` \| `([0-9a-f]{64})` \|$", re.M)


def repo_files() -> list[Path]:
    """Every file git tracks or would track (untracked, not ignored) in the working tree."""
    done = subprocess.run(
        ["git", "-C", str(REPO), "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        capture_output=True, check=False,
    )
    if done.returncode != 0:  # not a git checkout (an exported tree): every file below REPO
        return [p for p in REPO.rglob("*") if p.is_file() and ".git" not in p.parts]
    names = {n for n in done.stdout.decode("utf-8", "surrogateescape").split("\0") if n}
    return sorted(REPO / n for n in names if (REPO / n).is_file())


def listed_fixtures() -> dict[str, str]:
    """The fixture files tests/fixtures/README.md lists: relative path -> sha256 hex."""
    return dict(LISTED.findall((FIXTURES / "README.md").read_text(encoding="utf-8")))


def test_no_file_names_the_material_beside_the_checkout() -> None:
    files = repo_files()
    assert REPO / "tests" / "conftest.py" in files  # the walk sees the repository
    offenders = []
    for path in files:
        if path.suffix in {".acx", ".azp"}:
            continue
        try:
            text = path.read_text(encoding="utf-8")
        except (UnicodeDecodeError, OSError):
            continue
        for number, line in enumerate(text.splitlines(), 1):
            if OUTSIDE.search(line):
                offenders.append(f"{path.relative_to(REPO)}:{number}: {line.strip()[:100]}")
    assert offenders == []


def test_fixtures_are_exactly_the_listed_copies() -> None:
    listed = listed_fixtures()
    assert len(listed) == 27
    on_disk = {
        str(p.relative_to(FIXTURES)): p for p in FIXTURES.rglob("*")
        if p.is_file() and p.name != "README.md"
    }
    assert sorted(on_disk) == sorted(listed)
    changed = {name for name, digest in listed.items()
               if hashlib.sha256(on_disk[name].read_bytes()).hexdigest() != digest}
    assert changed == set()


@pytest.mark.parametrize("folder", ["real", "azp", "registry", "azphalt-repository"])
def test_each_fixture_folder_keeps_its_own_readme(folder: str) -> None:
    assert (FIXTURES / folder / "README.md").is_file()


def test_readme_names_provenance_and_licence() -> None:
    text = (FIXTURES / "README.md").read_text(encoding="utf-8")
    for fact in ("lboel/acx", "HereLiesAz/azphalt", "Apache-2.0", "MIT"):
        assert fact in text


def test_no_test_or_script_edits_sys_path_or_loads_a_script_by_file() -> None:
    offenders = []
    for path in sorted((REPO / "tests").rglob("*.py")) + sorted((REPO / "scripts").rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
        for node in ast.walk(tree):
            if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and (
                (node.value.id, node.attr) == ("sys", "path")
                or node.attr in {"spec_from_file_location", "module_from_spec"}
            ):
                offenders.append(f"{path.relative_to(REPO)}:{node.lineno}")
    assert offenders == []
