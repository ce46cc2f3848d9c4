"""The agents acxfs links skills for, and the user-level skill directory each one reads.

Invariant: this table is the only place that knows where an agent looks for skills; every
other module asks it.  Directories are relative to the home directory.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from acxfs.errors import EnvironmentProblem


@dataclass(frozen=True)
class Agent:
    name: str
    directory: str  # where acxfs links skills for it, below the home directory


# Which agents read each directory: docs/library.md, "Agents".
AGENTS: tuple[Agent, ...] = (
    Agent("agents", ".agents/skills"),  # Codex, Gemini CLI, Cursor, OpenCode, GitHub Copilot
    Agent("claude", ".claude/skills"),  # Claude Code (also read by Cursor, OpenCode, Copilot)
    Agent("codex", ".codex/skills"),
    Agent("gemini", ".gemini/skills"),
    Agent("cursor", ".agents/skills"),
    Agent("opencode", ".agents/skills"),
    Agent("copilot", ".agents/skills"),
)
DEFAULT_AGENTS = ("agents", "claude")  # one link in each reaches all six agents


def agent_names() -> list[str]:
    return [a.name for a in AGENTS]


def directories(names: list[str] | None, home: Path) -> list[Path]:
    """The skill directories to link into for `names` (the defaults when none), each once."""
    chosen: list[Path] = []
    table = {a.name: a for a in AGENTS}
    for name in names or DEFAULT_AGENTS:
        agent = table.get(name)
        if agent is None:
            raise EnvironmentProblem(f"unknown agent {name!r}; known: {', '.join(table)}")
        path = home / agent.directory
        if path not in chosen:
            chosen.append(path)
    return chosen
