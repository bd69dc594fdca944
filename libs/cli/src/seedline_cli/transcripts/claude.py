"""Claude Code session transcripts (``~/.claude/projects/<folder>/<session id>.jsonl``).

Each line is one record with a ``type``. ``user`` and ``assistant`` records carry a
``message`` whose content is text or a list of blocks (``text``, ``tool_use``,
``tool_result``, ``thinking``, ``image``); every record also has its own ``uuid``,
the ``sessionId``, the ``cwd`` and a ``timestamp``. Everything else (progress,
attachments, file snapshots, queue operations, summaries, system status lines) is
Claude Code's own bookkeeping, not the conversation.

What a person typed becomes ``chat_user``; the local commands they ran (``/mcp``), the
marks of an interruption, Claude Code's summary of a compacted conversation
(``isCompactSummary``) and its notices that a background task ended
(``<task-notification>``) become ``system``: all of them reach the model as user
messages, and none of them is the person's. A tool result Claude Code flags
``is_error`` (a failed command, a refused tool) is marked as a tool error. Claude
Code's notes to the model (``isMeta``) and a subagent's side conversation
(``isSidechain``) are left out.
Entry ids are ``claude:<session id>:<record uuid>:<block>``.
"""

from __future__ import annotations

from typing import Any

from seedline_runner.engines.claude_stream import command_text, tool_result_text
from seedline_runner.engines.json_lines import parse_object
from seedline_runner.engines.tool_errors import failed_tool_text
from seedline_runner.engines.transcript_marks import CLAUDE_RUNNER_ENTRYPOINT, is_seedline_brief

from . import (
    RUNNER_PUBLISHED,
    SEEDLINE_BRIEFS,
    Item,
    NumberedLines,
    Transcript,
    fill_times,
    stable_id,
    without_runs_of_a_runner,
)

ENGINE = "claude"
_LOCAL_COMMAND_MARKS = ("<command-name>", "<command-message>", "<local-command-")
_INTERRUPTION_MARK = "[Request interrupted"
_TASK_NOTIFICATION_MARK = "<task-notification>"


def parse(lines: NumberedLines, transcript: Transcript | None = None) -> Transcript:
    """The file's lines read into ``transcript``: a new one, or, to read lines a file
    gained since, the one its earlier lines gave (its items are then the new ones)."""
    transcript = transcript or Transcript(engine=ENGINE)
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
    transcript.items = without_runs_of_a_runner(transcript, fill_times(items))
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
    if record.get("entrypoint") == CLAUDE_RUNNER_ENTRYPOINT:
        # A run a Seedline runner made: it published every record live, under these ids.
        transcript.skip(RUNNER_PUBLISHED)
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
    # Claude Code's summary of the conversation before a compaction: its words, not the person's.
    role = "compact_summary" if record.get("isCompactSummary") is True else kind
    items = []
    for index, block in enumerate(blocks):
        made = _block(transcript, role, block)
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
        if role == "compact_summary":
            return "system", text
        if is_seedline_brief(text):
            transcript.seedline_brief = True
            transcript.skip(SEEDLINE_BRIEFS)
            return None
        if text.lstrip().startswith(
            _LOCAL_COMMAND_MARKS + (_INTERRUPTION_MARK, _TASK_NOTIFICATION_MARK)
        ):
            return "system", text
        return "chat_user", text
    if block_type == "tool_use" and role == "assistant":
        return "command", command_text(block.get("name"), block.get("input"))
    if block_type == "tool_result" and role == "user":
        text = tool_result_text(block.get("content"))
        if block.get("is_error") is True:
            return "terminal", failed_tool_text(text)
        if not text:
            transcript.skip("tool results without text")
            return None
        return "terminal", text
    if block_type in ("thinking", "redacted_thinking"):
        transcript.skip("the model's thinking")
        return None
    transcript.skip(f"{block_type or 'untyped'} blocks")
    return None
