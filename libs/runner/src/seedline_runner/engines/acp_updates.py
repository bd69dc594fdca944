"""What an Agent Client Protocol agent streams, turned into engine outputs, without I/O.

An agent streams its reply as ``agent_message_chunk`` updates, a few words at a time.
One timeline entry per chunk would scatter a message over dozens of entries, so chunks
are gathered into one message that is complete the moment anything else arrives (a
tool call, a plan) or the turn ends. Tool calls, their results and plans are whole
updates and become one output each as they come.

The same gathering reads the history an agent replays on ``session/load``: the user's
and the agent's messages, in order, which is what a resume is proved against.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Literal

from acp.schema import (
    AgentMessageChunk,
    AgentPlanUpdate,
    ToolCallProgress,
    ToolCallStart,
    UserMessageChunk,
)

from .base import EngineOutput

MessageRole = Literal["chat_user", "chat_assistant"]
_FINISHED_TOOL_STATUSES = frozenset({"completed", "failed"})
_MAX_TOOL_TEXT_CHARS = 20_000


@dataclass(frozen=True)
class ReplayedMessage:
    role: MessageRole
    text: str


def block_text(block: Any) -> str:
    """The text of a content block; other blocks (images, audio) by their kind."""
    text = getattr(block, "text", None)
    if isinstance(text, str):
        return text
    resource = getattr(block, "resource", None)
    resource_text = getattr(resource, "text", None)
    if isinstance(resource_text, str):
        return resource_text
    uri = getattr(block, "uri", None) or getattr(resource, "uri", None)
    kind = getattr(block, "type", "content")
    return f"[{kind}{': ' + uri if uri else ''}]"


@dataclass
class UpdateGatherer:
    """Turns a stream of ``session/update`` payloads into whole outputs, in order."""

    # The message being gathered: its role and its chunks so far.
    _role: MessageRole | None = None
    _chunks: list[str] = field(default_factory=list)
    # Every whole message seen, user and agent alike (a load's replayed history).
    messages: list[ReplayedMessage] = field(default_factory=list)

    def feed(self, update: Any) -> list[EngineOutput]:
        """Outputs completed by ``update`` (the message it closes, then its own)."""
        if isinstance(update, (AgentMessageChunk, UserMessageChunk)):
            role: MessageRole = (
                "chat_assistant" if isinstance(update, AgentMessageChunk) else "chat_user"
            )
            done = self.flush() if role != self._role else []
            self._role = role
            self._chunks.append(block_text(update.content))
            return done
        own = _whole_update_output(update)
        if own is None:
            return []  # thoughts, mode and command lists, usage: nothing to record
        return [*self.flush(), own]

    def flush(self) -> list[EngineOutput]:
        """The message gathered so far, now complete (user messages are not outputs)."""
        role, text = self._role, "".join(self._chunks)
        self._role, self._chunks = None, []
        if role is None or not text.strip():
            return []
        self.messages.append(ReplayedMessage(role, text))
        return [EngineOutput("chat_assistant", text)] if role == "chat_assistant" else []


def _whole_update_output(update: Any) -> EngineOutput | None:
    if isinstance(update, ToolCallStart):
        return EngineOutput("command", _tool_call_text(update.title, update.raw_input))
    if isinstance(update, ToolCallProgress):
        if update.status not in _FINISHED_TOOL_STATUSES:
            return None
        return EngineOutput("terminal", _tool_result_text(update))
    if isinstance(update, AgentPlanUpdate):
        lines = [f"[{entry.status}] {entry.content}" for entry in update.entries]
        return EngineOutput("outcome", "Plan:\n" + "\n".join(lines))
    return None


def _tool_call_text(title: str, raw_input: Any) -> str:
    if raw_input in (None, {}, ""):
        return title
    return f"{title}\n{_clip(_as_text(raw_input))}"


def _tool_result_text(update: ToolCallProgress) -> str:
    parts: list[str] = []
    for item in update.content or []:
        content = getattr(item, "content", None)
        if content is not None:
            parts.append(block_text(content))
        elif getattr(item, "type", None) == "diff":
            parts.append(f"edited {getattr(item, 'path', '')}")
    if not parts and update.raw_output is not None:
        parts.append(_as_text(update.raw_output))
    head = "failed" if update.status == "failed" else "done"
    label = f"{update.title} ({head})" if update.title else head
    return _clip("\n".join([label, *parts]) if parts else label)


def _as_text(value: Any) -> str:
    if isinstance(value, str):
        return value
    try:
        return json.dumps(value, ensure_ascii=False, sort_keys=True, default=str)
    except (TypeError, ValueError):
        return str(value)


def _clip(text: str) -> str:
    if len(text) <= _MAX_TOOL_TEXT_CHARS:
        return text
    return text[:_MAX_TOOL_TEXT_CHARS] + f"\n[... {len(text) - _MAX_TOOL_TEXT_CHARS} more characters]"


def _normalised(text: str) -> str:
    return " ".join(text.split())


def history_holds(messages: list[ReplayedMessage], kind: str, excerpt: str) -> bool:
    """Whether replayed history holds the expected turn (CONTRACT 3.2).

    The excerpt is what the platform recorded from this engine; the history is what the
    engine replays of its own conversation. A user message the runner sent may carry a
    brief in front of the person's words, so the excerpt is looked for inside a message
    of the same kind, spaces aside. And an agent may say something of its own before its
    reply that it never keeps in its history (codex-acp streams "Model metadata for `…`
    not found. Defaulting to fallback metadata; …" as the first words of a turn): the
    recorded message is then that notice, ending a sentence, followed by the replayed
    message, as far as the excerpt goes.
    """
    wanted = _normalised(excerpt)
    if not wanted:
        return False
    for message in messages:
        if message.role != kind:
            continue
        text = _normalised(message.text)
        if wanted in text or _notice_then(wanted, text):
            return True
    return False


# How much of a replayed message the excerpt must show after an agent's own notice: the
# whole message when it is shorter.
_MIN_SHOWN = 40
_SENTENCE_END = ".!?:"


def _notice_then(recorded: str, replayed: str) -> bool:
    """`recorded` is a notice ending a sentence, then `replayed` as far as it goes."""
    head = replayed[:_MIN_SHOWN]
    at = recorded.find(head) if head else -1
    while at > 0:
        notice, rest = recorded[:at].rstrip(), recorded[at:]
        if notice[-1:] in _SENTENCE_END and replayed.startswith(rest):
            return True
        at = recorded.find(head, at + 1)
    return False
