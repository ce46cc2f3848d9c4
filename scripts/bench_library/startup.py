"""Agent start-up with N skills, with the N bundles in the library (links into the daemon),
as copies behind links (the library's links and layout, no daemon) and as N plain copies:
Claude Code and Codex headless against the loopback mocks of
`scripts.agent_runs`, timed from the agent's start (the relay's start of it) to its first model
request; Gemini CLI and OpenCode, which have no headless run a mock can answer, timed from
their start to the exit of their own skill listing (`scripts.agent_runs.listings`).

Each round runs, for each agent and then each column: a cold start (library: `acxfs down`,
`acxfs up` until every link resolves; every column: page cache, dentries and inodes dropped)
and a warm start right after it. Rounds interleave the columns, so drift on a shared machine
hits all alike. One start per agent and column runs first, unmeasured, so no round pays an agent's
first-run set-up in a fresh HOME.

Invariant: a start counts only if its first request (or its listing) names every one of the N
skills with the description its SKILL.md gives (read through the agent's own directory: the
links or the copies); otherwise the column fails with the skills missing.
"""

from __future__ import annotations

import functools
import re
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from scripts.agent_runs import relay, runs
from scripts.agent_runs.listings import timed_listing
from scripts.agent_runs.mocks import AnthropicMock, MockAPI, ResponsesMock
from scripts.agent_runs.runs import AgentRun
from scripts.agent_runs.skill_lists import claude_skills_in, codex_skills_in
from scripts.bench.results import Cell
from scripts.bench.system import try_drop_caches
from scripts.bench_library.columns import Column, CopiesColumn, LibraryColumn
from scripts.bench_library.config import (
    COPIES,
    LIBRARY,
    STARTUP_MEASURES,
    BenchError,
    Bundle,
    Results,
)

_DESCRIPTION = re.compile(rb"^description: (.*)$", re.MULTILINE)


Started = tuple[float, list[tuple[str, str]]]  # seconds, and the (name, description) listed


@dataclass(frozen=True)
class Agent:
    slug: str  # the key of scripts.agent_runs.runs.PACKAGES
    name: str
    directory: str  # the skill directory it reads under HOME
    run: Callable[[Path, Path, float, Path], Started]  # home, cwd, timeout, started marker


def _first_request(mock: Callable[[], MockAPI], start: Callable[..., AgentRun],
                   listed: Callable[[object], list[tuple[str, str]]], name: str,
                   home: Path, cwd: Path, timeout: float, started: Path) -> Started:
    """Seconds from the agent's start to its first model request, and the skills it lists."""
    with mock() as api:
        run = start(home, cwd, api, timeout=timeout, started=started)
        code = run.wait()
        got = api.model_requests()
    begun = run.agent_started()
    if code != 0 or not got or begun is None:
        raise BenchError(f"{name} run failed (exit {code}, {len(got)} model requests): "
                         f"{run.stderr.strip()[-300:]}")
    return got[0].at - begun, listed(got[0].body)


def _listing(slug: str, home: Path, cwd: Path, timeout: float, started: Path) -> Started:
    """Seconds from the agent's start to the exit of its own skill listing, and the skills."""
    try:
        found, took = timed_listing(slug, home, cwd, timeout=timeout, started=started)
    except AssertionError as exc:
        raise BenchError(str(exc)[:300]) from exc
    if took is None:
        raise BenchError(f"{slug}: the relay did not say when it started the agent")
    return took, [(skill.name, skill.description) for skill in found if not skill.builtin]


AGENTS = (
    Agent("claude", "Claude Code", ".claude/skills", functools.partial(
        _first_request, AnthropicMock, runs.start_claude, claude_skills_in, "Claude Code")),
    Agent("codex", "Codex", ".agents/skills", functools.partial(
        _first_request, ResponsesMock, runs.start_codex, codex_skills_in, "Codex")),
    Agent("gemini", "Gemini CLI", ".agents/skills", functools.partial(_listing, "gemini")),
    Agent("opencode", "OpenCode", ".agents/skills", functools.partial(_listing, "opencode")),
)
AGENT_SLUGS = tuple(agent.slug for agent in AGENTS)
TEMPERATURES = ("cold", "warm")


def measure_key(agent: Agent, temperature: str) -> str:
    return f"start_{agent.slug}_{temperature}"


@functools.cache
def _namespace_problem() -> str:
    return relay.namespace_problem()


def unavailable(agent: Agent) -> str:
    """Why `agent` cannot run here ('' when it can)."""
    return runs.agent_problem(agent.slug) or _namespace_problem()


def expected_skills(bundles: list[Bundle]) -> set[tuple[str, str]]:
    found = set()
    for bundle in bundles:
        match = _DESCRIPTION.search(bundle.skill_md)
        if match is None:
            raise BenchError(f"{bundle.skill}/SKILL.md has no description line")
        found.add((bundle.skill, match[1].decode()))
    return found


def mirror_copies(column: CopiesColumn, bundles: list[Bundle]) -> None:
    """Plain copies in every agent's own directory (`acxfs extract` made them in one)."""
    for agent in AGENTS:
        target = column.home / agent.directory
        for bundle in bundles:
            source = column.skill_md(bundle).parent
            if source.parent != target and not (target / bundle.skill).exists():
                target.mkdir(parents=True, exist_ok=True)
                shutil.copytree(source, target / bundle.skill)


def missing_skills(expected: set[tuple[str, str]],
                   listed: list[tuple[str, str]]) -> list[tuple[str, str]]:
    """The expected (name, description) starteds a listing lacks. A listed description may be the
    beginning of the SKILL.md's (Codex shortens every description when it lists many skills),
    never empty."""
    shown: dict[str, set[str]] = {}
    for name, description in listed:
        shown.setdefault(name, set()).add(description)
    return sorted((name, description) for name, description in expected
                  if not any(d and description.startswith(d) for d in shown.get(name, ())))


def one_start(agent: Agent, column: Column, expected: set[tuple[str, str]],
              timeout: float) -> float:
    """Seconds of one start of `agent`, which must list `expected`."""
    cwd = column.root / "project"
    cwd.mkdir(exist_ok=True)
    started = column.root / f"{agent.slug}.started"
    started.unlink(missing_ok=True)
    took, listed = agent.run(column.home, cwd, timeout, started)
    missing = missing_skills(expected, listed)
    if missing:
        raise BenchError(f"{agent.name} did not list {len(missing)} of {len(expected)} skills "
                         f"through the {column.name}, e.g. {sorted(missing)[0]}")
    return took


def cold(column: Column, notes: list[str]) -> None:
    """The column restarted (the library's daemon) and every cache dropped."""
    if isinstance(column, LibraryColumn):
        column.down()
        column.up()
    dropped, why = try_drop_caches()
    if not dropped and why not in notes:
        notes.append(why)


def bench_startup(n: int, columns: list[Column], bundles: list[Bundle], slugs: tuple[str, ...],
                  rounds: int, warm_up: bool, timeout: float, results: Results,
                  notes: list[str], log: Callable[[str], None]) -> dict[str, str]:
    """The start-up measures at N of the agents `slugs` for the columns present that start
    agents (library, copies behind links, plain copies); returns why each (column, agent) that
    failed failed (its start-up cells say failed; the other agent and the other rows go on)."""
    starting = [c for c in columns if c.starts_agents]
    broken: dict[str, str] = {}
    agents = []
    for agent in (a for a in AGENTS if a.slug in slugs):
        problem = unavailable(agent)
        if problem:
            for temperature in TEMPERATURES:
                for column in starting:
                    results.setdefault((n, measure_key(agent, temperature), column.name),
                                       Cell(note="absent: " + ("run scripts/setup.sh"
                                                               if "setup.sh" in problem
                                                               else problem[:80])))
            log(f"N={n} start-up: {agent.name} not run: {problem}")
        else:
            agents.append(agent)
    if not agents or not starting:
        return broken
    expected = expected_skills(bundles)
    for column in starting:
        if isinstance(column, CopiesColumn):
            mirror_copies(column, bundles)
        elif isinstance(column, LibraryColumn):
            column.up()

    def attempt(agent: Agent, column: Column, what: str, step: Callable[[], object]) -> None:
        failed = f"{column.name}, {agent.name}"
        if failed in broken:
            return
        log(f"N={n} {column.name}: {agent.name} {what}")
        try:
            step()
        except BenchError as exc:
            broken[failed] = str(exc)
            log(f"N={n} {column.name}: {agent.name} start-up failed: {exc}")
            for temperature in TEMPERATURES:
                cell = results.setdefault((n, measure_key(agent, temperature), column.name),
                                          Cell())
                cell.note = cell.note if cell.values else "failed"

    def measured(agent: Agent, column: Column) -> None:
        for temperature in TEMPERATURES:
            if temperature == "cold":
                cold(column, notes)
            took = one_start(agent, column, expected, timeout)
            results.setdefault((n, measure_key(agent, temperature), column.name),
                               Cell()).values.append(took)

    try:
        if warm_up:
            for agent in agents:
                for column in starting:
                    attempt(agent, column, "first start (not measured)",
                            functools.partial(one_start, agent, column, expected, timeout))
        for index in range(rounds):
            for agent in agents:
                for column in starting:
                    attempt(agent, column, f"start-up round {index + 1}/{rounds}",
                            functools.partial(measured, agent, column))
    finally:
        for column in starting:
            column.down()
    return broken


def round_ratios(results: Results, n: int, keys: list[str] | None = None,
                 column: str = LIBRARY) -> list[float]:
    """`column` over plain copies for every measured round of the measures `keys` (default:
    every start-up measure; rounds are paired in order)."""
    ratios = []
    for key in keys if keys is not None else [key for key, _, _ in STARTUP_MEASURES]:
        lib = results.get((n, key, column))
        cp = results.get((n, key, COPIES))
        if lib and cp:
            ratios += [a / b for a, b in zip(lib.values, cp.values, strict=False) if b > 0]
    return ratios
