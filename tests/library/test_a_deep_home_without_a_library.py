"""A HOME so deep that the library's control socket path is longer than a socket address
(108 bytes) works like any other while no library was ever made: `trust add`, `trust remove`
and `acxfs down` (each of which asks a running library daemon to re-check) find no daemon and
succeed, instead of failing on the length of a socket path nobody created."""

from __future__ import annotations

from pathlib import Path

import pytest

from scripts.mounting import acxfs
from tests.support.library import data_dir, ok

SIGNER_PEM = """-----BEGIN PUBLIC KEY-----
MCowBQYDK2VwAyEAA6EHv/POEL4dcN0Y50vAmWfk1jCbpQ1fHdyGZBJVMbg=
-----END PUBLIC KEY-----
"""


@pytest.fixture
def deep_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    home = tmp_path / ("d" * 60) / ("e" * 60) / "home"
    home.mkdir(parents=True)
    monkeypatch.setenv("HOME", str(home))
    socket = data_dir() / "control" / "daemon.sock"
    assert len(str(socket)) > 108 and not data_dir().exists()
    return home


def test_trust_add_and_remove_under_a_deep_home_find_no_daemon_and_succeed(
        deep_home: Path, tmp_path: Path) -> None:
    pem = tmp_path / "k.pub.pem"
    pem.write_text(SIGNER_PEM)
    added = acxfs("trust", "add", pem, "--publisher", "io.github.example")
    assert (added.returncode, added.stderr) == (0, ""), added
    keyid = next(line.split()[1] for line in added.stdout.splitlines()
                 if line.startswith("pinned "))
    assert keyid in ok(acxfs("trust", "list"))
    removed = acxfs("trust", "remove", keyid)
    assert (removed.returncode, removed.stderr) == (0, ""), removed
    down = acxfs("down")
    assert down.returncode == 0 and "Traceback" not in down.stderr, down
