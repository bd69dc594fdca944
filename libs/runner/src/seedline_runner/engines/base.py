"""The one interface every engine adapter implements.

Output as it happens. An engine hands each thing it says or does to the ``emit``
callback the moment it has it (an assistant message, a tool call, a tool result),
and awaits it: the runner publishes that output before the engine reads on, so a
machine that dies mid-turn loses at most what it had not yet emitted, and the order
of publishing is the order of emission. ``run_turn`` returns only what is known at
the end of the turn.

An engine may claim at start that it picked up its earlier conversation, but only a
turn can prove it for some engines (a CLI reports the conversation it actually ran
on). So both answers are explicit: ``StartResult`` says what the engine can confirm
before any turn, and ``TurnResult.resumed`` says whether the turn really ran on the
conversation that was asked for.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal, Protocol, runtime_checkable

from ..store import Conversation

OutputKind = Literal["chat_assistant", "command", "terminal", "outcome"]


@dataclass(frozen=True)
class EngineOutput:
    kind: OutputKind
    content: str
    # The entry id the engine's own transcript gives this output, when it has one
    # (engines/transcript_marks.py): published under it, an
    # import of that transcript never adds it twice.
    entry_id: str | None = field(default=None, compare=False)


# Called once per output, in order; the engine awaits it before it reads on.
Emit = Callable[[EngineOutput], Awaitable[None]]


@dataclass(frozen=True)
class StartResult:
    # True only when the engine has confirmed its own earlier conversation is there.
    resumed: bool
    engine_session_id: str | None


@dataclass(frozen=True)
class TurnResult:
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

    async def start(
        self, conversation_id: str, resume_key: str | None, workdir: Path | None = None
    ) -> StartResult:
        """Bind ``conversation_id``, picking up ``resume_key`` when it really exists.

        ``workdir`` is the checkout the conversation works in (None: the current
        directory); engines that keep transcripts per project keep them per checkout.
        """
        ...

    async def run_turn(self, conversation: Conversation, prompt: str, emit: Emit) -> TurnResult:
        """Answer ``prompt``, emitting each output as it happens.

        ``conversation`` holds the turns before it and is not changed.
        """
        ...

    async def end(self, conversation_id: str) -> None:
        """Release whatever the engine holds for ``conversation_id``."""
        ...


def join_replies(outputs: list[EngineOutput]) -> str:
    """The assistant's words in a turn, as one message for the conversation store."""
    return "\n\n".join(o.content for o in outputs if o.kind == "chat_assistant")
