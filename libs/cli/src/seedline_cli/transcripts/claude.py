"""Claude Code session transcripts (``~/.claude/projects/<folder>/<session id>.jsonl``).

Each line is one record with a ``type``. ``user`` and ``assistant`` records carry a
``message`` whose content is text or a list of blocks (``text``, ``tool_use``,
``tool_result``, ``thinking``, ``image``); every record also has its own ``uuid``,
the ``sessionId``, the ``cwd`` and a ``timestamp``. Everything else (progress,
attachments, file snapshots, queue operations, summaries, system status lines) is
Claude Code's own bookkeeping, not the conversation.

What a person typed becomes ``chat_user``; the local commands they ran (``/mcp``) and
the marks of an interruption become ``system``; Claude Code's notes to the model
(``isMeta``) and a subagent's side conversation (``isSidechain``) are left out.
Entry ids are ``claude:<session id>:<record uuid>:<block>``.
"""

from __future__ import annotations

from typing import Any

from seedline_runner.engines.claude_stream import command_text, tool_result_text
from seedline_runner.engines.json_lines import parse_object

from . import Item, NumberedLines, Transcript, fill_times, stable_id

ENGINE = "claude"
_LOCAL_COMMAND_MARKS = ("<command-name>", "<command-message>", "<local-command-")
_INTERRUPTION_MARK = "[Request interrupted"


def parse(lines: NumberedLines) -> Transcript:
    transcript = Transcript(engine=ENGINE)
    items: list[Item] = []
    for number, line in lines:
        if line is None:
            transcript.malformed.append((number, "the line is too long to read"))
            continue
        if not line.strip():
            continue
        record = parse_object(line)
        if record is None:
            transcript.malformed.append((number, "not a JSON object"))
            continue
        _note_identity(transcript, record)
        at = transcript.time_of(record)
        items.extend(_items(transcript, record, number, at))
    transcript.items = fill_times(items)
    return transcript


def _note_identity(transcript: Transcript, record: dict[str, Any]) -> None:
    session_id, cwd = record.get("sessionId"), record.get("cwd")
    if transcript.session_id is None and isinstance(session_id, str) and session_id:
        transcript.session_id = session_id
    if transcript.cwd is None and isinstance(cwd, str) and cwd:
        transcript.cwd = cwd


def _items(
    transcript: Transcript, record: dict[str, Any], number: int, at: str | None
) -> list[Item]:
    kind = record.get("type")
    if kind not in ("user", "assistant"):
        transcript.skip(f"Claude Code's own {kind or 'untyped'} records")
        return []
    if record.get("isSidechain") is True:
        transcript.skip("a subagent's side conversation")
        return []
    if record.get("isMeta") is True:
        transcript.skip("Claude Code's notes to the model")
        return []
    message = record.get("message")
    content = message.get("content") if isinstance(message, dict) else None
    if isinstance(content, str):
        blocks: list[Any] = [{"type": "text", "text": content}]
    elif isinstance(content, list):
        blocks = content
    else:
        transcript.malformed.append((number, f"a {kind} record without message content"))
        return []
    record_id = record.get("uuid") if isinstance(record.get("uuid"), str) else f"line-{number}"
    session_id = transcript.session_id or "unknown"
    items = []
    for index, block in enumerate(blocks):
        made = _block(transcript, kind, block)
        if made is not None:
            entry_kind, text = made
            entry_id = stable_id(ENGINE, session_id, record_id, index)
            items.append(Item(entry_id, entry_kind, text, at))
    return items


def _block(transcript: Transcript, role: str, block: Any) -> tuple[str, str] | None:
    block_type = block.get("type") if isinstance(block, dict) else None
    if block_type == "text":
        text = block.get("text")
        if not isinstance(text, str) or not text.strip():
            transcript.skip("empty text")
            return None
        if role == "assistant":
            return "chat_assistant", text
        if text.lstrip().startswith(_LOCAL_COMMAND_MARKS + (_INTERRUPTION_MARK,)):
            return "system", text
        return "chat_user", text
    if block_type == "tool_use" and role == "assistant":
        return "command", command_text(block.get("name"), block.get("input"))
    if block_type == "tool_result" and role == "user":
        text = tool_result_text(block.get("content"))
        if not text:
            transcript.skip("tool results without text")
            return None
        return "terminal", text
    if block_type in ("thinking", "redacted_thinking"):
        transcript.skip("the model's thinking")
        return None
    transcript.skip(f"{block_type or 'untyped'} blocks")
    return None
