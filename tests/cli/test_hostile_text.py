"""Hostile text never ends a command with a traceback nor forges a line.

An .azp `compat` of thousands of digits is one line and exit 6 in every command (Python's
`int()` refuses strings over 4,300 digits); text a terminal's encoding cannot hold (a
publisher `io.github.中文` on an ASCII stdout) is shown escaped; a name with a newline
cannot add a line to `acxfs.log`, since every log line goes through the terminal's escaping.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from scripts.mounting import acxfs_command
from tests.support.azpwriter import (
    DEMO_PAYLOAD,
    SKILL,
    TEST_KEY,
    key_file,
    skill_manifest,
    write_azp,
)

HUGE_COMPAT = ">=" + "9" * 5000
CHINESE = "io.github.中文"


@pytest.fixture
def trust_key(tmp_path: Path) -> Path:
    return key_file(tmp_path, TEST_KEY)


def test_compat_of_five_thousand_digits_is_one_line_in_every_command(
    run_cli, tmp_path: Path, trust_key: Path
) -> None:
    pkg = write_azp(tmp_path / "huge.azp", DEMO_PAYLOAD,
                    skill_manifest(DEMO_PAYLOAD, compat=HUGE_COMPAT))
    commands: list[list[object]] = [["verify"], ["verify", "--quick"], ["inspect"], ["ls"],
                                    ["cat", SKILL], ["extract", tmp_path / "out"]]
    for command in commands:
        result = run_cli(command[0], pkg, *command[1:], "--trust-key", trust_key)
        assert result.code == 6, (command, result)
        line = next(line for line in (result.out + result.err).splitlines()
                    if line.startswith("invalid / malformed - Package requires azphalt API"))
        assert len(line) < 200, line  # the 5,000 digits are not repeated
        assert "5002 characters" in line
    assert not (tmp_path / "out").exists()
    added = run_cli("trust", "add", pkg)
    assert added.code == 2 and added.err.count("\n") == 1 and len(added.err) < 300


def test_compat_with_a_long_but_valid_version_part_is_still_judged(
    run_cli, tmp_path: Path, trust_key: Path
) -> None:
    for compat, code in ((">=0.000000001", 0), (">=0.1.999999999", 6), ("<" + "1" * 9, 0)):
        pkg = write_azp(tmp_path / "c.azp", DEMO_PAYLOAD,
                        skill_manifest(DEMO_PAYLOAD, compat=compat))
        assert run_cli("verify", pkg, "--trust-key", trust_key).code == code, compat


def _ascii_run(*args: object) -> subprocess.CompletedProcess[bytes]:
    env = dict(os.environ, PYTHONIOENCODING="ascii", LC_ALL="C")
    return subprocess.run([*acxfs_command(), *(str(a) for a in args)], capture_output=True,
                          env=env, stdin=subprocess.DEVNULL, timeout=60, check=False)


def test_ascii_stdout_shows_a_chinese_publisher_escaped(tmp_path: Path, trust_key: Path) -> None:
    manifest = skill_manifest(DEMO_PAYLOAD, publisher=CHINESE, name="演示",
                              skill={"skills": [{"id": "demo-skill", "name": "演示",
                                                 "description": "一个演示。"}]})
    pkg = write_azp(tmp_path / "chinese.azp", DEMO_PAYLOAD, manifest)
    verify = _ascii_run("verify", pkg, "--trust-key", trust_key)
    assert verify.returncode == 0, verify.stderr
    assert b"publisher: io.github.\\u4e2d\\u6587" in verify.stdout.splitlines()
    inspect = _ascii_run("inspect", pkg, "--trust-key", trust_key)
    assert inspect.returncode == 0 and b"Traceback" not in inspect.stderr, inspect.stderr
    assert b"\\u6f14\\u793a" in inspect.stdout
    missing = _ascii_run("cat", pkg, "skills/中文.md", "--trust-key", trust_key)
    assert missing.returncode == 2 and b"Traceback" not in missing.stderr, missing.stderr
    assert missing.stderr.startswith(b"acxfs: error: ") and missing.stderr.count(b"\n") == 1
    assert b"\\u4e2d\\u6587" in missing.stderr


def test_a_name_with_a_newline_cannot_forge_a_log_line(tmp_path: Path) -> None:
    from acxfs.mount.records import log_line

    log = tmp_path / "acxfs.log"
    name = "skills/x/a.md\n2030-01-01T00:00:00Z [1] start: forged on /home (trusted)"
    log_line(log, f"tamper: {name}: digest mismatch")
    log_line(log, "stop: /mnt/\x1b[2Jx")
    lines = log.read_text(encoding="utf-8").splitlines()
    assert len(lines) == 2
    assert lines[0].endswith("tamper: skills/x/a.md\\n2030-01-01T00:00:00Z [1] start: forged on "
                             "/home (trusted): digest mismatch")
    assert "\x1b" not in lines[1] and lines[1].endswith("stop: /mnt/\\x1b[2Jx")
