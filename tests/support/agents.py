"""Real coding agents for the tests: the runs of `scripts.agent_runs` (headless Claude Code and
Codex against loopback mocks of their model APIs, re-exported here under their names), and the
agents' own skill listings.

Invariant: an agent run here reaches nothing but its mock (`scripts.agent_runs.runs`): a
network namespace of its own with only loopback and the relay to the mock of the calling
process, proxies pointing at a closed port, an environment of only the variables set here,
every run bounded by a timeout.

Their own skill listings (no model request; ``listed_skills``): ``gemini skills list`` (text:
``<name> [Enabled]`` then indented ``Description:`` and ``Location:`` lines, built-in skills
hidden), ``opencode debug skill`` (JSON: name, description, location, content; a built-in's
location is ``<built-in>``) and ``copilot skill list --json`` (JSON: name, description,
source, path, enabled; a built-in's source is ``builtin``). What each of them needs to list
offline is in ``listing_env``.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path

from scripts.agent_runs.mocks import RUN_TIMEOUT as RUN_TIMEOUT
from scripts.agent_runs.mocks import AnthropicMock as AnthropicMock
from scripts.agent_runs.mocks import MockAPI as MockAPI
from scripts.agent_runs.mocks import Recorded as Recorded
from scripts.agent_runs.mocks import Reply as Reply
from scripts.agent_runs.mocks import ResponsesMock as ResponsesMock
from scripts.agent_runs.relay import PORT_TOKEN as PORT_TOKEN
from scripts.agent_runs.relay import loopback_up as loopback_up
from scripts.agent_runs.relay import namespace_problem as namespace_problem
from scripts.agent_runs.runs import CLOSED_PROXY as CLOSED_PROXY
from scripts.agent_runs.runs import AgentRun as AgentRun
from scripts.agent_runs.runs import agent_binary as agent_binary
from scripts.agent_runs.runs import agent_problem as agent_problem
from scripts.agent_runs.runs import agents_dir as agents_dir
from scripts.agent_runs.runs import base_env as base_env
from scripts.agent_runs.runs import binary_path as binary_path
from scripts.agent_runs.runs import claude_env as claude_env
from scripts.agent_runs.runs import claude_first_request as claude_first_request
from scripts.agent_runs.runs import claude_skills as claude_skills
from scripts.agent_runs.runs import codex_first_request as codex_first_request
from scripts.agent_runs.runs import codex_skills as codex_skills
from scripts.agent_runs.runs import first_request as first_request
from scripts.agent_runs.runs import pinned_version as pinned_version
from scripts.agent_runs.runs import start_agent as start_agent
from scripts.agent_runs.runs import start_claude as start_claude
from scripts.agent_runs.runs import start_codex as start_codex
from scripts.agent_runs.skill_lists import CLAUDE_SKILLS_HEADER as CLAUDE_SKILLS_HEADER
from scripts.agent_runs.skill_lists import CODEX_SKILLS_HEADER as CODEX_SKILLS_HEADER
from scripts.agent_runs.skill_lists import claude_skill_lists as claude_skill_lists
from scripts.agent_runs.skill_lists import claude_skills_in as claude_skills_in
from scripts.agent_runs.skill_lists import codex_skill_files as codex_skill_files
from scripts.agent_runs.skill_lists import codex_skills_in as codex_skills_in

# --- the agents' own skill listings -------------------------------------------------------------


@dataclass(frozen=True)
class Listed:
    """One skill an agent's own listing names."""

    name: str
    description: str
    directory: str  # the skill's directory as the agent names it ('' for a built-in skill)

    @property
    def builtin(self) -> bool:
        return not self.directory


LISTING_ARGS = {
    "gemini": ["skills", "list"],
    "opencode": ["debug", "skill"],
    "copilot": ["skill", "list", "--json"],
}

# Gemini CLI sends usage statistics at start (the one connection a listing attempted); the
# auto-update and its notice are turned off as well, in its user settings file.
GEMINI_SETTINGS = {
    "privacy": {"usageStatisticsEnabled": False},
    "general": {"enableAutoUpdate": False, "enableAutoUpdateNotification": False},
}


def listing_env(agent: str, home: Path) -> dict[str, str]:
    """The environment ``agent`` lists its skills with. None of them needs a key, an account or
    a model to list skills; what is set here only keeps them from reaching for the network."""
    env = base_env(home)
    if agent == "opencode":
        # It fetches the models.dev catalog at start (the one connection a listing attempted);
        # no self-update either.
        env |= {"OPENCODE_DISABLE_MODELS_FETCH": "1", "OPENCODE_DISABLE_AUTOUPDATE": "1"}
    elif agent == "copilot":
        # Offline mode and no self-update; it unpacks its 235 MB application into its package
        # cache at every first start, so that cache is the one scripts/setup.sh filled, not
        # one per test HOME.
        env |= {"COPILOT_OFFLINE": "true", "COPILOT_AUTO_UPDATE": "false",
                "COPILOT_PKG_CACHE_HOME": str(agents_dir() / "copilot-cache")}
    return env


def _prepare(agent: str, home: Path) -> None:
    if agent == "gemini":
        settings = home / ".gemini" / "settings.json"
        if not settings.exists():
            settings.parent.mkdir(parents=True, exist_ok=True)
            settings.write_text(json.dumps(GEMINI_SETTINGS, indent=2) + "\n", encoding="utf-8")


def _skill_dir(location: str) -> str:
    return location.removesuffix("/SKILL.md")


def gemini_listed(text: str) -> list[Listed]:
    """The skills of ``gemini skills list``: a ``<name> [Enabled]`` line, then the indented
    ``Description:`` (continued by indented lines) and ``Location:`` of its SKILL.md."""
    found: list[Listed] = []
    name, description, location = "", "", ""
    for line in [*text.splitlines(), ""]:
        head = re.match(r"^(\S+) \[(?:Enabled|Disabled)\]$", line)
        if head or not line.strip():
            if name:
                found.append(Listed(name, description, _skill_dir(location)))
            name, description, location = (head.group(1) if head else ""), "", ""
        elif name and line.startswith("  Description: "):
            description = line.removeprefix("  Description: ")
        elif name and line.startswith("  Location:"):
            location = line.removeprefix("  Location:").strip()
        elif name and line.startswith("  ") and not location:
            description += "\n" + line.strip()
    return found


def opencode_listed(text: str) -> list[Listed]:
    """The skills of ``opencode debug skill`` (a JSON list)."""
    return [Listed(str(e["name"]), str(e["description"]),
                   "" if e["location"] == "<built-in>" else _skill_dir(str(e["location"])))
            for e in json.loads(text)]


def copilot_listed(text: str) -> list[Listed]:
    """The skills of ``copilot skill list --json`` (a JSON list)."""
    return [Listed(str(e["name"]), str(e["description"]),
                   "" if e["source"] == "builtin" else str(e["path"]))
            for e in json.loads(text)]


PARSERS = {"gemini": gemini_listed, "opencode": opencode_listed, "copilot": copilot_listed}


def listed_skills(agent: str, home: Path, cwd: Path, *,
                  timeout: float = RUN_TIMEOUT) -> list[Listed]:
    """Run ``agent``'s own skill listing once with HOME=home in cwd, in the loopback-only
    namespace (its one port a mock that answers nothing but 404); the skills it lists, in its
    order. AssertionError (with its output) when it fails or its output does not parse."""
    _prepare(agent, home)
    argv = [str(agent_binary(agent)), *LISTING_ARGS[agent]]
    with MockAPI() as mock:
        run = start_agent(argv, listing_env(agent, home), cwd, mock, timeout=timeout)
        code = run.wait()
    if code != 0:
        raise AssertionError(f"{agent} failed: {run.describe()}")
    try:
        return PARSERS[agent](run.stdout)
    except (ValueError, KeyError, TypeError) as e:
        raise AssertionError(f"{agent}'s listing does not parse ({e}): {run.describe()}") from e
