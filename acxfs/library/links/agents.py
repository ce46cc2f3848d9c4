"""The agents acxfs links skills for, and the user-level skill directories each one reads.

Invariant: this table is the only place that knows where an agent looks for skills; every
other module asks it.  Directories are relative to the home directory.  An agent's
``directory`` is its own user skill directory (where ``--agent NAME`` links); ``also_reads``
are the other user skill directories it reads; ``version`` is the release whose own skill
listing showed skills linked there by acxfs (``proven`` is False for an agent never run: its
directories are taken from its documentation).  The table is rendered in ``acxfs add --help``
and in docs/library.md, "Agents".
"""

from __future__ import annotations

import textwrap
from dataclasses import dataclass
from pathlib import Path

from acxfs.errors import EnvironmentProblem

SHARED = ".agents/skills"  # the cross-agent directory: `--agent agents`
CLAUDE = ".claude/skills"


@dataclass(frozen=True)
class Agent:
    name: str  # its `--agent NAME`
    label: str  # the product
    directory: str  # its own user skill directory, where `--agent NAME` links
    also_reads: tuple[str, ...] = ()  # the other user skill directories it reads
    version: str | None = None  # the release a real run proved this with (None: not recorded)
    proven: bool = True  # False: from its documentation only, never run

    @property
    def reads(self) -> tuple[str, ...]:
        """Every user skill directory it reads, its own first."""
        return (self.directory, *self.also_reads)


AGENTS: tuple[Agent, ...] = (
    Agent("claude", "Claude Code", CLAUDE, (), "2.1.197"),
    Agent("codex", "Codex", SHARED, (".codex/skills",), "0.171.0"),
    Agent("gemini", "Gemini CLI", ".gemini/skills", (SHARED,), "0.61.0"),
    Agent("opencode", "OpenCode", ".config/opencode/skills", (CLAUDE, SHARED), "1.18.33"),
    Agent("copilot", "GitHub Copilot CLI", ".copilot/skills", (SHARED,), "1.0.102"),
    Agent("qwen", "Qwen Code", ".qwen/skills", (SHARED,), "0.24.4"),
    Agent("amp", "Amp", ".config/amp/skills", (".config/agents/skills", SHARED, CLAUDE)),
    Agent("kilo", "Kilo Code CLI", ".config/kilo/skills", (CLAUDE, SHARED), "7.7.9"),
    Agent("cline", "Cline CLI", ".cline/skills", (SHARED,), "3.0.65"),
    Agent("auggie", "Auggie", ".augment/skills", (CLAUDE, SHARED), "0.36.0"),
    Agent("droid", "Factory Droid", ".factory/skills", (SHARED,), "0.225.2"),
    Agent("cursor", "Cursor", ".cursor/skills", (SHARED, CLAUDE, ".codex/skills"),
          proven=False),
)
DEFAULT_AGENTS = ("agents", "claude")  # ~/.agents/skills and ~/.claude/skills


def agent_names() -> list[str]:
    """Every `--agent NAME`: ``agents`` (the shared directory), then each agent's."""
    return ["agents", *(a.name for a in AGENTS)]


def readers(directory: str) -> list[Agent]:
    """The agents that read ``directory``, in table order."""
    return [a for a in AGENTS if directory in a.reads]


def _target(name: str) -> str | None:
    if name == "agents":
        return SHARED
    return next((a.directory for a in AGENTS if a.name == name), None)


def directories(names: list[str] | None, home: Path) -> list[Path]:
    """The skill directories to link into for `names` (the defaults when none), each once."""
    chosen: list[Path] = []
    for name in names or DEFAULT_AGENTS:
        directory = _target(name)
        if directory is None:
            raise EnvironmentProblem(f"unknown agent {name!r}; known: "
                                     f"{', '.join(agent_names())}")
        path = home / directory
        if path not in chosen:
            chosen.append(path)
    return chosen


def proven_with(agent: Agent) -> str:
    """How its directories are known: ``<label> <version>``, or why there is no version."""
    if not agent.proven:
        return f"{agent.label} (unproven: its documentation)"
    if agent.version is None:
        return f"{agent.label} (version not recorded)"
    return f"{agent.label} {agent.version}"


def help_table() -> str:
    """The table for `acxfs add --help`: each NAME, where it links, the agent (with the
    version that proved it) and the other directories it reads."""
    width = max(len(a.directory) for a in AGENTS) + 2
    indent = " " * (2 + 10 + width + 2)

    def row(name: str, where: str, what: str, more: str) -> list[str]:
        lines = [f"  {name:<9} {where:<{width}}  {what}"]
        if more:
            lines += textwrap.wrap(more, 100, initial_indent=indent, subsequent_indent=indent,
                                   break_on_hyphens=False)
        return lines

    lines = ["agents (--agent NAME: where it links; the agent, with the release whose own skill",
             "listing showed acxfs's links there; the other skill directories it reads):"]
    lines += row("agents", f"~/{SHARED}", "the shared directory",
                 "read by " + ", ".join(a.name for a in readers(SHARED)))
    for a in AGENTS:
        also = "also reads " + ", ".join(f"~/{d}" for d in a.also_reads) if a.also_reads else ""
        lines += row(a.name, f"~/{a.directory}", proven_with(a), also)
    return "\n".join(lines)
