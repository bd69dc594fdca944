"""The in-process conversation store, seeded only when empty.

A conversation lives here for as long as the runner hosts it. The platform's
timeline is the durable record; a seed is the one-way bridge from that record
into an empty conversation. Seeding a conversation that already holds turns
would duplicate its context, so a warm conversation is never seeded again and
passing the same history twice is a no-op.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

Role = Literal["user", "assistant", "tool", "system"]


@dataclass(frozen=True)
class SeedMessage:
    role: Role
    content: str
    tool_call_id: str | None = None
    tool_calls: list[Any] | None = None


@dataclass
class Conversation:
    conversation_id: str
    messages: list[SeedMessage] = field(default_factory=list)

    @property
    def is_empty(self) -> bool:
        return not self.messages

    def append(self, message: SeedMessage) -> None:
        self.messages.append(message)

    def append_exchange(self, prompt: str, reply: str) -> None:
        self.messages.append(SeedMessage(role="user", content=prompt))
        self.messages.append(SeedMessage(role="assistant", content=reply))


class ConversationStore:
    def __init__(self) -> None:
        self._conversations: dict[str, Conversation] = {}

    def get_or_create(self, conversation_id: str) -> Conversation:
        conversation = self._conversations.get(conversation_id)
        if conversation is None:
            conversation = Conversation(conversation_id)
            self._conversations[conversation_id] = conversation
        return conversation

    def get(self, conversation_id: str) -> Conversation | None:
        return self._conversations.get(conversation_id)

    def discard(self, conversation_id: str) -> None:
        self._conversations.pop(conversation_id, None)

    def __contains__(self, conversation_id: object) -> bool:
        return conversation_id in self._conversations

    def __len__(self) -> int:
        return len(self._conversations)


def seed_if_empty(conversation: Conversation, history: Iterable[SeedMessage]) -> int:
    """Replay ``history`` into ``conversation`` only when it holds nothing yet.

    Returns how many messages were replayed (0 for a warm conversation).
    """
    if not conversation.is_empty:
        return 0
    replayable = replayable_history(list(history))
    conversation.messages.extend(replayable)
    return len(replayable)


def replayable_history(history: Sequence[SeedMessage]) -> list[SeedMessage]:
    """The part of ``history`` that can be replayed into a conversation.

    System messages are skipped: the engine owns its own system prompt. A tool
    call is never separated from its results, because chat APIs refuse an
    assistant tool call without an answer for every call id, and a result
    without its call: an assistant message carrying tool calls is kept only with
    a result for each of its calls, taken from the tool messages right after it,
    and is otherwise dropped together with the results it has. Tool messages
    that answer no call just before them are dropped too.
    """
    kept: list[SeedMessage] = []
    index = 0
    while index < len(history):
        message = history[index]
        index += 1
        if message.role == "system" or message.role == "tool":
            continue
        if message.role == "assistant" and message.tool_calls:
            results, index = _results_following(history, index)
            exchange = _complete_exchange(message, results)
            kept.extend(exchange)
            continue
        kept.append(message)
    return kept


def _results_following(history: Sequence[SeedMessage], start: int) -> tuple[list[SeedMessage], int]:
    end = start
    while end < len(history) and history[end].role == "tool":
        end += 1
    return list(history[start:end]), end


def _complete_exchange(call: SeedMessage, results: list[SeedMessage]) -> list[SeedMessage]:
    call_ids = [_tool_call_id(tool_call) for tool_call in call.tool_calls or []]
    if any(call_id is None for call_id in call_ids) or len(set(call_ids)) != len(call_ids):
        return []
    first_result_for: dict[str, SeedMessage] = {}
    for result in results:
        if result.tool_call_id in call_ids and result.tool_call_id not in first_result_for:
            first_result_for[result.tool_call_id] = result
    if len(first_result_for) != len(call_ids):
        return []
    ordered_results = [r for r in results if first_result_for.get(r.tool_call_id or "") is r]
    return [call, *ordered_results]


def _tool_call_id(tool_call: Any) -> str | None:
    if isinstance(tool_call, dict):
        call_id = tool_call.get("id")
    else:
        call_id = getattr(tool_call, "id", None)
    return call_id if isinstance(call_id, str) and call_id else None
