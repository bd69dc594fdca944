"""Reading the Claude Code CLI's ``--output-format stream-json`` lines (pure).

One JSON object per line, written as the CLI goes: a ``system``/``init`` line naming
the conversation it runs on, ``assistant`` lines (one content block each: text or a
tool call), ``user`` lines carrying tool results, and a final ``result`` line.
``feed`` turns each line into the outputs it holds, so they can be published as they
arrive. Line types this module does not know (a newer CLI adds some) are noted in
``unknown_types`` and otherwise skipped.

Only the ``init`` line says which conversation the CLI really runs on. The ``result``
line is no proof: Claude Code 2.1 refuses ``--resume`` of a conversation it cannot
find with exit code 1 and a ``result`` line that carries the *requested* id,
``is_error: true`` and no ``init`` line at all.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from .base import EngineOutput
from .json_lines import parse_object
from .permissions import claude_refusal, tool_target
from .tool_errors import failed_tool_text
from .transcript_marks import transcript_entry_id

# System lines other than init (status, compaction, hooks) carry nothing for the timeline.
_QUIET_TYPES = frozenset({"system"})


@dataclass
class ClaudeStream:
    # The conversation the CLI runs on, from its init line; None until that line.
    session_id: str | None = None
    finished: bool = False
    failed: bool = False
    # The CLI's own error messages from its result line.
    errors: list[str] = field(default_factory=list)
    unknown_types: set[str] = field(default_factory=set)
    # Tool results the CLI flagged is_error (a failed command, a refused tool).
    failed_tools: int = 0
    _last_reply: str = ""

    def feed(self, line: str) -> list[EngineOutput]:
        message = parse_object(line)
        if message is None:
            return []
        kind = message.get("type")
        if kind == "system" and message.get("subtype") == "init":
            session_id = message.get("session_id")
            if isinstance(session_id, str) and session_id:
                self.session_id = session_id
            return []
        if kind == "assistant":
            return self._read_assistant(message)
        if kind == "user":
            return self._read_tool_results(message)
        if kind == "result":
            return [self._read_result(message)]
        if kind not in _QUIET_TYPES:
            self.unknown_types.add(str(kind))
        return []

    def _read_assistant(self, message: dict[str, Any]) -> list[EngineOutput]:
        outputs = []
        for index, block in _content_blocks(message):
            entry_id = self._entry_id(message, index)
            if block.get("type") == "text":
                text = block.get("text")
                if isinstance(text, str) and text.strip():
                    self._last_reply = text.strip()
                    outputs.append(EngineOutput("chat_assistant", text, entry_id))
            elif block.get("type") == "tool_use":
                text = command_text(block.get("name"), block.get("input"))
                outputs.append(EngineOutput("command", text, entry_id))
        return outputs

    def _read_tool_results(self, message: dict[str, Any]) -> list[EngineOutput]:
        outputs = []
        for index, block in _content_blocks(message):
            entry_id = self._entry_id(message, index)
            if block.get("type") == "tool_result":
                text = tool_result_text(block.get("content"))
                if block.get("is_error") is True:
                    self.failed_tools += 1
                    outputs.append(EngineOutput("terminal", failed_tool_text(text), entry_id))
                elif text:
                    outputs.append(EngineOutput("terminal", text, entry_id))
        return outputs

    def _entry_id(self, message: dict[str, Any], index: int) -> str | None:
        """The id `seedline import` gives this block of the same record in the transcript."""
        session_id = message.get("session_id") or self.session_id
        record_id = message.get("uuid")
        if not (isinstance(session_id, str) and session_id and isinstance(record_id, str)
                and record_id):
            return None
        return transcript_entry_id("claude", session_id, record_id, index)

    def _read_result(self, message: dict[str, Any]) -> EngineOutput:
        self.finished = True
        subtype = message.get("subtype") if isinstance(message.get("subtype"), str) else "unknown"
        self.failed = subtype != "success" or message.get("is_error") is True
        errors = message.get("errors")
        if isinstance(errors, list):
            self.errors = [e for e in errors if isinstance(e, str) and e]
        return EngineOutput("outcome", self._outcome_text(message, subtype), ends_turn=True)

    def _outcome_text(self, message: dict[str, Any], subtype: str) -> str:
        details = []
        num_turns = message.get("num_turns")
        if isinstance(num_turns, int):
            details.append(f"{num_turns} turn{'' if num_turns == 1 else 's'}")
        duration_ms = message.get("duration_ms")
        if isinstance(duration_ms, (int, float)):
            details.append(f"{duration_ms / 1000:.1f} s")
        if subtype == "success" and self.failed_tools:
            # The CLI says success whenever the model finished; a turn whose tools failed
            # or were refused is not told as one.
            subtype = f"finished with {self.failed_tools} failed tool call" + (
                "" if self.failed_tools == 1 else "s")
        text = subtype + (f" ({', '.join(details)})" if details else "")
        result = message.get("result")
        # The result usually repeats the last reply word for word; keep it only when it differs.
        if isinstance(result, str) and result.strip() and result.strip() != self._last_reply:
            text += "\n" + result
        for error in self.errors:
            text += "\n" + error
        for refusal in _refusals(message.get("permission_denials")):
            text += "\n" + refusal
        return text


def _refusals(denials: Any) -> list[str]:
    """A sentence per tool call the CLI refused for want of permission, naming the
    setting that allows it (the same call refused twice is said once)."""
    said: list[str] = []
    for denial in denials if isinstance(denials, list) else []:
        if not isinstance(denial, dict) or not isinstance(denial.get("tool_name"), str):
            continue
        sentence = claude_refusal(denial["tool_name"], tool_target(denial.get("tool_input")))
        if sentence not in said:
            said.append(sentence)
    return said


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


def _content_blocks(message: dict[str, Any]) -> list[tuple[int, dict[str, Any]]]:
    """(place in the record's content, block): the place is part of the entry id."""
    body = message.get("message")
    content = body.get("content") if isinstance(body, dict) else None
    if not isinstance(content, list):
        return []
    return [(index, block) for index, block in enumerate(content) if isinstance(block, dict)]
