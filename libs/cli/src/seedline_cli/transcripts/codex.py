"""Codex rollout files (``~/.codex/sessions/YYYY/MM/DD/rollout-<time>-<thread id>.jsonl``).

Each line is ``{"timestamp", "type", "payload"}`` (newer Codex also numbers its lines
with an ``ordinal``). ``session_meta`` names the thread and its working directory;
``response_item`` lines are what the model saw and said (messages, tool calls and
their output, reasoning); ``event_msg`` lines are the CLI's events, among them
``user_message``, the person's message exactly as typed. Early rollouts have the
items themselves as lines, without the wrapper.

What the person typed comes from ``user_message`` events when the file has them,
since the model's copy of a user message can carry Codex's own context; otherwise
from the user messages the model saw, less that context. Entry ids are
``codex:<thread id>:<ordinal or line number>:<part>``: a rollout only ever grows,
and a resumed thread appends to the same file. A tool call that exited non-zero is
marked as a tool error.
"""

from __future__ import annotations

import json
import re
from typing import Any

from seedline_runner.engines.json_lines import parse_object
from seedline_runner.engines.tool_errors import failed_tool_text
from seedline_runner.engines.transcript_marks import CODEX_RUNNER_ORIGINATOR, is_seedline_brief

from . import (
    SEEDLINE_BRIEFS,
    Item,
    NumberedLines,
    Transcript,
    fill_times,
    stable_id,
    without_runs_of_a_runner,
)

ENGINE = "codex"
# Codex's own context, sent to the model as user messages.
_CONTEXT_MARKS = (
    "<environment_context>",
    "<user_instructions>",
    "<permissions instructions>",
    "<skills_instructions>",
    "<turn_aborted>",
    "# AGENTS.md instructions",
)
# How Codex 0.12x and later report a command's end inside its output text.
_EXIT_LINE = re.compile(r"^Process exited with code (-?\d+)$", re.MULTILINE)
_ITEM_TYPES = frozenset(
    {"message", "function_call", "function_call_output", "custom_tool_call",
     "custom_tool_call_output", "local_shell_call", "reasoning", "web_search_call"}
)


def parse(lines: NumberedLines, transcript: Transcript | None = None) -> Transcript:
    """The file's lines read into ``transcript``: a new one, or, to read lines a file
    gained since, the one its earlier lines gave (its items are then the new ones)."""
    transcript = transcript or Transcript(engine=ENGINE)
    records: list[tuple[int, dict[str, Any]]] = []
    for number, line in lines:
        if line is None:
            transcript.malformed.append((number, "the line is too long to read"))
        elif line.strip():
            record = parse_object(line)
            if record is None:
                transcript.malformed.append((number, "not a JSON object"))
            else:
                records.append((number, record))
    # Codex writes a message's user_message event right after the model's copy of it,
    # so lines read together (a file at once, or what it gained since) settle this.
    typed_messages = transcript.typed_messages or any(
        record.get("type") == "event_msg" and _payload(record).get("type") == "user_message"
        for _, record in records
    )
    transcript.typed_messages = typed_messages
    items: list[Item] = []
    for number, record in records:
        at = transcript.time_of(record)
        items.extend(_items(transcript, number, record, typed_messages, at))
    transcript.items = without_runs_of_a_runner(transcript, fill_times(items))
    return transcript


def _payload(record: dict[str, Any]) -> dict[str, Any]:
    payload = record.get("payload")
    if isinstance(payload, dict):
        return payload
    # An early rollout: the line is the item (or the session's metadata) itself.
    return record if "payload" not in record else {}


def _items(
    transcript: Transcript,
    number: int,
    record: dict[str, Any],
    typed_messages: bool,
    at: str | None,
) -> list[Item]:
    kind, payload = record.get("type"), _payload(record)
    if kind == "session_meta" or (kind is None and "instructions" in record):
        _note_identity(transcript, payload)
        if payload.get("originator") == CODEX_RUNNER_ORIGINATOR:
            transcript.runner_run = True
        return []
    if kind == "event_msg":
        if payload.get("type") == "user_message" and typed_messages:
            parts = _person(transcript, _text(payload.get("message")))
            return _made(transcript, number, record, parts, at)
        transcript.skip("Codex's own events")
        return []
    if kind in _ITEM_TYPES:
        payload = record  # early rollout
    elif kind != "response_item":
        transcript.skip(f"Codex's own {kind or 'untyped'} lines")
        return []
    parts = _response_item(transcript, payload, typed_messages)
    return _made(transcript, number, record, parts, at)


def _note_identity(transcript: Transcript, meta: dict[str, Any]) -> None:
    thread_id, cwd = meta.get("id"), meta.get("cwd")
    if transcript.session_id is None and isinstance(thread_id, str) and thread_id:
        transcript.session_id = thread_id
    if transcript.cwd is None and isinstance(cwd, str) and cwd:
        transcript.cwd = cwd


def _made(
    transcript: Transcript,
    number: int,
    record: dict[str, Any],
    parts: list[tuple[str, str]],
    at: str | None,
) -> list[Item]:
    ordinal = record.get("ordinal")
    place = ordinal if isinstance(ordinal, int) else f"line-{number}"
    session_id = transcript.session_id or "unknown"
    items = []
    for index, (kind, text) in enumerate(parts):
        if not text.strip():
            transcript.skip("empty text")
            continue
        items.append(Item(stable_id(ENGINE, session_id, place, index), kind, text, at))
    return items


def _response_item(
    transcript: Transcript, item: dict[str, Any], typed_messages: bool
) -> list[tuple[str, str]]:
    kind = item.get("type")
    if kind == "message":
        return _message(transcript, item, typed_messages)
    if kind in ("function_call", "custom_tool_call", "local_shell_call"):
        return [("command", _call_text(item))]
    if kind in ("function_call_output", "custom_tool_call_output"):
        text, failed = _output(item.get("output"))
        return [("terminal", failed_tool_text(text) if failed else text)]
    if kind == "web_search_call":
        action = item.get("action")
        query = action.get("query") if isinstance(action, dict) else None
        return [("command", f"web_search: {_text(query)}".rstrip(": "))]
    if kind == "reasoning":
        transcript.skip("the model's reasoning")
        return []
    transcript.skip(f"{kind or 'untyped'} items")
    return []


def _message(
    transcript: Transcript, item: dict[str, Any], typed_messages: bool
) -> list[tuple[str, str]]:
    role = item.get("role")
    texts = _texts(item.get("content"))
    if role == "assistant":
        return [("chat_assistant", text) for text in texts]
    if role != "user":
        transcript.skip("instructions to the model")
        return []
    if typed_messages:
        transcript.skip("the model's copy of a person's message")
        return []
    parts = []
    for text in texts:
        if text.lstrip().startswith(_CONTEXT_MARKS):
            transcript.skip("Codex's own context")
        else:
            parts += _person(transcript, text)
    return parts


def _person(transcript: Transcript, text: str) -> list[tuple[str, str]]:
    """A person's message, unless it is a Seedline brief a runner gave the engine."""
    if is_seedline_brief(text):
        transcript.seedline_brief = True
        transcript.skip(SEEDLINE_BRIEFS)
        return []
    return [("chat_user", text)]


def _texts(content: Any) -> list[str]:
    if isinstance(content, str):
        return [content]
    return [
        part["text"]
        for part in content or []
        if isinstance(part, dict) and isinstance(part.get("text"), str)
        and part.get("type") in ("input_text", "output_text", "text")
    ]


def _call_text(item: dict[str, Any]) -> str:
    name = _text(item.get("name")) or _text(item.get("type"))
    raw = item.get("arguments", item.get("input", item.get("action")))
    arguments = raw
    if isinstance(raw, str):
        try:
            arguments = json.loads(raw)
        except ValueError:
            return f"{name}: {raw}"
    if isinstance(arguments, dict):
        command = arguments.get("cmd", arguments.get("command"))
        if isinstance(command, list) and all(isinstance(part, str) for part in command):
            command = " ".join(command)
        if isinstance(command, str):
            return f"{name}: {command}"
    if arguments in (None, {}, ""):
        return name
    return f"{name} {json.dumps(arguments, ensure_ascii=False, sort_keys=True)}"


def _output(output: Any) -> tuple[str, bool]:
    """A tool call's output text, and whether the call failed (a non-zero exit code)."""
    if isinstance(output, str):
        # Some Codex versions wrap a shell's output as JSON: {"output": ..., "metadata": ...}.
        wrapped = parse_object(output) if output.lstrip().startswith("{") else None
        if wrapped is not None and isinstance(wrapped.get("output"), str):
            return wrapped["output"], _failed_exit(wrapped.get("metadata"))
        exit_line = _EXIT_LINE.search(output)
        return output, exit_line is not None and int(exit_line.group(1)) != 0
    if isinstance(output, dict) and isinstance(output.get("output"), str):
        return output["output"], _failed_exit(output.get("metadata"))
    return (json.dumps(output, ensure_ascii=False) if output else ""), False


def _failed_exit(metadata: Any) -> bool:
    exit_code = metadata.get("exit_code") if isinstance(metadata, dict) else None
    return isinstance(exit_code, int) and exit_code != 0


def _text(value: Any) -> str:
    return value if isinstance(value, str) else ""
