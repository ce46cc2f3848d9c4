"""Real agents list what `acxfs add` links: Gemini CLI, OpenCode and GitHub Copilot CLI, each
asked for its own skill listing (no model), fully offline; and the agents table they prove.

One library per test, in a fresh HOME, with the real `acxfs` command: a skill linked only in
``~/.agents/skills`` (``--agent agents``), one only in ``~/.claude/skills`` (``--agent
claude``), one in both (the default), one in the agent's own directory (``--agent NAME``), and
a plain skill directory in ``~/.agents/skills`` (a real folder, not a link) as the control.
The agent runs in the loopback-only namespace of ``tests.support.agents``; the test asserts
exactly which of those skills it lists, from which directory, with the description its SKILL.md
has through the link (read from the library daemon), and that acxfs's table of agents says
the same about the directories it reads. Under ``CI=true`` a missing agent fails
(``require`` of ``tests.support.agent_setup``); elsewhere a missing binary skips.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from acxfs.library.links.agents import AGENTS, CLAUDE, SHARED, Agent, proven_with, readers
from scripts.mounting import acxfs
from tests.support import agents
from tests.support.agent_setup import require, write_skill
from tests.support.library import home, linked_description, ok, pack

DOCS = Path(__file__).resolve().parents[2] / "docs" / "library.md"
LISTING_AGENTS = ["gemini", "opencode", "copilot"]
ONLY_SHARED = "acxfs-only-agents-dir"  # `--agent agents`: ~/.agents/skills
ONLY_CLAUDE = "acxfs-only-claude-dir"  # `--agent claude`: ~/.claude/skills
BOTH = "acxfs-both-default-dirs"  # the default: both
OWN = "acxfs-own-agent-dir"  # `--agent NAME`: the agent's own directory
PLAIN = "acxfs-plain-control"  # a real folder in ~/.agents/skills, no link, no library
PLAIN_DESCRIPTION = "A plain skill directory, not a link, the control of the acxfs tests."


def table(name: str) -> Agent:
    return next(a for a in AGENTS if a.name == name)


def describe(name: str) -> str:
    return f"Listing probe {name} for the acxfs agent tests, served through its link."


def library(agent: str, tmp_path: Path) -> None:
    """The four bundles added, each with its `--agent` choice, and the plain control."""
    for name, choice in ((ONLY_SHARED, ["--agent", "agents"]),
                         (ONLY_CLAUDE, ["--agent", "claude"]),
                         (BOTH, []),
                         (OWN, ["--agent", agent])):
        bundle = pack(write_skill(tmp_path / "src", name, describe(name)),
                      tmp_path / f"{name}.acx")
        ok(acxfs("add", bundle, *choice))
    write_skill(home() / SHARED, PLAIN, PLAIN_DESCRIPTION)


# --- the real agents ----------------------------------------------------------------------------

# What each agent lists of the library, measured: the directories it may name for each skill.
# A skill in two directories it reads is listed once; OpenCode scans its directories at once,
# so which of the two links it names changes from run to run (both serve the same bytes).
EXPECTED: dict[str, dict[str, tuple[str, ...]]] = {
    "gemini": {ONLY_SHARED: (SHARED,), BOTH: (SHARED,), OWN: (".gemini/skills",),
               PLAIN: (SHARED,)},
    "opencode": {ONLY_SHARED: (SHARED,), ONLY_CLAUDE: (CLAUDE,), BOTH: (CLAUDE, SHARED),
                 OWN: (".config/opencode/skills",), PLAIN: (SHARED,)},
    "copilot": {ONLY_SHARED: (SHARED,), BOTH: (SHARED,), OWN: (".copilot/skills",),
                PLAIN: (SHARED,)},
}


def description_in(directory: Path, name: str) -> str:
    """The description of ``directory/name``: through acxfs's link, or the control's own."""
    if name == PLAIN:
        assert not (directory / name).is_symlink()
        return PLAIN_DESCRIPTION
    return linked_description(directory, name)


@pytest.mark.fuse
@pytest.mark.slow
@pytest.mark.usefixtures("library_stops")
@pytest.mark.parametrize("agent", LISTING_AGENTS)
def test_an_agent_lists_exactly_the_linked_skills_of_the_directories_it_reads(
    agent: str, tmp_path: Path, project: Path, local_key: None
) -> None:
    require(agent)
    library(agent, tmp_path)
    listed = agents.listed_skills(agent, home(), project)
    ours = [s for s in listed if not s.builtin]
    assert sorted(s.name for s in ours) == sorted(EXPECTED[agent]), listed  # each once
    for skill in ours:
        directory = Path(skill.directory).parent
        assert skill.directory == str(directory / skill.name)
        allowed = [str(home() / d) for d in EXPECTED[agent][skill.name]]
        assert str(directory) in allowed, skill
        assert skill.description == description_in(directory, skill.name), skill
    assert not {s.name for s in listed if s.builtin} & set(EXPECTED[agent])
    # The table of agents says what the agent showed.
    dirs = {d for allowed in EXPECTED[agent].values() for d in allowed}
    reads = table(agent).reads
    assert dirs <= set(reads)
    assert (ONLY_CLAUDE in EXPECTED[agent]) == (CLAUDE in reads)
    assert (table(agent).directory,) == EXPECTED[agent][OWN]


@pytest.mark.fuse
@pytest.mark.slow
@pytest.mark.usefixtures("library_stops")
def test_copilot_does_not_list_a_skill_linked_only_in_claudes_directory(
    tmp_path: Path, project: Path, local_key: None
) -> None:
    # GitHub Copilot CLI reads ~/.agents/skills but never opens ~/.claude/skills: a skill
    # linked only there is not Copilot's. Should a release read it, this fails.
    require("copilot")
    library("copilot", tmp_path)
    assert (home() / CLAUDE / ONLY_CLAUDE / "SKILL.md").is_file()  # served there, all the same
    names = [s.name for s in agents.listed_skills("copilot", home(), project)]
    assert ONLY_CLAUDE not in names
    assert ONLY_SHARED in names and PLAIN in names  # the same run lists the others
    assert CLAUDE not in table("copilot").reads


@pytest.mark.slow
@pytest.mark.parametrize("agent", LISTING_AGENTS)
def test_the_listing_agent_is_the_pinned_version(agent: str, project: Path) -> None:
    require(agent)
    with agents.MockAPI() as mock:
        started = agents.start_agent([str(agents.agent_binary(agent)), "--version"],
                                     agents.listing_env(agent, home()), project, mock,
                                     timeout=30)
        code = started.wait()
    assert code == 0, started.describe()
    assert agents.pinned_version(agent) in started.stdout


# --- the table -----------------------------------------------------------------------------------


@pytest.mark.parametrize("agent", ["claude", "codex", *LISTING_AGENTS])
def test_the_table_names_the_pinned_version_of_each_agent_run_in_ci(agent: str) -> None:
    assert table(agent).proven and table(agent).version == agents.pinned_version(agent)


def test_the_table_has_every_agent_but_claude_code_read_the_shared_directory() -> None:
    assert [a.name for a in AGENTS if a not in readers(SHARED)] == ["claude"]
    # ~/.claude/skills: Claude Code, and of the others only these (Cursor from its documentation)
    assert [a.name for a in readers(CLAUDE)] == ["claude", "opencode", "amp", "kilo", "auggie",
                                                 "cursor"]
    assert [a.name for a in AGENTS if not a.proven] == ["cursor"]


def help_rows(out: str) -> dict[str, str]:
    """NAME -> its row of the agents table of `acxfs add --help`, continuation lines joined."""
    rows: dict[str, str] = {}
    name = ""
    for line in out.split("\nagents (", 1)[1].splitlines()[2:]:
        if line.startswith("   "):
            rows[name] += " " + line.strip()
        elif line.startswith("  "):
            name = line.split()[0]
            rows[name] = line.strip()
    return rows


def test_add_help_shows_every_agent_its_directory_and_what_else_it_reads() -> None:
    rows = help_rows(ok(acxfs("add", "--help")))
    assert list(rows) == ["agents", *(a.name for a in AGENTS)]
    assert rows["agents"].split()[1] == f"~/{SHARED}"
    for a in AGENTS:
        words = rows[a.name].split()
        assert words[1] == f"~/{a.directory}", rows[a.name]
        assert proven_with(a) in rows[a.name]  # the agent, and the version that proved it
        assert all(f"~/{d}" in rows[a.name] for d in a.also_reads), rows[a.name]
    assert f"~/{CLAUDE}" not in rows["copilot"]
    assert "unproven" in rows["cursor"]


def docs_rows() -> dict[str, list[str]]:
    """NAME -> the cells after the first of its row in the "Agents" table of docs/library.md."""
    section = DOCS.read_text(encoding="utf-8").split("\n## Agents\n", 1)[1].split("\n## ")[0]
    rows = {}
    for line in section.splitlines():
        cells = [c.strip() for c in line.split("|")[1:-1]]
        if cells and cells[0].startswith("`") and cells[0] != "`--agent`":
            rows[cells[0].split()[0].strip("`")] = cells[1:]
    return rows


def test_the_docs_table_is_the_agents_table() -> None:
    rows = docs_rows()
    assert list(rows) == ["agents", *(a.name for a in AGENTS)]
    for a in AGENTS:
        label, links, also, proven, shared, claude = rows[a.name]
        assert label == a.label and links == f"`~/{a.directory}`", rows[a.name]
        assert also == ", ".join(f"`~/{d}`" for d in a.also_reads), rows[a.name]
        if not a.proven:
            assert proven.startswith("unproven"), rows[a.name]
        else:
            assert (a.version or "version not recorded") in proven, rows[a.name]
        for column, directory in ((shared, SHARED), (claude, CLAUDE)):
            said = column.split()[0].strip("*:")
            if not a.proven:
                assert said == "documented", rows[a.name]
            else:
                assert said == ("yes" if directory in a.reads else "no"), rows[a.name]


@pytest.mark.fuse
@pytest.mark.slow
@pytest.mark.usefixtures("library_stops")
def test_agent_names_link_into_each_agents_own_directory_only(
    tmp_path: Path, local_key: None
) -> None:
    name = "acxfs-own-dirs"
    bundle = pack(write_skill(tmp_path / "src", name, describe(name)), tmp_path / "own.acx")
    chosen = ["gemini", "opencode", "copilot", "qwen", "amp", "kilo", "cline", "auggie",
              "droid", "cursor"]
    ok(acxfs("add", bundle, *(arg for agent in chosen for arg in ("--agent", agent))))
    own = {table(agent).directory for agent in chosen}
    assert len(own) == len(chosen)  # each its own
    for directory in own:
        assert linked_description(home() / directory, name) == describe(name), directory
    for directory in (SHARED, CLAUDE, ".codex/skills"):
        assert not os.path.lexists(home() / directory / name), directory
