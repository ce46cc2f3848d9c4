"""The agents' own skill listings (no model request): ``gemini skills list`` (text:
``<name> [Enabled]`` then indented ``Description:`` and ``Location:`` lines, built-in skills
hidden), ``opencode debug skill`` (JSON: name, description, location, content; a built-in's
location is ``<built-in>``) and ``copilot skill list --json`` (JSON: name, description,
source, path, enabled; a built-in's source is ``builtin``). What each of them needs to list
offline is in ``listing_env``.

Invariant: a listing runs as every agent run of `scripts.agent_runs.runs` does (loopback-only
namespace, its one port a mock that answers nothing but 404, only the environment set here,
bounded by a timeout), its output captured whole through a file (never a pipe an agent can
exit ahead of).
"""

from __future__ import annotations

import json
import re
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from scripts.agent_runs.mocks import RUN_TIMEOUT, MockAPI
from scripts.agent_runs.runs import agent_binary, agents_dir, base_env, start_agent


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


def timed_listing(agent: str, home: Path, cwd: Path, *, timeout: float = RUN_TIMEOUT,
                  started: Path | None = None) -> tuple[list[Listed], float | None]:
    """Run ``agent``'s own skill listing once with HOME=home in cwd, in the loopback-only
    namespace (its one port a mock that answers nothing but 404): the skills it lists, in its
    order, and with ``started`` the seconds from the agent's start to its exit (as the relay
    saw it start). AssertionError (with its output) when it fails or its output does not
    parse."""
    _prepare(agent, home)
    argv = [str(agent_binary(agent)), *LISTING_ARGS[agent]]
    # Through a file, not a pipe: OpenCode's listing of 200 skills is over 64 KiB, and it exits
    # before a pipe has taken all of it (the rest is lost); a file takes every write at once.
    with tempfile.TemporaryDirectory(prefix="acxfs-listing-") as scratch, MockAPI() as mock:
        run = start_agent(argv, listing_env(agent, home), cwd, mock, timeout=timeout,
                          started=started, stdout_file=Path(scratch) / "stdout")
        code = run.wait()
        ended = time.monotonic()
    if code != 0:
        raise AssertionError(f"{agent} failed: {run.describe()}")
    begun = run.agent_started()
    try:
        listed = PARSERS[agent](run.stdout)
    except (ValueError, KeyError, TypeError) as e:
        raise AssertionError(f"{agent}'s listing does not parse ({e}): {run.describe()}") from e
    return listed, None if begun is None else ended - begun


def listed_skills(agent: str, home: Path, cwd: Path, *,
                  timeout: float = RUN_TIMEOUT) -> list[Listed]:
    """`timed_listing`'s skills."""
    return timed_listing(agent, home, cwd, timeout=timeout)[0]
