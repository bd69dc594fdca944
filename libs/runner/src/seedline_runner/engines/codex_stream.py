"""Reading the Codex CLI's ``codex exec --json`` events (pure).

One JSON object per line, written as the CLI goes: ``thread.started`` names the
thread it runs on, ``item.started`` / ``item.completed`` carry what the agent says
and does, ``turn.completed`` or ``turn.failed`` end the turn (an outcome that ends it). ``feed`` turns each line
into the outputs it holds, so they are published as they arrive: a command when it
starts, its output when it ends. Event and item types this module does not know are
noted in ``unknown_types`` and otherwise skipped.

Only ``thread.started`` says which thread the CLI runs on. Codex 0.171 given
``exec resume`` of a UUID it has no rollout for exits 1 before that line; given an id
that is not a UUID it looks for a thread of that name and, finding none, starts a new
thread without a word: the thread id is then a new one.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from .base import EngineOutput
from .json_lines import parse_object
from .permissions import codex_refusal
from .tool_errors import failed_tool_text

# Items that say nothing for the timeline: the model's reasoning, its plan, and the
# CLI's own warnings (for example about a model it has no metadata for).
_SILENT_ITEMS = frozenset({"reasoning", "todo_list", "error"})
_QUIET_EVENTS = frozenset({"turn.started", "item.updated"})


@dataclass
class CodexStream:
    # The sandbox the CLI runs its commands in (None: not known): a command it refused is
    # told with the setting that allows it.
    sandbox: str | None = None
    thread_id: str | None = None
    finished: bool = False
    failed: bool = False
    errors: list[str] = field(default_factory=list)
    unknown_types: set[str] = field(default_factory=set)

    def feed(self, line: str) -> list[EngineOutput]:
        event = parse_object(line)
        if event is None:
            return []
        kind = event.get("type")
        if kind == "thread.started":
            thread_id = event.get("thread_id")
            if isinstance(thread_id, str) and thread_id:
                self.thread_id = thread_id
            return []
        if kind in ("item.started", "item.completed"):
            item = event.get("item")
            if isinstance(item, dict):
                return self._read_item(item, started=kind == "item.started")
            return []
        if kind == "turn.completed":
            self.finished = True
            return [EngineOutput("outcome", _completed(event), ends_turn=True)]
        if kind in ("turn.failed", "error"):
            # An "error" event may be one the CLI recovers from (a retried request).
            self.failed = self.failed or kind == "turn.failed"
            return [self._error(event, ends_turn=kind == "turn.failed")]
        if kind not in _QUIET_EVENTS:
            self.unknown_types.add(str(kind))
        return []

    def _read_item(self, item: dict[str, Any], *, started: bool) -> list[EngineOutput]:
        kind = item.get("type")
        if kind == "command_execution":
            if started:
                return [EngineOutput("command", f"shell: {_text(item.get('command'))}")]
            return [EngineOutput("terminal", _command_result(item, self.sandbox))]
        if started:
            return []
        if kind == "agent_message":
            text = _text(item.get("text"))
            return [EngineOutput("chat_assistant", text)] if text.strip() else []
        if kind == "file_change":
            return [EngineOutput("command", _file_change(item))]
        if kind == "mcp_tool_call":
            return _mcp_call(item)
        if kind == "web_search":
            return [EngineOutput("command", f"web_search: {_text(item.get('query'))}")]
        if kind not in _SILENT_ITEMS:
            self.unknown_types.add(f"item:{kind}")
        return []

    def _error(self, event: dict[str, Any], *, ends_turn: bool) -> EngineOutput:
        error = event.get("error")
        message = error.get("message") if isinstance(error, dict) else event.get("message")
        text = _text(message) or "the turn failed"
        self.errors.append(text)
        return EngineOutput("outcome", f"error\n{text}", ends_turn=ends_turn)


def _completed(event: dict[str, Any]) -> str:
    """The turn's end as Codex tells it: what it cost, when it says."""
    usage = event.get("usage")
    if not isinstance(usage, dict):
        return "completed"
    counts = [f"{usage[key]} {label} tokens" for key, label in
              (("input_tokens", "input"), ("output_tokens", "output"))
              if isinstance(usage.get(key), int)]
    return "completed" + (f" ({', '.join(counts)})" if counts else "")


# What a command meets when Codex's sandbox refuses it a write (Linux, macOS).
_SANDBOX_REFUSALS = ("Read-only file system", "Operation not permitted")


def _command_result(item: dict[str, Any], sandbox: str | None = None) -> str:
    output = _text(item.get("aggregated_output"))
    exit_code = item.get("exit_code")
    if isinstance(exit_code, int) and exit_code != 0:
        text = f"{output.rstrip()}\n(exit code {exit_code})".lstrip("\n")
        if sandbox in ("read-only", "workspace-write") and any(
                refusal in output for refusal in _SANDBOX_REFUSALS):
            text += "\n" + codex_refusal(_text(item.get("command")), sandbox)
        return failed_tool_text(text)
    if item.get("status") == "declined":
        return failed_tool_text(
            f"{output.rstrip()}\n{codex_refusal(_text(item.get('command')), sandbox)}")
    if item.get("status") == "failed":
        return failed_tool_text(output)
    return output


def _file_change(item: dict[str, Any]) -> str:
    changes = item.get("changes")
    names = [
        f"{change.get('kind', 'update')} {change.get('path')}"
        for change in changes or []
        if isinstance(change, dict) and change.get("path")
    ]
    return "apply_patch: " + (", ".join(names) or "no files")


def _mcp_call(item: dict[str, Any]) -> list[EngineOutput]:
    name = ".".join(_text(item.get(key)) for key in ("server", "tool") if item.get(key))
    arguments = item.get("arguments")
    call = f"{name or 'mcp'} {json.dumps(arguments, ensure_ascii=False, sort_keys=True)}"
    outputs = [EngineOutput("command", call if arguments not in (None, {}) else name or "mcp")]
    error = item.get("error")
    result = error or item.get("result")
    if result:
        text = result if isinstance(result, str) else json.dumps(result, ensure_ascii=False)
        outputs.append(EngineOutput("terminal", failed_tool_text(text) if error else text))
    return outputs


def _text(value: Any) -> str:
    return value if isinstance(value, str) else ""
