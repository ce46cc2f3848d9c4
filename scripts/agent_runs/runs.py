"""The pinned agents, and one headless run of Claude Code or Codex against a mock.

The agents are the pinned npm packages of ``tests/agents/package.json``, installed by
``scripts/setup.sh`` under ``$ACXFS_AGENTS_DIR`` (default ``~/.cache/acxfs-agents`` of the
user in the password database). OpenCode is its linux-x64 build, whose binary is not in
``node_modules/.bin``.

Invariant: a run reaches nothing but its mock: it runs under the relay of
`scripts.agent_runs.relay` in a network namespace of its own that has only loopback; every
proxy variable points at a closed loopback port; its environment holds only the variables this
module sets (none of the caller's keys or settings leak in). Every run is bounded by a timeout,
after which the agent's whole process group is killed.
"""

from __future__ import annotations

import contextlib
import json
import os
import pwd
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

from scripts.agent_runs.mocks import RUN_TIMEOUT, AnthropicMock, MockAPI, Recorded, ResponsesMock
from scripts.agent_runs.relay import PORT_TOKEN
from scripts.agent_runs.skill_lists import claude_skills_in, codex_skills_in

REPO = Path(__file__).resolve().parents[2]
PINS = REPO / "tests" / "agents" / "package.json"  # read as data: scripts import no tests
RELAY = Path(__file__).resolve().parent / "relay.py"
CLOSED_PROXY = "http://127.0.0.1:9"  # nothing listens there inside the namespace
PACKAGES = {"claude": "@anthropic-ai/claude-code", "codex": "@openai/codex",
            "gemini": "@google/gemini-cli", "opencode": "opencode-linux-x64",
            "copilot": "@github/copilot"}
BINARIES = {"opencode": "opencode-linux-x64/bin/opencode"}  # below node_modules; else .bin/NAME


def agents_dir() -> Path:
    """Where scripts/setup.sh installs the pinned agents: ``$ACXFS_AGENTS_DIR``, else
    ``.cache/acxfs-agents`` in the user's home directory from the password database (not
    ``$HOME``, which tests point elsewhere)."""
    configured = os.environ.get("ACXFS_AGENTS_DIR")
    if configured:
        return Path(configured)
    return Path(pwd.getpwuid(os.getuid()).pw_dir) / ".cache" / "acxfs-agents"


def pinned_version(agent: str) -> str:
    """The version tests/agents/package.json pins for ``agent`` (a key of PACKAGES)."""
    pins = json.loads(PINS.read_text(encoding="utf-8"))
    pinned = pins["dependencies"] | pins.get("optionalDependencies", {})
    return str(pinned[PACKAGES[agent]])


def binary_path(agent: str, base: Path | None = None) -> Path:
    """Where the pinned ``agent``'s binary is installed (whether it is there or not)."""
    base = agents_dir() if base is None else base
    return base / "node_modules" / BINARIES.get(agent, f".bin/{agent}")


def agent_problem(agent: str, base: Path | None = None) -> str:
    """Why the pinned ``agent`` cannot run from ``base`` ('' when it can)."""
    base = agents_dir() if base is None else base
    binary = binary_path(agent, base)
    if not binary.exists():
        return f"{binary} is missing: run scripts/setup.sh"
    meta = base / "node_modules" / PACKAGES[agent] / "package.json"
    version = json.loads(meta.read_text(encoding="utf-8")).get("version")
    if version != pinned_version(agent):
        return (f"{binary} is {version}, not the pinned {pinned_version(agent)}: "
                "run scripts/setup.sh")
    return ""


def agent_binary(agent: str, base: Path | None = None) -> Path:
    """The pinned ``agent`` binary; RuntimeError (with the reason) when it is not installed."""
    problem = agent_problem(agent, base)
    if problem:
        raise RuntimeError(problem)
    return binary_path(agent, base)



@dataclass
class AgentRun:
    """A started agent run: its process (the relay, parent of the agent) and its mock."""

    process: subprocess.Popen[str]
    mock: MockAPI
    timeout: float
    started: float = field(default_factory=time.monotonic)
    stdout: str = ""
    stderr: str = ""
    started_file: Path | None = None
    stdout_file: Path | None = None  # where the agent's output went instead of a pipe

    def agent_started(self) -> float | None:
        """When the relay started the agent (``time.monotonic()``), if it was asked to say."""
        if self.started_file is None:
            return None
        try:
            return float(self.started_file.read_text(encoding="ascii"))
        except (OSError, ValueError):
            return None

    def wait(self) -> int:
        """Wait for the run to end (bounded); its exit code. The agent's output is kept in
        ``stdout``/``stderr``; a run still going after its timeout is killed (code 124)."""
        left = max(1.0, self.timeout + 10.0 - (time.monotonic() - self.started))
        try:
            self.stdout, self.stderr = self.process.communicate(timeout=left)
        except subprocess.TimeoutExpired:
            self.kill()
            self.stdout, self.stderr = self.process.communicate(timeout=10)
            return 124
        finally:
            self._read_stdout_file()
        return self.process.returncode

    def _read_stdout_file(self) -> None:
        if self.stdout_file is not None:
            try:
                self.stdout = self.stdout_file.read_text(encoding="utf-8", errors="replace")
            except OSError:
                self.stdout = ""

    def kill(self) -> None:
        """End the agent's process group (the relay does, on SIGTERM), then the relay."""
        with contextlib.suppress(ProcessLookupError):
            self.process.terminate()
        try:
            self.process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.process.pid, signal.SIGKILL)

    def describe(self) -> str:
        """The run's output, for an assertion message."""
        return (f"exit {self.process.returncode}; stdout: {self.stdout[-2000:]!r}; "
                f"stderr: {self.stderr[-2000:]!r}")


def base_env(home: Path) -> dict[str, str]:
    """What every agent run's environment starts from: HOME, a plain PATH and locale, and every
    proxy variable at a closed port (loopback itself excepted, for the mock)."""
    env = {
        "HOME": str(home),
        "USER": os.environ.get("USER", "root"),
        "PATH": os.pathsep.join([os.path.dirname(sys.executable), "/usr/local/bin",
                                 "/usr/bin", "/bin", "/usr/sbin", "/sbin"]),
        "LANG": "C.UTF-8",
        "TERM": "dumb",
        "NO_COLOR": "1",
        "TMPDIR": tempfile.gettempdir(),
    }
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "WS_PROXY", "WSS_PROXY"):
        env[name] = env[name.lower()] = CLOSED_PROXY
    env["NO_PROXY"] = env["no_proxy"] = "127.0.0.1,localhost"  # the mock only
    return env


def start_agent(argv: Sequence[str], env: Mapping[str, str], cwd: Path, mock: MockAPI, *,
                timeout: float = RUN_TIMEOUT, started: Path | None = None,
                stdout_file: Path | None = None) -> AgentRun:
    """Start ``argv`` (``@PORT@`` replaced by the relay's port) with exactly ``env``, in
    ``cwd``, in a new network namespace holding only loopback and the relay to ``mock``
    (which must be started); with ``started``, the relay writes there when it started the
    agent (``AgentRun.agent_started``). With ``stdout_file`` the agent's output goes to that
    file (created or truncated) instead of a pipe, and ``AgentRun.stdout`` is read from it when
    the run ends: an agent that exits before a pipe has taken all it wrote (OpenCode, whose
    output is larger than a pipe's buffer) loses nothing into a file."""
    marker = ["--started", str(started)] if started is not None else []
    relay = [sys.executable, "-I", str(RELAY), "relay", mock.socket_path, str(timeout),
             *marker, "--", *argv]
    with contextlib.ExitStack() as stack:
        out: int | IO[bytes] = subprocess.PIPE
        if stdout_file is not None:
            out = stack.enter_context(stdout_file.open("wb"))
        process = subprocess.Popen(["unshare", "-n", *relay], env=dict(env), cwd=cwd,
                                   stdin=subprocess.DEVNULL, stdout=out,
                                   stderr=subprocess.PIPE, text=True, start_new_session=True)
    return AgentRun(process, mock, timeout, started_file=started, stdout_file=stdout_file)


def claude_env(home: Path) -> dict[str, str]:
    """Claude Code's environment: the mock's base URL, a dummy key, no nonessential traffic."""
    return base_env(home) | {
        "ANTHROPIC_BASE_URL": f"http://127.0.0.1:{PORT_TOKEN}",
        "ANTHROPIC_API_KEY": "sk-ant-mock-0000",
        "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
        "DISABLE_AUTOUPDATER": "1",
        "DISABLE_TELEMETRY": "1",
        "DISABLE_ERROR_REPORTING": "1",
        "CLAUDE_CODE_DISABLE_TERMINAL_TITLE": "1",
    }


def start_claude(home: Path, cwd: Path, mock: AnthropicMock, *, prompt: str = "hello",
                 args: Sequence[str] = (), timeout: float = RUN_TIMEOUT,
                 base: Path | None = None, started: Path | None = None) -> AgentRun:
    """Start ``claude -p PROMPT ARGS...`` with HOME=home in cwd against ``mock``."""
    argv = [str(agent_binary("claude", base)), "-p", prompt, *args]
    return start_agent(argv, claude_env(home), cwd, mock, timeout=timeout, started=started)


def codex_argv(binary: Path, prompt: str, args: Sequence[str] = ()) -> list[str]:
    """``codex exec`` against the mock as a custom model provider, plugins off."""
    provider = ('{name="acxfs-mock", base_url="http://127.0.0.1:' + PORT_TOKEN + '/v1", '
                'wire_api="responses", supports_websockets=false}')
    return [str(binary), "exec", "--skip-git-repo-check",
            "-c", f"model_providers.mock={provider}", "-c", "model_provider=mock",
            "-c", "model=mock-model",
            "-c", "features.plugins=false", "-c", "features.remote_plugin=false",
            *args, prompt]


def start_codex(home: Path, cwd: Path, mock: ResponsesMock, *, prompt: str = "hello",
                args: Sequence[str] = (), timeout: float = RUN_TIMEOUT,
                base: Path | None = None, started: Path | None = None) -> AgentRun:
    """Start ``codex exec PROMPT`` with HOME=home in cwd against ``mock``."""
    argv = codex_argv(agent_binary("codex", base), prompt, args)
    return start_agent(argv, base_env(home), cwd, mock, timeout=timeout, started=started)


def first_request(run: AgentRun) -> Recorded:
    """Wait for ``run`` to end; its first model request. AssertionError (with the agent's
    output) when it sent none or failed."""
    code = run.wait()
    got = run.mock.model_requests()
    if not got:
        raise AssertionError(f"the agent sent no model request: {run.describe()}")
    if code != 0:
        raise AssertionError(f"the agent failed: {run.describe()}")
    return got[0]


def claude_first_request(home: Path, cwd: Path, *, prompt: str = "hello",
                         args: Sequence[str] = (), timeout: float = RUN_TIMEOUT) -> Recorded:
    """Run ``claude -p PROMPT`` once against a fresh mock; its first model request."""
    with AnthropicMock() as mock:
        return first_request(start_claude(home, cwd, mock, prompt=prompt, args=args,
                                          timeout=timeout))


def codex_first_request(home: Path, cwd: Path, *, prompt: str = "hello",
                        args: Sequence[str] = (), timeout: float = RUN_TIMEOUT) -> Recorded:
    """Run ``codex exec PROMPT`` once against a fresh mock; its first model request."""
    with ResponsesMock() as mock:
        return first_request(start_codex(home, cwd, mock, prompt=prompt, args=args,
                                         timeout=timeout))


def claude_skills(home: Path, cwd: Path, *, prompt: str = "hello", args: Sequence[str] = (),
                  timeout: float = RUN_TIMEOUT) -> list[tuple[str, str]]:
    """Run ``claude -p`` once; the (name, description) skills of its first request."""
    return claude_skills_in(claude_first_request(home, cwd, prompt=prompt, args=args,
                                                 timeout=timeout).body)


def codex_skills(home: Path, cwd: Path, *, prompt: str = "hello", args: Sequence[str] = (),
                 timeout: float = RUN_TIMEOUT) -> list[tuple[str, str]]:
    """Run ``codex exec`` once; the (name, description) skills of its first request."""
    return codex_skills_in(codex_first_request(home, cwd, prompt=prompt, args=args,
                                               timeout=timeout).body)


