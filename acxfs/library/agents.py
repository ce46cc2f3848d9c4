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
    also_reads: tuple[str, ...]  # other skill directories the agent reads
    note: str


AGENTS: tuple[Agent, ...] = (
    Agent("agents", ".agents/skills", (),
          "the cross-agent directory: Codex, Gemini CLI, Cursor, OpenCode, GitHub Copilot"),
    Agent("claude", ".claude/skills", (), "Claude Code (also read by Cursor, OpenCode, Copilot)"),
    Agent("codex", ".codex/skills", (".agents/skills",), "OpenAI Codex CLI"),
    Agent("gemini", ".gemini/skills", (".agents/skills",), "Gemini CLI"),
    Agent("cursor", ".agents/skills", (".claude/skills",), "Cursor"),
    Agent("opencode", ".agents/skills", (".claude/skills",), "OpenCode"),
    Agent("copilot", ".agents/skills", (".claude/skills",), "GitHub Copilot"),
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
