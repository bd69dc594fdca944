"""One step of an engine's own transcript, read back as the outputs live publishing gives (pure).

A runner that died mid-turn published the engine's outputs up to some point; the
engine went on recording in its own transcript until it was ended. Reading the
step back from the transcript, in the order and with the kinds the live stream gives,
yields the same entry ids (for Claude Code its record's own, else
``<session>:<step>:<index>``): the ones already published are duplicates the timeline
keeps once, the rest are the tail the timeline lacked.

A step starts at the person's prompt (found by its digest: a resumed conversation's
transcript holds earlier steps too) and runs to the end of what was recorded.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from .containment.ledger import prompt_digest
from .engines.base import EngineOutput
from .engines.claude_stream import ClaudeStream
from .engines.codex_stream import _command_result
from .engines.json_lines import parse_object


def claude_step(lines: Sequence[str], prompt_sha256: str) -> list[EngineOutput] | None:
    """The outputs of the step whose prompt has this digest, or None when it is not here."""
    records = [parse_object(line) for line in lines]
    start = None
    for index, record in enumerate(records):
        if record is not None and record.get("type") == "user":
            text = _claude_prompt(record)
            if text is not None and prompt_digest(text) == prompt_sha256:
                start = index
    if start is None:
        return None
    # The transcript has no stream-json init line: the conversation its records belong to
    # is their own `sessionId`. With it, each block gets the id the live stream gave it
    # (`claude:<conversation>:<record uuid>:<block>`), so a step published live goes in once.
    session_id = records[start].get("sessionId") if records[start] else None
    stream = ClaudeStream(session_id=session_id if isinstance(session_id, str) else None)
    outputs: list[EngineOutput] = []
    for line in lines[start + 1:]:
        outputs.extend(stream.feed(line))
    return outputs


def _claude_prompt(record: dict[str, Any]) -> str | None:
    message = record.get("message")
    content = message.get("content") if isinstance(message, dict) else None
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        texts = [b.get("text") for b in content if isinstance(b, dict) and b.get("type") == "text"]
        if texts and all(isinstance(t, str) for t in texts):
            return "".join(texts)
    return None


def codex_step(lines: Sequence[str], prompt_sha256: str) -> list[EngineOutput] | None:
    """The outputs of the step whose prompt has this digest, or None when it is not here."""
    payloads = []
    for line in lines:
        record = parse_object(line)
        payload = record.get("payload") if record is not None else None
        payloads.append((record.get("type") if record else None, payload))
    start = None
    for index, (kind, payload) in enumerate(payloads):
        if kind == "response_item" and isinstance(payload, dict) and _is_user_message(payload):
            if any(prompt_digest(t) == prompt_sha256 for t in _texts(payload, "input_text")):
                start = index
    if start is None:
        return None
    executions = [
        item
        for kind, payload in payloads
        if kind == "event_msg" and isinstance(payload, dict)
        and payload.get("type") == "item_completed"
        and isinstance(item := payload.get("item"), dict)
        and item.get("type") == "CommandExecution"
    ]
    finished = {item.get("id"): item for item in executions}
    # The shell Codex wraps commands in (["/bin/bash", "-lc"]), from any command it ran.
    commands = [_strings(item.get("command")) for item in executions]
    shell = next((command[:-1] for command in commands if command), [])
    outputs: list[EngineOutput] = []
    for kind, payload in payloads[start + 1:]:
        if not isinstance(payload, dict):
            continue
        if kind == "response_item":
            outputs.extend(_codex_item(payload, finished, shell))
        elif kind == "event_msg" and payload.get("type") == "item_completed":
            item = payload.get("item")
            if isinstance(item, dict) and item.get("type") == "CommandExecution":
                outputs.append(EngineOutput("terminal", _command_result(item)))
    return outputs


def _codex_item(
    payload: dict[str, Any], finished: dict[Any, dict[str, Any]], shell: list[str]
) -> list[EngineOutput]:
    kind = payload.get("type")
    if kind == "message" and payload.get("role") == "assistant":
        text = "".join(_texts(payload, "output_text"))
        return [EngineOutput("chat_assistant", text)] if text.strip() else []
    if kind == "function_call":
        command = _strings(finished.get(payload.get("call_id"), {}).get("command"))
        if command:
            return [EngineOutput("command", f"shell: {codex_join(command)}")]
        return [EngineOutput("command", f"shell: {_call_command(payload, shell)}")]
    return []


def _call_command(payload: dict[str, Any], shell: list[str]) -> str:
    """A call cut off before Codex reported it, named as Codex would have named it."""
    arguments = parse_object(payload.get("arguments") or "") or {}
    for key in ("cmd", "command"):
        value = arguments.get(key)
        if isinstance(value, str):
            return codex_join([*shell, value]) if shell else value
        if _strings(value):
            return codex_join(_strings(value))
    return str(payload.get("name") or "tool")


def _strings(value: Any) -> list[str]:
    if isinstance(value, list) and value and all(isinstance(part, str) for part in value):
        return value
    return []


# Quoting as Codex writes a command in `codex exec --json` (the Rust shlex crate's
# join): each stretch of an argument is left bare, single-quoted or double-quoted,
# whichever fits the longest stretch, in that order of preference.
_BARE = frozenset(b"+-./:@]_0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz")
_NOT_SINGLE = frozenset(b"'\\")
_NOT_DOUBLE = frozenset(b"$`!")


def codex_join(args: Sequence[str]) -> str:
    return " ".join(_codex_quote(arg) for arg in args)


def _codex_quote(arg: str) -> str:
    data = arg.encode("utf-8")
    if not data:
        return "''"
    if all(c in _BARE for c in data):
        return arg
    out = bytearray()
    rest = data
    while rest:
        bare, single, double = True, True, True
        length = 0
        if rest[0] == ord("^"):  # zsh reads a leading ^ specially: quote it
            bare, double, length = False, False, 1
        while length < len(rest):
            c = rest[length]
            now = (
                bare and c in _BARE,
                single and c not in _NOT_SINGLE,
                double and c not in _NOT_DOUBLE,
            )
            if not any(now):
                break
            bare, single, double = now
            length += 1
        chunk = rest[:length]
        if bare:
            out += chunk
        elif single:
            out += b"'" + chunk + b"'"
        else:
            out += b'"' + chunk.replace(b"\\", b"\\\\").replace(b'"', b'\\"') + b'"'
        rest = rest[length:]
    return out.decode("utf-8")


def _is_user_message(payload: dict[str, Any]) -> bool:
    return payload.get("type") == "message" and payload.get("role") == "user"


def _texts(payload: dict[str, Any], part_type: str) -> list[str]:
    return [
        part["text"]
        for part in payload.get("content") or []
        if isinstance(part, dict) and part.get("type") == part_type
        and isinstance(part.get("text"), str)
    ]
