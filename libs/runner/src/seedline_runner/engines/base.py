"""The one interface every engine adapter implements.

Output as it happens. An engine hands each thing it says or does to the ``emit``
callback the moment it has it (an assistant message, a tool call, a tool result),
and the end of its turn the moment it says so (an output with ``ends_turn``), and
awaits it: the runner publishes that output before the engine reads on, so a
machine that dies mid-turn loses at most what it had not yet emitted, and the order
of publishing is the order of emission. ``run_turn`` returns only what is known at
the end of the turn.

A resume needs proof (CONTRACT.md 3.2). At start an engine reads its own record
(a transcript, a rollout, an in-process store) and says ``resumed`` only when that
record holds the launch's expected turn (``resume_proof``). A command-line engine must
then also accept the resume, which only its first line of output tells
(``acceptance_pending``): when it refuses, or starts a conversation other than the one
asked for, ``run_turn`` raises ``ResumeRefused`` before it has emitted anything, so the
runner can answer the same message in a new conversation with the brief in front.

The moment an engine names its own conversation id (Claude Code's ``init`` line,
Codex's ``thread.started``) it says so through ``announce_bound``: the one seam every
adapter uses, so a machine that dies during a first turn still leaves the platform
the id to resume.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal, Protocol, runtime_checkable

from seedline_contracts.runner import ResumeExpect

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
    # The engine's own word that its turn is over (Claude Code's `result` line, Codex's
    # `turn.completed`, an ACP agent's answer to `session/prompt`): the runner publishes
    # it as the step's end mark (timeline_out.end_entry_id), which an editor waits for.
    ends_turn: bool = field(default=False, compare=False)


# Called once per output, in order; the engine awaits it before it reads on.
Emit = Callable[[EngineOutput], Awaitable[None]]


@runtime_checkable
class BoundListener(Protocol):
    """An ``emit`` that also hears when the engine names its own conversation id."""

    async def __call__(self, output: EngineOutput) -> None: ...

    async def bound(self, engine_session_id: str) -> None: ...


async def announce_bound(emit: Emit, engine_session_id: str) -> None:
    """Say, the moment the engine names it, which conversation of its own it runs on.

    Called by an adapter before it emits anything of the run; a plain ``emit`` (a
    test collecting outputs) does not listen.
    """
    if isinstance(emit, BoundListener):
        await emit.bound(engine_session_id)


@dataclass(frozen=True)
class StartResult:
    # True only when the engine's own record holds the conversation to resume.
    resumed: bool
    engine_session_id: str | None
    # The record proves it, but the engine itself has yet to accept the resume: the
    # first line of its first run tells (it raises ResumeRefused if not).
    acceptance_pending: bool = False


@dataclass(frozen=True)
class TurnResult:
    # The engine's own conversation id after this turn (None: it keeps none).
    engine_session_id: str | None = None
    # Whether this turn ran on the conversation the engine was asked to resume:
    # None when no resume was pending for this turn.
    resumed: bool | None = None


class EngineError(Exception):
    """An engine could not do what was asked; the message is for a person."""


class ResumeRefused(EngineError):
    """The engine would not continue the conversation it was asked to resume.

    Raised before the run emitted anything; the adapter is then bound to a new
    conversation, so the same message can be answered again.
    """


@runtime_checkable
class Engine(Protocol):
    name: str
    # Keeps no conversation of its own: the runner's store supplies it every turn.
    stateless: bool

    async def start(
        self,
        conversation_id: str,
        resume_key: str | None,
        workdir: Path | None = None,
        expect: ResumeExpect | None = None,
    ) -> StartResult:
        """Bind ``conversation_id``, picking up ``resume_key`` when its record proves it.

        ``workdir`` is the checkout the conversation works in (None: the current
        directory); engines that keep transcripts per project keep them per checkout.
        ``expect`` is the newest turn the earlier conversation's engine was given or
        produced (None: it had none); the engine's record must hold it.
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
