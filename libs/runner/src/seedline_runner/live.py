"""A conversation this machine is hosting, and the queue that runs its turns in order.

Each conversation has one worker task taking messages from its own queue, so
its turns never overlap or reorder while other conversations run alongside.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass, field

import structlog
from seedline_contracts.runner import LaunchReply, LaunchRequest, RunnerEvent

from .containment import note_step
from .engines.base import Engine, EngineOutput, TurnResult, join_replies
from .framing import frame_first_prompt
from .publishing import Publisher
from .store import Conversation
from .timeline_out import timeline_entry

log = structlog.get_logger(__name__)


@dataclass(frozen=True)
class Step:
    """One message for the engine: the launch's instruction or a delivered turn."""

    step_id: str
    content: str


@dataclass
class LiveConversation:
    request: LaunchRequest
    engine_name: str
    engine: Engine
    conversation: Conversation
    launch_reply: LaunchReply
    engine_session_id: str | None
    pending_brief: str | None = None
    held_brief: str | None = None
    accepted_turns: set[int] = field(default_factory=set)
    queue: asyncio.Queue[Step] = field(default_factory=asyncio.Queue)
    worker: asyncio.Task[None] | None = None

    @property
    def session_id(self) -> str:
        return self.request.session_id


class ConversationWorker:
    def __init__(self, publisher: Publisher, clock: Callable[[], str]) -> None:
        self._publisher = publisher
        self._clock = clock

    def start(self, live: LiveConversation) -> None:
        live.worker = asyncio.create_task(self._work(live), name=f"conversation:{live.session_id}")

    async def stop(self, live: LiveConversation) -> None:
        if live.worker is None:
            return
        # A cancel can be lost inside a library's wait_for (Python 3.11) when what it
        # waited for, an entry's PubAck say, arrives at that moment: the worker would
        # then wait for its next message for ever. Cancel again until it has ended.
        while not live.worker.done():
            live.worker.cancel()
            await asyncio.wait({live.worker}, timeout=1.0)
        live.worker = None

    async def _work(self, live: LiveConversation) -> None:
        while True:
            step = await live.queue.get()
            try:
                await self._run(live, step)
            except asyncio.CancelledError:
                raise
            except Exception:
                # A failure of one message must never stop the conversation's later messages.
                log.exception("step_failed", session_id=live.session_id, step=step.step_id)

    async def _run(self, live: LiveConversation, step: Step) -> None:
        brief = live.pending_brief
        prompt = frame_first_prompt(brief, step.content) if brief is not None else step.content
        note_step(step.step_id, prompt)  # a runner started again reads this step back
        emitted: list[EngineOutput] = []

        async def emit(output: EngineOutput) -> None:
            # Published before the engine reads on: what a dying machine loses is
            # only what the engine had not yet said.
            index = len(emitted)
            emitted.append(output)
            await self._publish(live, step, index, output)

        try:
            result = await live.engine.run_turn(live.conversation, prompt, emit)
        except asyncio.CancelledError:
            raise
        except Exception as error:
            await emit(_failure_outcome(live.engine_name, error))
            return
        note_step(None)
        # Spent only once a turn carrying it has been answered; a failed turn keeps it.
        live.pending_brief = None
        live.conversation.append_exchange(prompt, join_replies(emitted))
        if self._resume_turned_out_cold(live, result):
            await emit(_cold_resume_note(live.engine_name))
        await self._note_engine_session(live, result.engine_session_id)

    def _resume_turned_out_cold(self, live: LiveConversation, result: TurnResult) -> bool:
        """Settle a brief held back at launch once the first turn shows whether the resume held."""
        if live.held_brief is None:
            return False
        held, live.held_brief = live.held_brief, None
        if result.resumed is False:
            live.pending_brief = held
            return True
        return False

    async def _publish(
        self, live: LiveConversation, step: Step, index: int, output: EngineOutput
    ) -> None:
        request = live.request
        await self._publisher.entry(
            timeline_entry(
                instance_id=request.instance_id,
                repo=request.repo,
                session_id=request.session_id,
                engine=live.engine_name,
                step=step.step_id,
                index=index,
                output=output,
                at=self._clock(),
            )
        )

    async def _note_engine_session(
        self, live: LiveConversation, engine_session_id: str | None
    ) -> None:
        if engine_session_id is None or engine_session_id == live.engine_session_id:
            return
        live.engine_session_id = engine_session_id
        await self._publisher.event(
            RunnerEvent(
                type="engine_bound",
                session_id=live.session_id,
                at=self._clock(),
                engine_session_id=engine_session_id,
            )
        )


def _failure_outcome(engine_name: str, error: Exception) -> EngineOutput:
    detail = str(error).strip() or type(error).__name__
    return EngineOutput("outcome", f"{engine_name} could not answer this message: {detail}")


def _cold_resume_note(engine_name: str) -> EngineOutput:
    return EngineOutput(
        "outcome",
        f"{engine_name} could not pick up its earlier conversation after all and answered "
        "without it; the brief of the earlier conversation goes with the next message.",
    )
