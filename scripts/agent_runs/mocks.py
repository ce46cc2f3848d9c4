"""Loopback mocks of the agents' model APIs: they record every request and answer model
requests from a script.

A mock listens on a Unix socket (the relay of `scripts.agent_runs.relay` puts it on loopback
inside the agent's namespace), records every request (method, path, headers, JSON body, arrival
time) and answers model requests from a script of ``Reply`` values (text, or a tool call to keep
a run going across a later change; a ``hold`` event delays an answer until the caller sets it),
then ``ok`` for the rest. ``wait_for(n)`` blocks until the n-th model request arrived.

- `AnthropicMock`: Claude Code's Messages API (``POST /v1/messages``, streamed or not, and
  ``count_tokens``).
- `ResponsesMock`: the OpenAI Responses API as Codex uses it (``POST /v1/responses``, streamed).
"""

from __future__ import annotations

import contextlib
import json
import os
import socketserver
import tempfile
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler
from typing import Any, Self

RUN_TIMEOUT = 60.0  # seconds for one agent run


@dataclass(frozen=True)
class Recorded:
    """One request a mock received."""

    method: str
    path: str
    headers: Mapping[str, str]
    body: Any  # the decoded JSON body, or None
    at: float = 0.0  # time.monotonic() when it had arrived whole


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
                         {k.lower(): v for k, v in self.headers.items()}, body, time.monotonic())
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


