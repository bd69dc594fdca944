"""The one interface every engine adapter implements.

An engine may claim at start that it picked up its earlier conversation, but
only a turn can prove it for some engines (the Claude Code CLI reports the
conversation it actually ran on). So both answers are explicit: ``StartResult``
says what the engine can confirm before any turn, and ``TurnResult.resumed``
says whether the turn really ran on the conversation that was asked for.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal, Protocol, runtime_checkable

from ..store import Conversation

OutputKind = Literal["chat_assistant", "command", "terminal", "outcome"]


@dataclass(frozen=True)
class EngineOutput:
    kind: OutputKind
    content: str


@dataclass(frozen=True)
class StartResult:
    # True only when the engine has confirmed its own earlier conversation is there.
    resumed: bool
    engine_session_id: str | None


@dataclass(frozen=True)
class TurnResult:
    outputs: list[EngineOutput] = field(default_factory=list)
    # The engine's own conversation id after this turn (None: it keeps none).
    engine_session_id: str | None = None
    # Whether this turn ran on the conversation the engine was asked to resume:
    # None when no resume was pending for this turn.
    resumed: bool | None = None


class EngineError(Exception):
    """An engine could not do what was asked; the message is for a person."""


@runtime_checkable
class Engine(Protocol):
    name: str
    # Keeps no conversation of its own: the runner's store supplies it every turn.
    stateless: bool

    async def start(self, conversation_id: str, resume_key: str | None) -> StartResult:
        """Bind ``conversation_id``, picking up ``resume_key`` when it really exists."""
        ...

    async def run_turn(self, conversation: Conversation, prompt: str) -> TurnResult:
        """Answer ``prompt``. ``conversation`` holds the turns before it and is not changed."""
        ...

    async def end(self, conversation_id: str) -> None:
        """Release whatever the engine holds for ``conversation_id``."""
        ...


def join_replies(outputs: list[EngineOutput]) -> str:
    """The assistant's words in a turn, as one message for the conversation store."""
    return "\n\n".join(o.content for o in outputs if o.kind == "chat_assistant")
