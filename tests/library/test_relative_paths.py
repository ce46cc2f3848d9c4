"""Relative HOME and XDG values through the real `acxfs` command.

A relative HOME would give relative link targets and, once the daemon left the working
directory for `/`, files written under `/`: every command that derives a path from it refuses
in one line (exit 2) and writes nothing.  A relative `XDG_*` value is ignored, as the XDG base
directory specification says: the default under HOME is used instead.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from scripts.mounting import acxfs, mounted
from tests.support.library import agent_dirs, data_dir, home, ok
from tests.support.library_attacks import pack

REFUSAL = ("acxfs: error: HOME is a relative path ('home'); acxfs needs an absolute HOME "
           "(export HOME=/home/NAME)\n")
VARIABLES = ("HOME", "XDG_DATA_HOME", "XDG_STATE_HOME", "XDG_CONFIG_HOME", "XDG_CACHE_HOME",
             "ACXFS_TRUST_DIR")


@pytest.fixture
def workdir(tmp_path: Path) -> Iterator[Path]:
    """An empty working directory, with a junk bundle file in it."""
    path = tmp_path / "cwd"
    path.mkdir()
    (path / "x.acx").write_bytes(b"not a bundle")
    yield path
    assert sorted(p.name for p in path.iterdir()) == ["x.acx"], "written into the cwd"


def relative_env(**absolute: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in VARIABLES}
    env["HOME"] = "home"
    env.update({k: str(v) for k, v in absolute.items()})
    return env


COMMANDS = [["add", "x.acx"], ["update", "x.acx"], ["revert", "x"], ["remove", "x"], ["list"],
            ["up"], ["down"], ["repair"], ["mount", "x.acx", "mp"], ["umount", "mp"],
            ["verify", "x.acx"], ["trust", "list"], ["keygen"], ["service", "install"]]


@pytest.mark.parametrize("command", COMMANDS, ids=lambda c: c[0] + (c[1] if c[0] == "trust"
                                                                      else ""))
def test_a_relative_home_is_refused_by_every_command_in_one_line(workdir: Path,
                                                                 command: list[str]) -> None:
    result = acxfs(*command, cwd=workdir, env=relative_env())
    assert (result.returncode, result.stdout, result.stderr) == (2, "", REFUSAL)


@pytest.mark.slow
@pytest.mark.fuse
@pytest.mark.usefixtures("library_stops")
def test_a_relative_home_is_refused_even_with_every_other_directory_absolute(
        tmp_path: Path, workdir: Path, local_key: None) -> None:
    cart = pack(tmp_path, "alpha", artifact="pair")
    env = relative_env(XDG_DATA_HOME=home() / ".local" / "share",
                       XDG_STATE_HOME=Path(os.environ["XDG_STATE_HOME"]),
                       XDG_CONFIG_HOME=Path(os.environ["XDG_CONFIG_HOME"]),
                       ACXFS_TRUST_DIR=Path(os.environ["ACXFS_TRUST_DIR"]))
    for command in (["add", cart], ["list"], ["up"], ["remove", "alpha"]):
        result = acxfs(*command, cwd=workdir, env=env)
        assert (result.returncode, result.stdout, result.stderr) == (2, "", REFUSAL)
    assert not (data_dir() / "store").exists()
    assert not any(d.exists() for d in agent_dirs())


@pytest.mark.slow
@pytest.mark.fuse
@pytest.mark.usefixtures("library_stops")
def test_relative_xdg_directories_are_ignored_for_the_defaults_under_home(
        tmp_path: Path, workdir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("XDG_DATA_HOME", "XDG_STATE_HOME", "XDG_CONFIG_HOME", "XDG_CACHE_HOME"):
        monkeypatch.setenv(name, name.lower())  # relative: ignored
    monkeypatch.delenv("ACXFS_TRUST_DIR")
    monkeypatch.chdir(workdir)
    ok(acxfs("keygen", cwd=workdir))
    assert (home() / ".config" / "acxfs" / "keys" / "local.pem").is_file()
    cart = pack(tmp_path, "alpha", artifact="pair")
    ok(acxfs("add", cart, cwd=workdir))
    link = agent_dirs()[1] / "alpha"
    assert os.readlink(link).startswith(str(home() / ".local" / "share" / "acxfs" / "mnt") + "/")
    assert (link / "SKILL.md").is_file()
    with mounted(cart, tmp_path / "mp"):
        records = home() / ".local" / "state" / "acxfs" / "mounts"
        assert len(list(records.glob("*.json"))) == 2  # the library's mount and this one
