"""Reading the Claude Code CLI's ``--output-format stream-json`` lines (pure).

One JSON object per line: a ``system``/``init`` line naming the conversation
id, ``assistant`` lines with text and tool calls, ``user`` lines carrying tool
results, and a final ``result`` line. Anything else is ignored, so a newer CLI
that adds line types does not break the adapter.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from .base import EngineOutput


@dataclass
class ClaudeStream:
    outputs: list[EngineOutput] = field(default_factory=list)
    session_id: str | None = None
    finished: bool = False
    failed: bool = False

    def feed(self, line: str) -> None:
        message = _parse(line)
        if message is None:
            return
        kind = message.get("type")
        if kind == "system" and message.get("subtype") == "init":
            self._note_session(message)
        elif kind == "assistant":
            self._read_assistant(message)
        elif kind == "user":
            self._read_tool_results(message)
        elif kind == "result":
            self._read_result(message)

    def _note_session(self, message: dict[str, Any]) -> None:
        session_id = message.get("session_id")
        if isinstance(session_id, str) and session_id:
            self.session_id = session_id

    def _read_assistant(self, message: dict[str, Any]) -> None:
        for block in _content_blocks(message):
            if block.get("type") == "text":
                text = block.get("text")
                if isinstance(text, str) and text.strip():
                    self.outputs.append(EngineOutput("chat_assistant", text))
            elif block.get("type") == "tool_use":
                self.outputs.append(
                    EngineOutput("command", command_text(block.get("name"), block.get("input")))
                )

    def _read_tool_results(self, message: dict[str, Any]) -> None:
        for block in _content_blocks(message):
            if block.get("type") == "tool_result":
                text = tool_result_text(block.get("content"))
                if text:
                    self.outputs.append(EngineOutput("terminal", text))

    def _read_result(self, message: dict[str, Any]) -> None:
        self._note_session(message)
        self.finished = True
        subtype = message.get("subtype") if isinstance(message.get("subtype"), str) else "unknown"
        self.failed = subtype != "success" or message.get("is_error") is True
        self.outputs.append(EngineOutput("outcome", self._outcome_text(message, subtype)))

    def _outcome_text(self, message: dict[str, Any], subtype: str) -> str:
        details = []
        num_turns = message.get("num_turns")
        if isinstance(num_turns, int):
            details.append(f"{num_turns} turn{'' if num_turns == 1 else 's'}")
        duration_ms = message.get("duration_ms")
        if isinstance(duration_ms, (int, float)):
            details.append(f"{duration_ms / 1000:.1f} s")
        text = subtype + (f" ({', '.join(details)})" if details else "")
        result = message.get("result")
        # The result usually repeats the last reply word for word; keep it only when it differs.
        if isinstance(result, str) and result.strip() and result.strip() != self._last_reply():
            text += "\n" + result
        return text

    def _last_reply(self) -> str:
        for output in reversed(self.outputs):
            if output.kind == "chat_assistant":
                return output.content.strip()
        return ""


def command_text(name: Any, tool_input: Any) -> str:
    label = name if isinstance(name, str) and name else "tool"
    if isinstance(tool_input, dict) and isinstance(tool_input.get("command"), str):
        return f"{label}: {tool_input['command']}"
    if tool_input in (None, {}):
        return label
    return f"{label} {json.dumps(tool_input, ensure_ascii=False, sort_keys=True)}"


def tool_result_text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = [
            block["text"]
            for block in content
            if isinstance(block, dict)
            and block.get("type") == "text"
            and isinstance(block.get("text"), str)
        ]
        return "\n".join(parts)
    return ""


def _parse(line: str) -> dict[str, Any] | None:
    line = line.strip()
    if not line.startswith("{"):
        return None
    try:
        value = json.loads(line)
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


def _content_blocks(message: dict[str, Any]) -> list[dict[str, Any]]:
    body = message.get("message")
    content = body.get("content") if isinstance(body, dict) else None
    if not isinstance(content, list):
        return []
    return [block for block in content if isinstance(block, dict)]
