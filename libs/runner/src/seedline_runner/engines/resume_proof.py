"""Whether an engine's own record holds the turn a resume must continue from (pure).

A runner reports a resume only with proof from the engine's own store (CONTRACT.md
3.2 and 6): the record must be there, parse, and hold the newest turn of this
conversation the engine was given or produced, which the launch names as
``resume.expect`` (its kind and the first 200 characters of its content). An id that
merely exists, an empty record, or one that ends before that turn proves nothing.

Each engine keeps its words in its own shape, so each has a reader here that turns
its record's lines into plain (role, text) messages; ``holds_turn`` then looks for
the expected turn among them. Texts are compared as the timeline has them: the
runner's framing of a brief in front of a prompt is taken off, whitespace runs count
as one space, and NUL counts as U+FFFD (what the timeline stores instead). The excerpt
is a prefix of the entry's content, so a message proves the turn when it starts with
the excerpt.

Compaction keeps the proof: Claude Code and Codex compact a long conversation by
appending a summary to the same file; the lines before it stay, so the whole record
is read, newest line first (the expected turn is the newest one, so the search
usually ends after a few lines).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from seedline_contracts.runner import ResumeExpect

from ..framing import split_background
from .json_lines import parse_object

Role = Literal["user", "assistant"]

_ROLE_OF_KIND: dict[str, Role] = {"chat_user": "user", "chat_assistant": "assistant"}


@dataclass(frozen=True)
class RecordMessage:
    role: Role
    text: str


@dataclass(frozen=True)
class Proof:
    holds: bool
    # Why not, for the runner's log (empty when it holds).
    reason: str = ""


PROVEN = Proof(True)


def normalized(text: str) -> str:
    return " ".join(text.replace("\x00", "\ufffd").split())


def _as_given(message: RecordMessage) -> str:
    # A prompt the runner framed with a brief: the person's words are what follows it.
    if message.role == "user":
        return split_background(message.text)[1]
    return message.text


def holds_turn(messages: Sequence[RecordMessage], expect: ResumeExpect | None) -> Proof:
    """Whether ``messages`` (a record's, oldest first) hold the turn ``expect`` names.

    With no ``expect`` (the conversation has no chat turn yet) any message proves that
    the record is a conversation at all; an empty record never does.
    """
    return _holds_newest_first(reversed(messages), expect)


def _holds_newest_first(messages: Iterable[RecordMessage], expect: ResumeExpect | None) -> Proof:
    # Lazy: the expected turn is the newest one, so the search usually ends at once.
    role = _ROLE_OF_KIND.get(expect.kind) if expect is not None else None
    excerpt = normalized(expect.excerpt) if expect is not None else ""
    said_anything = False
    for message in messages:
        said_anything = True
        if expect is None:
            return PROVEN
        if role is not None and message.role != role:
            continue
        if normalized(_as_given(message)).startswith(excerpt):
            return PROVEN
    if not said_anything or expect is None:
        return Proof(False, "the record holds no message")
    return Proof(False, f"the record does not hold the {expect.kind} entry {expect.seq}")


# Claude Code ------------------------------------------------------------------


def claude_messages(lines: Iterable[str]) -> list[RecordMessage]:
    """The prompts and replies of a Claude Code transcript (one JSON object a line).

    ``user`` and ``assistant`` lines carry ``message.content``, a string or a list of
    blocks; only text blocks are words (tool calls, results and thinking are not).
    Lines of a subagent (``isSidechain``) belong to another conversation.
    """
    return [message for line in lines for message in _claude_line(line)]


def claude_record_proves(lines: Sequence[str], expect: ResumeExpect | None) -> Proof:
    newest_first = (
        message for line in reversed(lines) for message in reversed(_claude_line(line))
    )
    return _holds_newest_first(newest_first, expect)


def _claude_line(line: str) -> list[RecordMessage]:
    record = parse_object(line)
    if record is None or record.get("isSidechain") is True:
        return []
    kind = record.get("type")
    body = record.get("message")
    if kind not in ("user", "assistant") or not isinstance(body, dict):
        return []
    return [RecordMessage(kind, text) for text in _texts(body.get("content"), ("text",))]


# Codex --------------------------------------------------------------------------

_CODEX_TEXT_BLOCKS = ("input_text", "output_text", "text", "Text")
_CODEX_ITEM_ROLES: dict[str, Role] = {"UserMessage": "user", "AgentMessage": "assistant"}
_CODEX_EVENT_ROLES: dict[str, Role] = {"user_message": "user", "agent_message": "assistant"}


@dataclass(frozen=True)
class CodexRecord:
    # The thread ids the rollout's session_meta lines name.
    thread_ids: frozenset[str]
    messages: list[RecordMessage]


def codex_record(lines: Iterable[str]) -> CodexRecord:
    """A Codex rollout's thread ids and the words said in it.

    The same words appear more than once (a ``response_item`` message, an
    ``event_msg`` and, in newer versions, an ``item_completed``); each is read, as any
    of them is the CLI's own record that the turn happened. A ``compacted`` line's
    replacement history is read too.
    """
    thread_ids: set[str] = set()
    messages: list[RecordMessage] = []
    for line in lines:
        record = parse_object(line)
        if record is None:
            continue
        payload = record.get("payload")
        if not isinstance(payload, dict):
            continue
        kind = record.get("type")
        if kind == "session_meta":
            thread_id = payload.get("id")
            if isinstance(thread_id, str) and thread_id:
                thread_ids.add(thread_id)
        elif kind == "response_item":
            messages.extend(_codex_response_item(payload))
        elif kind == "event_msg":
            messages.extend(_codex_event(payload))
        elif kind == "compacted":
            for item in payload.get("replacement_history") or []:
                if isinstance(item, dict):
                    messages.extend(_codex_response_item(item))
    return CodexRecord(frozenset(thread_ids), messages)


def codex_record_proves(
    lines: Sequence[str], thread_id: str, expect: ResumeExpect | None
) -> Proof:
    # Only session_meta lines are read whole up front; the words newest first.
    metas = codex_record(line for line in lines if '"session_meta"' in line)
    if thread_id not in metas.thread_ids:
        return Proof(False, "the rollout does not name the thread")
    newest_first = (
        message
        for line in reversed(lines)
        for message in reversed(codex_record([line]).messages)
    )
    return _holds_newest_first(newest_first, expect)


def _codex_response_item(item: dict[str, Any]) -> Iterator[RecordMessage]:
    role = item.get("role")
    if item.get("type") != "message" or role not in ("user", "assistant"):
        return
    for text in _texts(item.get("content"), _CODEX_TEXT_BLOCKS):
        yield RecordMessage(role, text)


def _codex_event(payload: dict[str, Any]) -> Iterator[RecordMessage]:
    kind = payload.get("type")
    if kind in _CODEX_EVENT_ROLES and isinstance(payload.get("message"), str):
        yield RecordMessage(_CODEX_EVENT_ROLES[kind], payload["message"])
    elif kind == "item_completed" and isinstance(payload.get("item"), dict):
        item = payload["item"]
        role = _CODEX_ITEM_ROLES.get(str(item.get("type")))
        if role is not None:
            for text in _texts(item.get("content"), _CODEX_TEXT_BLOCKS):
                yield RecordMessage(role, text)


def _texts(content: Any, block_types: Sequence[str]) -> list[str]:
    if isinstance(content, str):
        return [content]
    if not isinstance(content, list):
        return []
    return [
        block["text"]
        for block in content
        if isinstance(block, dict)
        and block.get("type") in block_types
        and isinstance(block.get("text"), str)
    ]
