"""A deterministic engine for tests and demos.

Its reply says what it was given: how many characters of context and the
sha256 of the brief it found in that context (or that it found none). That
makes "the engine read the brief" and "the engine never saw the brief"
observable from the timeline alone.

Its own store is its record: it resumes a conversation only when that store holds it
and holds the launch's expected turn (CONTRACT.md 3.2). A conversation it was
started on but never given a message is an empty record, and no resume.

A message that says "(take N seconds)" makes a slow turn: the engine says at once that it is
working, and replies N seconds later (at most a minute), so a test can act on a machine in
the middle of a turn.
"""

from __future__ import annotations

import asyncio
import hashlib
import re
import uuid
from dataclasses import dataclass, field
from pathlib import Path

from seedline_contracts.runner import ResumeExpect

from ..framing import split_background
from ..store import Conversation
from .base import Emit, EngineError, EngineOutput, StartResult, TurnResult
from .resume_proof import RecordMessage, holds_turn

_QUOTED_CHARS = 60
_SLOW = re.compile(r"\(take (\d{1,2}) seconds?\)")


@dataclass
class _OwnConversation:
    messages: list[RecordMessage] = field(default_factory=list)

    @property
    def texts(self) -> list[str]:
        return [message.text for message in self.messages]


def scripted_reply(instruction: str, context_chars: int, seed_sha256: str | None) -> str:
    seed_part = f"seed sha256 {seed_sha256}" if seed_sha256 else "no seed"
    return (
        f"scripted reply to: {instruction[:_QUOTED_CHARS]} "
        f"(context: {context_chars} characters, {seed_part})"
    )


class ScriptedEngine:
    """Resumes only conversations it issued itself in this process (when resumable)."""

    stateless = False

    def __init__(self, *, resumable: bool = True, name: str = "scripted") -> None:
        self.name = name
        self.resumable = resumable
        # Every prompt it was given, as (conversation_id, prompt): what tests inspect.
        self.prompts: list[tuple[str, str]] = []
        self._own: dict[str, _OwnConversation] = {}
        self._bound: dict[str, str] = {}

    async def start(
        self,
        conversation_id: str,
        resume_key: str | None,
        workdir: Path | None = None,
        expect: ResumeExpect | None = None,
    ) -> StartResult:
        if self.resumable and resume_key is not None:
            own = self._own.get(resume_key)
            if own is not None and holds_turn(own.messages, expect).holds:
                self._bound[conversation_id] = resume_key
                return StartResult(resumed=True, engine_session_id=resume_key)
        engine_session_id = f"scripted-{uuid.uuid4().hex}"
        self._own[engine_session_id] = _OwnConversation()
        self._bound[conversation_id] = engine_session_id
        return StartResult(resumed=False, engine_session_id=engine_session_id)

    async def run_turn(self, conversation: Conversation, prompt: str, emit: Emit) -> TurnResult:
        engine_session_id = self._bound.get(conversation.conversation_id)
        if engine_session_id is None:
            raise EngineError("The scripted engine was given a turn before it was started.")
        self.prompts.append((conversation.conversation_id, prompt))
        own = self._own[engine_session_id]
        own.messages.append(RecordMessage("user", prompt))
        seed_sha256 = _latest_seed_sha256(own.texts)
        _, instruction = split_background(prompt)
        if slow := _SLOW.search(instruction):
            await emit(EngineOutput(kind="terminal", content=f"working for {slow[1]} s"))
            await asyncio.sleep(int(slow[1]))
        reply = scripted_reply(instruction, sum(len(t) for t in own.texts), seed_sha256)
        own.messages.append(RecordMessage("assistant", reply))
        # Its one reply is the whole turn: the reply ends it.
        await emit(EngineOutput(kind="chat_assistant", content=reply, ends_turn=True))
        return TurnResult(engine_session_id=engine_session_id)

    async def end(self, conversation_id: str) -> None:
        # Its own conversation stays, so a later launch can resume it.
        self._bound.pop(conversation_id, None)


def _latest_seed_sha256(texts: list[str]) -> str | None:
    for text in reversed(texts):
        brief, _ = split_background(text)
        if brief is not None:
            return hashlib.sha256(brief.encode("utf-8")).hexdigest()
    return None
