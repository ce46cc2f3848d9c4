"""An agent's output reaches the caller whole even when the agent writes it without blocking
and exits at once (as OpenCode does with a listing larger than a pipe's 64 KiB buffer): with
``stdout_file`` it goes through a file, which takes every write, not a pipe, which takes only
what fits before the writer is gone."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from scripts.agent_runs.mocks import MockAPI
from scripts.agent_runs.relay import namespace_problem
from scripts.agent_runs.runs import base_env, start_agent

SIZE = 1 << 20
# One non-blocking write of 1 MiB, then an immediate exit: a pipe keeps what fits (64 KiB).
WRITER = ("import os, sys; os.set_blocking(1, False); data = b'x' * int(sys.argv[1]);\n"
          "try:\n    os.write(1, data)\nexcept BlockingIOError:\n    pass\nos._exit(0)")


@pytest.mark.slow
def test_output_larger_than_a_pipe_buffer_arrives_whole_through_a_file(tmp_path: Path) -> None:
    problem = namespace_problem()
    if problem:
        pytest.skip(problem)
    with MockAPI() as mock:
        run = start_agent([sys.executable, "-I", "-c", WRITER, str(SIZE)], base_env(tmp_path),
                          tmp_path, mock, timeout=30, stdout_file=tmp_path / "stdout")
        assert run.wait() == 0, run.describe()
    assert len(run.stdout) == SIZE
