"""A local stand-in for the OpenAI Responses API, enough for the real Codex CLI.

It answers ``POST /v1/responses`` with a Server-Sent Events stream. Like the Anthropic
stand-in, its replies are derived from what it was sent: the reply text lists the
person's prompts the request carried, so a resumed thread shows its earlier prompts.
With ``tool_commands`` set, each prompt is first answered by one shell tool call per
command, in order, using the shell tool the CLI offered in that request.
"""

from __future__ import annotations

import json
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

# Codex wraps its own context (instructions, environment) in tagged user messages.
_CONTEXT_PREFIXES = ("<environment_context>", "<user_instructions>", "# AGENTS.md", "<permissions")


def _texts(item: dict[str, Any]) -> list[str]:
    content = item.get("content")
    if isinstance(content, str):
        return [content]
    return [
        part.get("text", "")
        for part in content or []
        if isinstance(part, dict) and part.get("type") in ("input_text", "text")
    ]


def prompts_in(body: dict[str, Any]) -> list[str]:
    """The person's prompts in a Responses request, oldest first."""
    prompts = []
    for item in body.get("input", []):
        if item.get("type", "message") != "message" or item.get("role") != "user":
            continue
        for text in _texts(item):
            if text and not text.lstrip().startswith(_CONTEXT_PREFIXES):
                prompts.append(text)
    return prompts


def tool_outputs_since_last_prompt(body: dict[str, Any]) -> int:
    count = 0
    for item in body.get("input", []):
        kind = item.get("type", "message")
        if kind == "message" and item.get("role") == "user":
            if any(t and not t.lstrip().startswith(_CONTEXT_PREFIXES) for t in _texts(item)):
                count = 0
        elif kind in ("function_call_output", "custom_tool_call_output"):
            count += 1
    return count


def reply_text(body: dict[str, Any]) -> str:
    prompts = prompts_in(body)
    return f"stand-in heard {len(prompts)} prompt(s): " + " | ".join(p[:80] for p in prompts)


def shell_call(body: dict[str, Any], command: str, call_id: str) -> dict[str, Any]:
    """A call of whichever shell tool the CLI offered, with ``command`` as its input."""
    names = [tool.get("name") for tool in body.get("tools", []) if isinstance(tool, dict)]
    if "exec_command" in names:
        arguments = {"cmd": command}
        name = "exec_command"
    elif "shell_command" in names:
        arguments = {"command": command}
        name = "shell_command"
    else:
        arguments = {"command": ["bash", "-lc", command]}
        name = "shell"
    return {
        "type": "function_call",
        "id": f"fc_{call_id}",
        "call_id": call_id,
        "name": name,
        "arguments": json.dumps(arguments),
    }


@dataclass
class ResponsesStandIn:
    tool_commands: list[str] = field(default_factory=list)
    requests: list[dict[str, Any]] = field(default_factory=list)
    other_requests: list[str] = field(default_factory=list)
    base_url: str = ""
    _server: ThreadingHTTPServer | None = None

    def prompts_seen(self) -> list[list[str]]:
        """The person's prompts each request carried, request by request."""
        return [prompts_in(request) for request in self.requests]

    def tool_outputs(self) -> list[str]:
        """What the CLI sent back of each tool call, as the last request carries them."""
        if not self.requests:
            return []
        items = self.requests[-1].get("input") or []
        return [str(item.get("output")) for item in items
                if isinstance(item, dict) and item.get("type") == "function_call_output"]

    def start(self) -> ResponsesStandIn:
        standin = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:
                pass

            def do_GET(self) -> None:
                standin.other_requests.append(f"GET {self.path}")
                self._json(404, {"error": {"message": "not served here"}})

            def do_POST(self) -> None:
                length = int(self.headers.get("content-length") or 0)
                raw = self.rfile.read(length)
                if self.path.rstrip("/") != "/v1/responses":
                    standin.other_requests.append(f"POST {self.path}")
                    self._json(404, {"error": {"message": "not served here"}})
                    return
                body = json.loads(raw or b"{}")
                standin.requests.append(body)
                self.send_response(200)
                self.send_header("content-type", "text/event-stream")
                self.send_header("cache-control", "no-cache")
                self.send_header("connection", "close")
                self.end_headers()
                self.close_connection = True
                try:
                    for event in standin.events(body):
                        data = json.dumps(event)
                        self.wfile.write(f"event: {event['type']}\ndata: {data}\n\n".encode())
                        self.wfile.flush()
                except (BrokenPipeError, ConnectionResetError):
                    pass

            def _json(self, status: int, payload: dict[str, Any]) -> None:
                data = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self.base_url = f"http://127.0.0.1:{self._server.server_address[1]}/v1"
        threading.Thread(target=self._server.serve_forever, daemon=True).start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()

    def output(self, body: dict[str, Any]) -> list[dict[str, Any]]:
        number = len(self.requests)
        step = tool_outputs_since_last_prompt(body)
        if step < len(self.tool_commands):
            return [
                self._message(f"step {step + 1}: running {self.tool_commands[step]}", number),
                shell_call(body, self.tool_commands[step], f"call_{number:04d}"),
            ]
        return [self._message(reply_text(body), number)]

    @staticmethod
    def _message(text: str, number: int) -> dict[str, Any]:
        return {
            "type": "message",
            "id": f"msg_{number:04d}",
            "role": "assistant",
            "status": "completed",
            "content": [{"type": "output_text", "text": text, "annotations": []}],
        }

    def events(self, body: dict[str, Any]):
        response_id = f"resp_{len(self.requests):04d}"
        yield {"type": "response.created", "response": {"id": response_id}}
        for index, item in enumerate(self.output(body)):
            yield {"type": "response.output_item.added", "output_index": index, "item": item}
            yield {"type": "response.output_item.done", "output_index": index, "item": item}
        yield {
            "type": "response.completed",
            "response": {
                "id": response_id,
                "usage": {
                    "input_tokens": 10,
                    "input_tokens_details": {"cached_tokens": 0},
                    "output_tokens": 5,
                    "output_tokens_details": {"reasoning_tokens": 0},
                    "total_tokens": 15,
                },
            },
        }
