"""What a test of the real agents sets up first: a usable agent, and skill directories to offer.

Invariant: `require` lets a test go on only when the pinned agent is installed and the
loopback-only namespace of ``tests.support.agents`` is usable; a missing agent binary skips the
test outside ``CI=true`` and fails it under CI, and any other problem (a broken install, no
namespace) always fails it. `write_skill` writes a valid Agent Skill directory (its SKILL.md
frontmatter names the skill and gives its description).
"""

from __future__ import annotations

import functools
import os
from pathlib import Path

import pytest

from tests.support import agents


@functools.cache
def _namespace_problem() -> str:
    return agents.namespace_problem()


def require(agent: str) -> None:
    """The pinned ``agent`` and the loopback-only namespace must be usable."""
    problem = agents.agent_problem(agent)
    if problem:
        binary = agents.binary_path(agent)
        if os.environ.get("CI") != "true" and not binary.exists():
            pytest.skip(problem)
        pytest.fail(problem)
    problem = _namespace_problem()
    if problem:
        pytest.fail(f"no loopback-only network namespace for the agents: {problem}")


def write_skill(parent: Path, name: str, description: str) -> Path:
    """An Agent Skill directory ``parent/name`` with a valid SKILL.md."""
    skill = parent / name
    skill.mkdir(parents=True)
    (skill / "SKILL.md").write_text(
        f"---\nname: {name}\ndescription: {description}\nlicense: Apache-2.0\n---\n\n"
        f"# {name}\n\nSay hello.\n", encoding="utf-8")
    return skill
