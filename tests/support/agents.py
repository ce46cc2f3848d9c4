"""Real coding agents, run headless against loopback mocks of their model APIs, or asked for
their own skill listing.

Invariant: an agent run here reaches nothing but its mock. It runs in a network namespace of its
own that has only loopback (``unshare -n``, then loopback brought up); every proxy variable
points at a closed loopback port; its environment holds only the variables this module sets
(none of the caller's keys or settings leak in); and the only port open in that namespace is a
relay to the mock server of the calling process, which listens on a Unix socket (a Unix socket
is reached by path, so it crosses the namespace boundary; TCP cannot). Every run is bounded by
a timeout, after which the agent's whole process group is killed.

The mocks record every request (method, path, headers, JSON body) and answer model requests
from a script of ``Reply`` values (text, or a tool call to keep a run going across a later
change; a ``hold`` event delays an answer until the test sets it), then ``ok`` for the rest.
``wait_for(n)`` blocks until the n-th model request arrived.

What the agents send, where the skills are:
- Claude Code: ``POST /v1/messages`` (streamed). The skill list is a ``role: "system"`` message
  of ``messages`` (after the first user message): CLAUDE_SKILLS_HEADER, a blank line, then one
  ``- <name>: <description>`` line per skill, built-in skills included. A running Claude Code
  that notices a change in its skill directories (a SKILL.md whose size or mtime changed, or a
  new skill) sends those skills in a new system message of its next request
  (``claude_skill_lists``); it never says that a skill was removed.
- Codex: ``POST /v1/responses`` (streamed). The skill list is a developer message of ``input``:
  a roots table (``- `r0` = `<dir>` ``), CODEX_SKILLS_HEADER, then one
  ``- <name>: <description> (file: r0/<name>/SKILL.md)`` line per skill, its system skills
  (``~/.codex/skills/.system``) included.

Their own skill listings (no model request; ``listed_skills``): ``gemini skills list`` (text:
``<name> [Enabled]`` then indented ``Description:`` and ``Location:`` lines, built-in skills
hidden), ``opencode debug skill`` (JSON: name, description, location, content; a built-in's
location is ``<built-in>``) and ``copilot skill list --json`` (JSON: name, description,
source, path, enabled; a built-in's source is ``builtin``). What each of them needs to list
offline is in ``listing_env``.

The agents are the pinned npm packages of ``tests/agents/package.json``, installed by
``scripts/setup.sh`` under ``$ACXFS_AGENTS_DIR`` (default ``~/.cache/acxfs-agents`` of the
user in the password database). OpenCode is its linux-x64 build, whose binary is not in
``node_modules/.bin``.

Run as a script (``python3 agents.py relay SOCKET TIMEOUT -- ARGV...``) this file is the relay
inside the namespace; that mode uses the standard library only.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import pwd
import re
import select
import signal
import socket
import socketserver
import struct
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any, Self

REPO = Path(__file__).resolve().parent.parent.parent
PINS = REPO / "tests" / "agents" / "package.json"
PORT_TOKEN = "@PORT@"  # replaced by the relay with its loopback port, in argv and environment
CLOSED_PROXY = "http://127.0.0.1:9"  # nothing listens there inside the namespace
RUN_TIMEOUT = 60.0  # seconds for one agent run
PACKAGES = {"claude": "@anthropic-ai/claude-code", "codex": "@openai/codex",
            "gemini": "@google/gemini-cli", "opencode": "opencode-linux-x64",
            "copilot": "@github/copilot"}
BINARIES = {"opencode": "opencode-linux-x64/bin/opencode"}  # below node_modules; else .bin/NAME


# --- the agents ---------------------------------------------------------------------------------


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


# --- what the mocks record and answer -----------------------------------------------------------


@dataclass(frozen=True)
class Recorded:
    """One request a mock received."""

    method: str
    path: str
    headers: Mapping[str, str]
    body: Any  # the decoded JSON body, or None


@dataclass(frozen=True)
class Reply:
    """A scripted answer to one model request: ``text``, or with ``tool`` = (name, input) a
    tool call that keeps the run going; with ``hold``, sent only once that event is set."""

    text: str = "ok"
    tool: tuple[str, Mapping[str, Any]] | None = None
    hold: threading.Event | None = None


class _UnixHTTPServer(socketserver.ThreadingUnixStreamServer):
    daemon_threads = True
    allow_reuse_address = True


class MockAPI:
    """A model API on a Unix socket (the relay puts it on loopback inside the namespace).

    Subclasses say which paths are model requests and how to answer them. Use as a context
    manager, or ``start()``/``close()``."""

    model_path = ""

    def __init__(self, replies: Sequence[Reply] = ()) -> None:
        self.replies = list(replies)
        self.requests: list[Recorded] = []
        self._changed = threading.Condition()
        self._dir = tempfile.mkdtemp(prefix="acxfs-mock-")
        self.socket_path = os.path.join(self._dir, "api.sock")
        self._server: _UnixHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # recording

    def model_requests(self) -> list[Recorded]:
        """Every model request so far, in arrival order."""
        with self._changed:
            return [r for r in self.requests if r.method == "POST" and r.path == self.model_path]

    def wait_for(self, n: int, timeout: float = RUN_TIMEOUT) -> Recorded:
        """Block until the n-th model request (1-based) arrived; TimeoutError otherwise."""
        deadline = time.monotonic() + timeout
        with self._changed:
            while True:
                got = [r for r in self.requests
                       if r.method == "POST" and r.path == self.model_path]
                if len(got) >= n:
                    return got[n - 1]
                left = deadline - time.monotonic()
                if left <= 0:
                    raise TimeoutError(f"{len(got)} model requests after {timeout:.0f} s, "
                                       f"not {n}")
                self._changed.wait(left)

    def _record(self, entry: Recorded) -> int:
        """Keep ``entry``; its 1-based number among the model requests (0: not one)."""
        with self._changed:
            self.requests.append(entry)
            index = 0
            if entry.method == "POST" and entry.path == self.model_path:
                index = sum(1 for r in self.requests
                            if r.method == "POST" and r.path == self.model_path)
            self._changed.notify_all()
            return index

    def reply_for(self, index: int) -> Reply:
        """The scripted reply to model request ``index`` (1-based)."""
        return self.replies[index - 1] if index <= len(self.replies) else Reply()

    def model_reply(self, handler: _Handler, entry: Recorded, index: int) -> Reply | None:
        """The scripted reply to a model request (``POST model_path``), after waiting for its
        ``hold`` (at most RUN_TIMEOUT); any other request is answered 404 here, and gives None."""
        if entry.method != "POST" or entry.path != self.model_path:
            MockAPI.answer(self, handler, entry, index)
            return None
        reply = self.reply_for(index)
        if reply.hold is not None:
            reply.hold.wait(RUN_TIMEOUT)
        return reply

    # answering (overridden)

    def answer(self, handler: _Handler, entry: Recorded, index: int) -> None:
        """Answer one request (``index``: its number among the model requests, 0 if none)."""
        handler.send_json(404, {"error": {"type": "not_found", "message": entry.path}})

    # life cycle

    def start(self) -> Self:
        """Listen on ``socket_path`` in a daemon thread."""
        mock: MockAPI = self

        class Handler(_Handler):
            api = mock

        self._server = _UnixHTTPServer(self.socket_path, Handler)
        self._thread = threading.Thread(target=self._server.serve_forever,
                                        kwargs={"poll_interval": 0.05}, daemon=True)
        self._thread.start()
        return self

    def close(self) -> None:
        """Stop listening and remove the socket; held replies are released."""
        for reply in self.replies:
            if reply.hold is not None:
                reply.hold.set()
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self.socket_path)
        with contextlib.suppress(OSError):
            os.rmdir(self._dir)

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()


class _Handler(BaseHTTPRequestHandler):
    """Records each request on ``api``, then lets it answer."""

    api: MockAPI
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def _handle(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        try:
            body = json.loads(raw) if raw else None
        except ValueError:
            body = None
        entry = Recorded(self.command, self.path.split("?", 1)[0],
                         {k.lower(): v for k, v in self.headers.items()}, body)
        self.api.answer(self, entry, self.api._record(entry))

    do_GET = do_POST = do_HEAD = do_PUT = do_DELETE = _handle

    def send_json(self, status: int, payload: Any) -> None:
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def send_events(self, events: Sequence[tuple[str | None, Any]]) -> None:
        """A text/event-stream answer, then the connection closes."""
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Connection", "close")
        self.end_headers()
        self.close_connection = True
        for name, data in events:
            head = f"event: {name}\n" if name else ""
            self.wfile.write(f"{head}data: {json.dumps(data)}\n\n".encode())
        self.wfile.flush()


class AnthropicMock(MockAPI):
    """The Messages API (``POST /v1/messages``, streaming or not, and ``count_tokens``)."""

    model_path = "/v1/messages"

    def answer(self, handler: _Handler, entry: Recorded, index: int) -> None:
        body = entry.body if isinstance(entry.body, dict) else {}
        if entry.method == "POST" and entry.path == "/v1/messages/count_tokens":
            handler.send_json(200, {"input_tokens": 1})
            return
        reply = self.model_reply(handler, entry, index)
        if reply is None:
            return
        model = str(body.get("model", "claude-mock"))
        if reply.tool is not None:
            name, args = reply.tool
            block: dict[str, Any] = {"type": "tool_use", "id": f"toolu_mock{index}",
                                     "name": name, "input": dict(args)}
            stop = "tool_use"
        else:
            block = {"type": "text", "text": reply.text}
            stop = "end_turn"
        usage = {"input_tokens": 1, "output_tokens": 1}
        message = {"id": f"msg_mock{index}", "type": "message", "role": "assistant",
                   "model": model, "stop_reason": stop, "stop_sequence": None, "usage": usage}
        if not body.get("stream"):
            handler.send_json(200, {**message, "content": [block]})
            return
        if block["type"] == "tool_use":
            start = {**block, "input": {}}
            delta = {"type": "input_json_delta", "partial_json": json.dumps(block["input"])}
        else:
            start = {"type": "text", "text": ""}
            delta = {"type": "text_delta", "text": reply.text}
        handler.send_events([
            ("message_start", {"type": "message_start",
                               "message": {**message, "content": [], "stop_reason": None}}),
            ("content_block_start", {"type": "content_block_start", "index": 0,
                                     "content_block": start}),
            ("content_block_delta", {"type": "content_block_delta", "index": 0, "delta": delta}),
            ("content_block_stop", {"type": "content_block_stop", "index": 0}),
            ("message_delta", {"type": "message_delta",
                               "delta": {"stop_reason": stop, "stop_sequence": None},
                               "usage": {"output_tokens": 1}}),
            ("message_stop", {"type": "message_stop"}),
        ])


class ResponsesMock(MockAPI):
    """The OpenAI Responses API (``POST /v1/responses``, streamed), as Codex uses it."""

    model_path = "/v1/responses"

    def answer(self, handler: _Handler, entry: Recorded, index: int) -> None:
        if entry.method == "GET" and entry.path == "/v1/models":
            handler.send_json(200, {"object": "list", "data": []})
            return
        reply = self.model_reply(handler, entry, index)
        if reply is None:
            return
        body = entry.body if isinstance(entry.body, dict) else {}
        rid = f"resp_mock{index}"
        if reply.tool is not None:
            name, args = reply.tool
            item: dict[str, Any] = {"type": "function_call", "id": f"fc_mock{index}",
                                    "call_id": f"call_mock{index}", "name": name,
                                    "arguments": json.dumps(dict(args)), "status": "completed"}
        else:
            item = {"type": "message", "id": f"msg_mock{index}", "role": "assistant",
                    "status": "completed",
                    "content": [{"type": "output_text", "text": reply.text, "annotations": []}]}
        usage = {"input_tokens": 1, "input_tokens_details": {"cached_tokens": 0},
                 "output_tokens": 1, "output_tokens_details": {"reasoning_tokens": 0},
                 "total_tokens": 2}
        response = {"id": rid, "object": "response", "model": str(body.get("model", "mock")),
                    "status": "in_progress", "output": []}
        events: list[tuple[str | None, Any]] = [
            ("response.created", {"type": "response.created", "response": response}),
            ("response.output_item.added", {"type": "response.output_item.added",
                                            "output_index": 0, "item": item}),
        ]
        if item["type"] == "message":
            events.append(("response.output_text.delta",
                           {"type": "response.output_text.delta", "item_id": item["id"],
                            "output_index": 0, "content_index": 0, "delta": reply.text}))
        events += [
            ("response.output_item.done", {"type": "response.output_item.done",
                                           "output_index": 0, "item": item}),
            ("response.completed", {"type": "response.completed",
                                    "response": {**response, "status": "completed",
                                                 "output": [item], "usage": usage}}),
        ]
        handler.send_events(events)


# --- where the skills are in a request ----------------------------------------------------------

CLAUDE_SKILLS_HEADER = "The following skills are available for use with the Skill tool:"
CODEX_SKILLS_HEADER = "### Available skills"
_ENTRY = re.compile(r"^- ([^\s:]+): (.*)$")
_CODEX_ENTRY = re.compile(r"^- ([^\s:]+): (.*) \(file: ([^()]*)\)$")
_CODEX_ROOT = re.compile(r"^- `([^`]+)` = `([^`]+)`$")


def _strings(value: Any) -> Iterator[str]:
    """Every string in a decoded JSON value, depth first, in order."""
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for item in value.values():
            yield from _strings(item)
    elif isinstance(value, list):
        for item in value:
            yield from _strings(item)


def _sections(body: Any, header: str) -> list[list[str]]:
    """For each string of ``body`` that holds ``header``, in order: the lines after it, up to
    the first blank line after the entries (or the end of that string)."""
    found = []
    for text in _strings(body):
        if header not in text:
            continue
        lines: list[str] = []
        for line in text.split(header, 1)[1].splitlines():
            if not line.strip():
                if lines:
                    break
                continue
            lines.append(line)
        found.append(lines)
    return found


def _claude_entries(lines: Sequence[str]) -> list[tuple[str, str]]:
    entries: list[tuple[str, str]] = []
    for line in lines:
        match = _ENTRY.match(line)
        if match:
            entries.append((match.group(1), match.group(2)))
        elif entries:
            name, description = entries[-1]
            entries[-1] = (name, description + "\n" + line)
    return entries


def claude_skill_lists(body: Any) -> list[list[tuple[str, str]]]:
    """Every skill list of one Messages request body, in order. A later request of a running
    Claude Code carries the conversation so far: its first list is the one it started with, and
    each change to the skill directories it noticed since adds a system message listing the
    skills added or changed."""
    return [_claude_entries(lines) for lines in _sections(body, CLAUDE_SKILLS_HEADER)]


def claude_skills_in(body: Any) -> list[tuple[str, str]]:
    """The (name, description) entries of the first skill list of one Messages request body:
    the ``- <name>: <description>`` lines after CLAUDE_SKILLS_HEADER (a description's
    continuation lines joined with newlines). Empty when the request lists no skills."""
    lists = claude_skill_lists(body)
    return lists[0] if lists else []


def codex_skill_files(body: Any) -> dict[str, str]:
    """Name -> the absolute SKILL.md path each entry of a Codex skill list names (its short
    ``rN/...`` path expanded with the skill roots table of the same message)."""
    roots: dict[str, str] = {}
    files: dict[str, str] = {}
    for text in _strings(body):
        if CODEX_SKILLS_HEADER not in text:
            continue
        for line in text.splitlines():
            root = _CODEX_ROOT.match(line)
            if root:
                roots[root.group(1)] = root.group(2)
            entry = _CODEX_ENTRY.match(line)
            if entry:
                short = entry.group(3)
                head, _, rest = short.partition("/")
                files[entry.group(1)] = f"{roots[head]}/{rest}" if head in roots else short
        break
    return files


def codex_skills_in(body: Any) -> list[tuple[str, str]]:
    """The (name, description) entries of the skill list in one Responses request body: the
    ``- <name>: <description> (file: <path>)`` lines after CODEX_SKILLS_HEADER."""
    entries = []
    for line in next(iter(_sections(body, CODEX_SKILLS_HEADER)), []):
        match = _CODEX_ENTRY.match(line)
        if match:
            entries.append((match.group(1), match.group(2)))
    return entries


# --- running an agent in the namespace ----------------------------------------------------------


@dataclass
class AgentRun:
    """A started agent run: its process (the relay, parent of the agent) and its mock."""

    process: subprocess.Popen[str]
    mock: MockAPI
    timeout: float
    started: float = field(default_factory=time.monotonic)
    stdout: str = ""
    stderr: str = ""

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
        return self.process.returncode

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


def _base_env(home: Path) -> dict[str, str]:
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
                timeout: float = RUN_TIMEOUT) -> AgentRun:
    """Start ``argv`` (``@PORT@`` replaced by the relay's port) with exactly ``env``, in
    ``cwd``, in a new network namespace holding only loopback and the relay to ``mock``
    (which must be started)."""
    relay = [sys.executable, "-I", str(Path(__file__).resolve()), "relay", mock.socket_path,
             str(timeout), "--", *argv]
    process = subprocess.Popen(["unshare", "-n", *relay], env=dict(env), cwd=cwd,
                               stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True, start_new_session=True)
    return AgentRun(process, mock, timeout)


def claude_env(home: Path) -> dict[str, str]:
    """Claude Code's environment: the mock's base URL, a dummy key, no nonessential traffic."""
    return _base_env(home) | {
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
                 base: Path | None = None) -> AgentRun:
    """Start ``claude -p PROMPT ARGS...`` with HOME=home in cwd against ``mock``."""
    argv = [str(agent_binary("claude", base)), "-p", prompt, *args]
    return start_agent(argv, claude_env(home), cwd, mock, timeout=timeout)


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
                base: Path | None = None) -> AgentRun:
    """Start ``codex exec PROMPT`` with HOME=home in cwd against ``mock``."""
    argv = codex_argv(agent_binary("codex", base), prompt, args)
    return start_agent(argv, _base_env(home), cwd, mock, timeout=timeout)


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
    env = _base_env(home)
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


# --- the relay, inside the namespace ------------------------------------------------------------

_SIOCGIFFLAGS = 0x8913
_SIOCSIFFLAGS = 0x8914
_IFF_UP = 0x1


def loopback_up() -> None:
    """Bring ``lo`` up in this (new) network namespace, as ``ip link set lo up`` does."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        request = struct.pack("16sH14x", b"lo", 0)
        flags = struct.unpack("16sH14x", fcntl.ioctl(sock, _SIOCGIFFLAGS, request))[1]
        fcntl.ioctl(sock, _SIOCSIFFLAGS, struct.pack("16sH14x", b"lo", flags | _IFF_UP))


def _pump(a: socket.socket, b: socket.socket) -> None:
    try:
        while True:
            ready, _, _ = select.select([a, b], [], [], 1.0)
            for src in ready:
                data = src.recv(65536)
                if not data:
                    return
                (b if src is a else a).sendall(data)
    except OSError:
        pass
    finally:
        a.close()
        b.close()


def _relay(listener: socket.socket, target: str) -> None:
    while True:
        try:
            conn, _ = listener.accept()
        except OSError:
            return
        upstream = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            upstream.connect(target)
        except OSError:
            conn.close()
            upstream.close()
            continue
        threading.Thread(target=_pump, args=(conn, upstream), daemon=True).start()


def relay_main(argv: Sequence[str]) -> int:
    """``relay SOCKET TIMEOUT -- ARGV...``: loopback up, 127.0.0.1:<port> relayed to SOCKET,
    then ARGV run (``@PORT@`` replaced) and its exit code returned (124 after TIMEOUT)."""
    if len(argv) < 4 or argv[0] != "relay" or argv[3] != "--":
        print("usage: agents.py relay SOCKET TIMEOUT -- ARGV...", file=sys.stderr)
        return 2
    target, timeout, command = argv[1], float(argv[2]), list(argv[4:])
    loopback_up()
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.bind(("127.0.0.1", 0))
    listener.listen(64)
    port = str(listener.getsockname()[1])
    threading.Thread(target=_relay, args=(listener, target), daemon=True).start()
    env = {k: v.replace(PORT_TOKEN, port) for k, v in os.environ.items()}
    child = subprocess.Popen([a.replace(PORT_TOKEN, port) for a in command], env=env,
                             stdin=subprocess.DEVNULL, start_new_session=True)

    def end(signum: int, frame: object) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(child.pid, signal.SIGKILL)
        os._exit(128 + signum)

    signal.signal(signal.SIGTERM, end)
    try:
        return child.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        print(f"agents.py relay: the agent ran past {timeout:.0f} s: killed", file=sys.stderr)
        return 124
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(child.pid, signal.SIGKILL)  # the agent and whatever it left running


def namespace_problem() -> str:
    """Why an agent cannot be run in a loopback-only namespace here ('' when it can)."""
    probe = [sys.executable, "-I", "-c",
             "import sys; sys.path.insert(0, sys.argv[1]); import agents; agents.loopback_up();"
             "print(open('/proc/net/dev').read().count(':'))",
             str(Path(__file__).resolve().parent)]
    try:
        done = subprocess.run(["unshare", "-n", *probe], capture_output=True, text=True,
                              timeout=20, stdin=subprocess.DEVNULL, check=False)
    except (OSError, subprocess.TimeoutExpired) as e:
        return f"unshare -n failed: {e}"
    if done.returncode != 0:
        return f"unshare -n failed: {done.stderr.strip()[-300:]}"
    if done.stdout.strip() != "1":
        return f"the new namespace has {done.stdout.strip()} interfaces, not only lo"
    return ""


if __name__ == "__main__":
    sys.exit(relay_main(sys.argv[1:]))
