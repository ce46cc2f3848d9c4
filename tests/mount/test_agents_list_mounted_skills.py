"""Real agents list the skills they find: Claude Code and Codex, headless, fully offline.

Each test runs a pinned agent (tests/agents/package.json, installed by scripts/setup.sh) through
``tests.support.agents``: in a network namespace with only loopback, against a mock of its
model API, with HOME set to the test's home. What the agent found is read from the skill list
of its first model request. Every positive check has a negative control in the same run (a
skill not installed, installed where that agent does not look, or tampered), so a run that saw
no skills at all cannot pass. Under ``CI=true`` a missing agent or an unusable namespace fails;
elsewhere a missing agent binary skips, and nothing else does.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import sqlite3
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from scripts import cartwriter as cw
from scripts.mounting import acxfs, mounted, pid_alive, run, wait_for
from tests.support import agents
from tests.support.agent_setup import require, write_skill

PUBLISHER = "io.github.example"
pytestmark = pytest.mark.slow  # every test runs a real agent, or the harness that runs one


@pytest.fixture
def home() -> Path:
    """The test's HOME (created by the isolated user state), where the agents look."""
    return Path(os.environ["HOME"])


def describe(name: str) -> str:
    return f"Probe skill {name} for the acxfs agent tests. Use it when testing acxfs."


# --- the harness itself ------------------------------------------------------------------------

PROBE = r"""
import json, os, socket, sys, urllib.request
def refused(port):
    try:
        socket.create_connection(("127.0.0.1", port), timeout=2).close()
    except ConnectionRefusedError:
        return True
    return False
port, host_port = int(sys.argv[1]), int(sys.argv[2])
with urllib.request.urlopen(f"http://127.0.0.1:{port}/v1/models", timeout=5) as answer:
    status = answer.status
print(json.dumps({
    "interfaces": [l.split(":")[0].strip() for l in open("/proc/net/dev").read().splitlines()[2:]],
    "routes": open("/proc/net/route").read().splitlines()[1:],
    "mock_status": status,
    "host_loopback_refused": refused(host_port),
    "proxy_refused": refused(9),
    "env": dict(os.environ),
}))
"""


def test_an_agent_run_sees_only_loopback_its_mock_and_a_scrubbed_environment(
    home: Path, project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    require("claude")
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-real-key-must-not-leak")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-real-key-must-not-leak")
    with contextlib.closing(socket.socket()) as host_listener, agents.ResponsesMock() as mock:
        host_listener.bind(("127.0.0.1", 0))
        host_listener.listen(1)  # open on the host's loopback: the namespace must not reach it
        host_port = host_listener.getsockname()[1]
        started = agents.start_agent(
            [sys.executable, "-I", "-c", PROBE, agents.PORT_TOKEN, str(host_port)],
            agents.claude_env(home), project, mock, timeout=20)
        code = started.wait()
        recorded = [(r.method, r.path) for r in mock.requests]
    assert code == 0, started.describe()
    seen = json.loads(started.stdout)
    assert seen["interfaces"] == ["lo"]
    assert seen["routes"] == []  # no route anywhere but loopback
    assert seen["mock_status"] == 200 and recorded == [("GET", "/v1/models")]
    assert seen["host_loopback_refused"] and seen["proxy_refused"]
    env = seen["env"]
    assert env["ANTHROPIC_API_KEY"] == "sk-ant-mock-0000" and "OPENAI_API_KEY" not in env
    assert env["HOME"] == str(home)
    assert env["ANTHROPIC_BASE_URL"].startswith("http://127.0.0.1:")
    assert env["CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC"] == "1"
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY"):
        assert env[name] == env[name.lower()] == agents.CLOSED_PROXY


def test_a_run_past_its_timeout_is_killed_with_everything_it_started(
    home: Path, project: Path, tmp_path: Path
) -> None:
    require("claude")
    pids = tmp_path / "pids"
    script = f"sleep 300 & echo $! > {pids}; echo $$ >> {pids}; wait"
    with agents.AnthropicMock() as mock:
        started = agents.start_agent(["/bin/sh", "-c", script], agents.claude_env(home),
                                     project, mock, timeout=2)
        code = started.wait()
    elapsed = time.monotonic() - started.started
    assert code == 124 and "ran past 2 s" in started.stderr
    assert elapsed < 10
    left = [int(pid) for pid in pids.read_text().split()]
    assert len(left) == 2
    assert wait_for(lambda: not any(pid_alive(pid) for pid in left), 5), left


def test_a_scripted_tool_call_keeps_claude_running_until_the_test_releases_it(
    home: Path, project: Path
) -> None:
    require("claude")
    (project / "note.txt").write_text("kept alive\n", encoding="utf-8")
    release = threading.Event()
    first = agents.Reply(tool=("Read", {"file_path": str(project / "note.txt")}), hold=release)
    with agents.AnthropicMock([first, agents.Reply(text="done")]) as mock:
        started = agents.start_claude(home, project, mock, timeout=40)
        mock.wait_for(1, timeout=30)
        time.sleep(0.5)
        still_running = started.process.poll() is None
        count_while_held = len(mock.model_requests())
        release.set()
        second = mock.wait_for(2, timeout=30)
        code = started.wait()
    assert code == 0, started.describe()
    assert still_running and count_while_held == 1
    result = second.body["messages"][-1]["content"][0]
    assert result["type"] == "tool_result" and result["tool_use_id"] == "toolu_mock1"
    assert "kept alive" in json.dumps(result["content"])
    assert started.stdout.strip() == "done"


def test_the_skill_list_parsers_read_exactly_the_listed_entries() -> None:
    claude_body = {"messages": [{"role": "system", "content": (
        "Available agent types for the Agent tool:\n- general-purpose: not a skill\n\n"
        f"{agents.CLAUDE_SKILLS_HEADER}\n\n- one-skill: First.\n- two-skill: Second,\n"
        "continued.\n\nAfter the list: - no-skill: not listed")}]}
    assert agents.claude_skills_in(claude_body) == [("one-skill", "First."),
                                                    ("two-skill", "Second,\ncontinued.")]
    codex_body = {"input": [{"role": "developer", "content": [{"type": "input_text", "text": (
        "## Skills\n### Skill roots\n- `r0` = `/h/.agents/skills`\n"
        f"{agents.CODEX_SKILLS_HEADER}\n- one-skill: First. (file: r0/one-skill/SKILL.md)\n"
        "- not-an-entry: no file\n</skills_instructions>")}]}]}
    assert agents.codex_skills_in(codex_body) == [("one-skill", "First.")]
    assert agents.codex_skill_files(codex_body) == {
        "one-skill": "/h/.agents/skills/one-skill/SKILL.md"}
    later = {"messages": [*claude_body["messages"], {"role": "system", "content": (
        f"{agents.CLAUDE_SKILLS_HEADER}\n\n- one-skill: Changed.")}]}
    assert agents.claude_skill_lists(later) == [agents.claude_skills_in(claude_body),
                                                [("one-skill", "Changed.")]]
    assert agents.claude_skills_in(later) == agents.claude_skills_in(claude_body)
    assert agents.claude_skills_in({"messages": []}) == []
    assert agents.codex_skills_in({"input": []}) == []


# --- plain skill directories --------------------------------------------------------------------


def test_claude_lists_skills_in_its_user_directory_and_no_other(
    home: Path, project: Path, tmp_path: Path
) -> None:
    require("claude")
    for name in ("acxfs-probe-alpha", "acxfs-probe-beta"):
        write_skill(home / ".claude" / "skills", name, describe(name))
    write_skill(home / ".agents" / "skills", "acxfs-probe-cross", describe("acxfs-probe-cross"))
    write_skill(tmp_path / "elsewhere", "acxfs-probe-absent", describe("acxfs-probe-absent"))
    listed = agents.claude_skills(home, project)
    assert ("acxfs-probe-alpha", describe("acxfs-probe-alpha")) in listed
    assert ("acxfs-probe-beta", describe("acxfs-probe-beta")) in listed
    names = {name for name, _ in listed}
    assert "acxfs-probe-absent" not in names  # not installed anywhere
    assert "acxfs-probe-cross" not in names  # Claude Code does not read ~/.agents/skills


def test_codex_lists_skills_in_the_cross_agent_directory_with_their_files(
    home: Path, project: Path, tmp_path: Path
) -> None:
    require("codex")
    skill = write_skill(home / ".agents" / "skills", "acxfs-probe-gamma",
                        describe("acxfs-probe-gamma"))
    write_skill(tmp_path / "elsewhere", "acxfs-probe-absent", describe("acxfs-probe-absent"))
    body = agents.codex_first_request(home, project).body
    listed = agents.codex_skills_in(body)
    assert ("acxfs-probe-gamma", describe("acxfs-probe-gamma")) in listed
    assert agents.codex_skill_files(body)["acxfs-probe-gamma"] == str(skill / "SKILL.md")
    assert "acxfs-probe-absent" not in {name for name, _ in listed}


# --- cartridges mounted with the real acxfs command --------------------------------------------


@pytest.fixture
def pack(tmp_path: Path) -> Callable[[str], Path]:
    """``pack(name)``: ``acxfs pack`` of a one-skill directory, signed with this test's local
    key (``acxfs keygen`` first), so it verifies as ``verified / local``."""
    done = acxfs("keygen")
    assert done.returncode == 0, done.stderr

    def make(name: str) -> Path:
        skill = write_skill(tmp_path / "src", name, describe(name))
        out = tmp_path / f"{name}.acx"
        done = acxfs("pack", skill, "-o", out, "--publisher", PUBLISHER, "--id", name,
                     "--deflate", "raw")
        assert done.returncode == 0, done.stderr
        return out

    return make


def tamper_skill_md(cartridge: Path, name: str) -> None:
    """Change bytes of the skill's SKILL.md row after signing (its length kept)."""
    path = f"rom/skills/{name}/SKILL.md"
    with contextlib.closing(sqlite3.connect(cartridge)) as conn:
        data, size = conn.execute("SELECT data, sz FROM sqlar WHERE name = ?",
                                  (path,)).fetchone()
        original = cw.inflate(data, size)
        forged = original.replace(b"Say hello.", b"Say HELLO.")
        assert forged != original and len(forged) == len(original)
        changed = conn.execute("UPDATE sqlar SET data = ? WHERE name = ?",
                               (cw.compress(forged, "raw"), path)).rowcount
        conn.commit()
    assert changed == 1


AGENT_DIRS = {"claude": ".claude/skills", "codex": ".agents/skills"}


def agent_skills(agent: str, home: Path, project: Path) -> list[tuple[str, str]]:
    if agent == "claude":
        return agents.claude_skills(home, project)
    return agents.codex_skills(home, project)


@pytest.mark.fuse
@pytest.mark.parametrize("agent", ["claude", "codex"])
def test_an_agent_lists_a_cartridge_mounted_at_its_skill_directory(
    agent: str, home: Path, project: Path, pack: Callable[[str], Path]
) -> None:
    require(agent)
    name = "acxfs-probe-packed"
    cartridge = pack(name)
    with mounted(cartridge, home / AGENT_DIRS[agent] / name) as m:
        assert "mounting skill" in m.stderr
        listed = agent_skills(agent, home, project)
    assert (name, describe(name)) in listed
    assert not (home / AGENT_DIRS[agent] / name).exists()  # unmounted: the mountpoint is gone


@pytest.mark.fuse
@pytest.mark.parametrize("agent", ["claude", "codex"])
def test_an_agent_drops_a_mounted_cartridge_whose_skill_md_was_tampered(
    agent: str, home: Path, project: Path, pack: Callable[[str], Path]
) -> None:
    require(agent)
    good, bad = "acxfs-probe-intact", "acxfs-probe-tampered"
    intact, tampered = pack(good), pack(bad)
    tamper_skill_md(tampered, bad)
    skills = home / AGENT_DIRS[agent]
    with mounted(intact, skills / good), mounted(tampered, skills / bad) as m:
        read = run(["cat", m.mountpoint / "SKILL.md"])
        listed = agent_skills(agent, home, project)
    assert read.returncode != 0 and "Input/output error" in read.stderr
    assert (good, describe(good)) in listed  # the same run lists the intact cartridge
    assert bad not in {name for name, _ in listed}


@pytest.mark.parametrize("agent", ["claude", "codex"])
def test_the_agent_is_the_pinned_version(agent: str, home: Path, project: Path) -> None:
    require(agent)
    with agents.AnthropicMock() as mock:
        started = agents.start_agent([str(agents.agent_binary(agent)), "--version"],
                                     agents.claude_env(home), project, mock, timeout=30)
        code = started.wait()
    assert code == 0, started.describe()
    assert agents.pinned_version(agent) in started.stdout
