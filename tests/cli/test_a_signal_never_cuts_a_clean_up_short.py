"""A signal stops `extract` and `pack` only where their clean-up is whole.

A Python signal handler that raises lands between any two bytecodes.  When SIGTERM arrived
while `acxfs.safe.dirs` walked to the output directory, right after `os.close(fd)` and
before `fd` was forgotten, the clean-up closed that descriptor again: the command ended with
`cannot write the output (Bad file descriptor)` (or, had the number been reused meanwhile,
closed another file's descriptor).  Here the signal is sent at exactly that moment, from a
wrapper of `os.close`, and at the last step (the final rename, after which the output is
whole): the command stops at its next checkpoint with exit 130 and leaves nothing, or
finishes whole.  The commands run in-process (the signal goes to this process), and the
handlers of this process are put back after each test.
"""

from __future__ import annotations

import os
import signal
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.support import REPO

EXAMPLE = REPO / "examples" / "hello-acx"
PUBLISHER = "io.github.example"
SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


@pytest.fixture(autouse=True)
def own_signals() -> Iterator[None]:
    saved = {sig: signal.getsignal(sig) for sig in SIGNALS}
    yield
    for sig, handler in saved.items():
        signal.signal(sig, handler)


def acxfs_handles_sigterm() -> bool:
    """Whether a command of acxfs has its stop handler installed (only then may the test
    signal itself: otherwise SIGTERM would end the test run)."""
    handler = signal.getsignal(signal.SIGTERM)
    return getattr(handler, "__module__", "").startswith("acxfs.")


def sigterm_once_when(monkeypatch: pytest.MonkeyPatch, target: object, name: str,
                      where: Callable[[], bool]) -> list[str]:
    """Replace `target.name` by a wrapper that, once, right after the real call returns
    while `where()` holds and acxfs handles SIGTERM, sends SIGTERM to this process."""
    real = getattr(target, name)
    sent: list[str] = []

    def wrapper(*args: object, **kwargs: object) -> object:
        result = real(*args, **kwargs)
        if not sent and acxfs_handles_sigterm() and where():
            sent.append(sys._getframe(1).f_code.co_qualname)
            os.kill(os.getpid(), signal.SIGTERM)
        return result

    monkeypatch.setattr(target, name, wrapper)
    return sent


def called_from(qualname: str) -> Callable[[], bool]:
    return lambda: sys._getframe(2).f_code.co_qualname == qualname


def run_writer(run_cli, tmp_path: Path, command: str, arm: Callable[[], list[str]]):
    """Run `extract` or `pack` (after `arm()`) writing below tmp_path/out: the result, the
    output directory, the output, what `arm` returned."""
    assert run_cli("keygen").code == 0
    out = tmp_path / "out"
    out.mkdir()
    cart = tmp_path / "hello.acx"
    assert run_cli("pack", EXAMPLE, "-o", cart, "--publisher", PUBLISHER).code == 0
    sent = arm()
    if command == "extract":
        return run_cli("extract", cart, out / "tree"), out, out / "tree", sent
    return run_cli("pack", EXAMPLE, "-o", out / "x.acx", "--publisher", PUBLISHER), out, \
        out / "x.acx", sent


@pytest.mark.parametrize("command", ["extract", "pack"])
def test_a_signal_right_after_a_descriptor_is_closed_stops_cleanly(
        run_cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, command: str) -> None:
    result, out, _, sent = run_writer(run_cli, tmp_path, command, lambda: sigterm_once_when(
        monkeypatch, os, "close", called_from("_walk")))
    assert sent == ["_walk"]  # the signal came where the old handler broke the clean-up
    assert (result.code, result.err) == (130, "acxfs: interrupted\n"), result
    assert list(out.iterdir()) == []


@pytest.mark.parametrize("command", ["extract", "pack"])
def test_a_signal_at_the_final_rename_lets_the_command_finish_whole(
        run_cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, command: str) -> None:
    from acxfs.safe import _ops as safe_ops

    final = "TempDir.commit" if command == "extract" else "TempFile.commit"
    result, out, made, sent = run_writer(run_cli, tmp_path, command, lambda: sigterm_once_when(
        monkeypatch, safe_ops, "_checkpoint", called_from(final)))
    assert sent == [final]
    assert result.code == 0 and result.err == "", result
    assert [p.name for p in out.iterdir()] == [made.name]
    if command == "pack":
        assert run_cli("verify", made).code == 0
    else:
        assert (made / "rom" / "skills" / "hello-acx" / "SKILL.md").read_bytes() == \
            (EXAMPLE / "SKILL.md").read_bytes()
