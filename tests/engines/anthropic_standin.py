"""A local stand-in for the Anthropic Messages API, enough for the real Claude Code CLI.

It answers ``POST /v1/messages`` (streaming SSE when the body asks for it, plain JSON
otherwise) and nothing else. Its replies are derived from what it was sent, so a test
can tell from the reply alone what the model saw:

- the reply text lists the person's prompts the request carried (system reminders and
  tool results left out), so a resumed conversation shows its earlier prompts;
- with ``tool_commands`` set, each prompt is first answered by one Bash tool call per
  command, in order, one per request, and only then by text; ``tool_uses`` does the
  same with any tool (``{"name": "Write", "input": {...}}``);
- with ``hold_at_step`` set, the request that would ask for that tool step is held until
  ``release`` is set: the CLI is then waiting on the model, in the middle of its turn.

It runs on threads of its own, so a held request never blocks the test's event loop.
"""

from __future__ import annotations

import json
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

HOLD_LIMIT_SECONDS = 120.0


def _blocks(message: dict[str, Any]) -> list[dict[str, Any]]:
    content = message.get("content")
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    return [block for block in content or [] if isinstance(block, dict)]


def _is_prompt(block: dict[str, Any]) -> bool:
    text = block.get("text")
    return block.get("type") == "text" and bool(text) and not text.startswith("<system-reminder>")


def prompts_in(body: dict[str, Any]) -> list[str]:
    """The person's prompts in a Messages request, oldest first."""
    return [
        block["text"]
        for message in body.get("messages", [])
        if message.get("role") == "user"
        for block in _blocks(message)
        if _is_prompt(block)
    ]


def tool_results_since_last_prompt(body: dict[str, Any]) -> int:
    count = 0
    for message in body.get("messages", []):
        if message.get("role") != "user":
            continue
        blocks = _blocks(message)
        if any(_is_prompt(block) for block in blocks):
            count = 0
        count += sum(1 for block in blocks if block.get("type") == "tool_result")
    return count


def reply_text(body: dict[str, Any]) -> str:
    prompts = prompts_in(body)
    return f"stand-in heard {len(prompts)} prompt(s): " + " | ".join(p[:80] for p in prompts)


@dataclass
class AnthropicStandIn:
    tool_commands: list[str] = field(default_factory=list)
    tool_uses: list[dict[str, Any]] = field(default_factory=list)
    pause_seconds: float = 0.0
    hold_at_step: int | None = None
    release: threading.Event = field(default_factory=threading.Event)
    holding: threading.Event = field(default_factory=threading.Event)
    requests: list[dict[str, Any]] = field(default_factory=list)
    other_requests: list[str] = field(default_factory=list)
    # time.perf_counter() of every request's arrival, whatever it asked (bench.real_wake).
    arrivals: list[float] = field(default_factory=list)
    base_url: str = ""
    _server: ThreadingHTTPServer | None = None

    def conversation_requests(self) -> list[dict[str, Any]]:
        """Requests that carried the conversation (the CLI's side requests have no tools)."""
        return [r for r in self.requests if r.get("tools")]

    def prompts_seen(self) -> list[list[str]]:
        """The person's prompts each conversation request carried, request by request."""
        return [prompts_in(request) for request in self.conversation_requests()]

    def tool_results(self) -> list[dict[str, Any]]:
        """Every tool result the CLI sent back, in order (the last request holds them all)."""
        requests = self.conversation_requests()
        if not requests:
            return []
        return [block for message in requests[-1].get("messages", [])
                if message.get("role") == "user" for block in _blocks(message)
                if block.get("type") == "tool_result"]

    def start(self) -> AnthropicStandIn:
        standin = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:
                pass

            def do_GET(self) -> None:
                standin.arrivals.append(time.perf_counter())
                standin.other_requests.append(f"GET {self.path}")
                self._json(404, {"type": "error", "error": {"type": "not_found_error",
                                                             "message": "not served here"}})

            def do_POST(self) -> None:
                standin.arrivals.append(time.perf_counter())
                length = int(self.headers.get("content-length") or 0)
                raw = self.rfile.read(length)
                if not self.path.startswith("/v1/messages") or "count_tokens" in self.path:
                    standin.other_requests.append(f"POST {self.path}")
                    self._json(404, {"type": "error", "error": {"type": "not_found_error",
                                                                 "message": "not served here"}})
                    return
                body = json.loads(raw or b"{}")
                standin.requests.append(body)
                blocks = standin.answer(body)
                if body.get("stream"):
                    self._stream(body, blocks)
                else:
                    self._json(200, standin.message(body, blocks))

            def _json(self, status: int, payload: dict[str, Any]) -> None:
                data = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def _stream(self, body: dict[str, Any], blocks: list[dict[str, Any]]) -> None:
                self.send_response(200)
                self.send_header("content-type", "text/event-stream")
                self.send_header("cache-control", "no-cache")
                self.send_header("connection", "close")
                self.end_headers()
                self.close_connection = True
                try:
                    for name, data in standin.events(body, blocks):
                        self.wfile.write(f"event: {name}\ndata: {json.dumps(data)}\n\n".encode())
                        self.wfile.flush()
                except (BrokenPipeError, ConnectionResetError):
                    pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self.base_url = f"http://127.0.0.1:{self._server.server_address[1]}"
        threading.Thread(target=self._server.serve_forever, daemon=True).start()
        return self

    def stop(self) -> None:
        self.release.set()
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()

    # What the model says ------------------------------------------------------

    def answer(self, body: dict[str, Any]) -> list[dict[str, Any]]:
        if not body.get("tools"):
            return [{"type": "text", "text": "stand-in side answer"}]
        step = tool_results_since_last_prompt(body)
        if self.hold_at_step is not None and step >= self.hold_at_step:
            self.holding.set()
            self.release.wait(HOLD_LIMIT_SECONDS)
        if self.pause_seconds:
            time.sleep(self.pause_seconds)
        uses = self.tool_uses or [
            {"name": "Bash", "input": {"command": command, "description": "stand-in"}}
            for command in self.tool_commands]
        if step < len(uses):
            use = uses[step]
            said = use["input"].get("command") or use["input"].get("file_path") or use["name"]
            return [
                {"type": "text", "text": f"step {step + 1}: running {said}"},
                {"type": "tool_use", "id": f"toolu_{len(self.requests):04d}",
                 "name": use["name"], "input": use["input"]},
            ]
        return [{"type": "text", "text": reply_text(body)}]

    @staticmethod
    def _stop_reason(blocks: list[dict[str, Any]]) -> str:
        return "tool_use" if any(b["type"] == "tool_use" for b in blocks) else "end_turn"

    def message(self, body: dict[str, Any], blocks: list[dict[str, Any]]) -> dict[str, Any]:
        return {
            "id": f"msg_{len(self.requests):04d}",
            "type": "message",
            "role": "assistant",
            "model": body.get("model"),
            "content": blocks,
            "stop_reason": self._stop_reason(blocks),
            "stop_sequence": None,
            "usage": {"input_tokens": 10, "output_tokens": 5},
        }

    def events(self, body: dict[str, Any], blocks: list[dict[str, Any]]):
        start = self.message(body, [])
        start["stop_reason"] = None
        yield "message_start", {"type": "message_start", "message": start}
        for index, block in enumerate(blocks):
            if block["type"] == "text":
                opening = {"type": "text", "text": ""}
                delta = {"type": "text_delta", "text": block["text"]}
            else:
                opening = {**block, "input": {}}
                delta = {"type": "input_json_delta", "partial_json": json.dumps(block["input"])}
            yield "content_block_start", {
                "type": "content_block_start", "index": index, "content_block": opening}
            yield "content_block_delta", {
                "type": "content_block_delta", "index": index, "delta": delta}
            yield "content_block_stop", {"type": "content_block_stop", "index": index}
        yield "message_delta", {
            "type": "message_delta",
            "delta": {"stop_reason": self._stop_reason(blocks), "stop_sequence": None},
            "usage": {"output_tokens": 5},
        }
        yield "message_stop", {"type": "message_stop"}
