"""A conversation this machine is hosting, and the queue that runs its turns in order.

Each conversation has one worker task taking messages from its own queue, so
its turns never overlap or reorder while other conversations run alongside.

A resume whose record proved it still waits for the engine to accept it
(``awaiting_acceptance``): the first run's first line tells. Accepted, the held brief
is dropped unread. Refused (``ResumeRefused``), or not told in time while the launch
reply waits (``ResumeCheck``), the engine is bound to a new conversation and the same
message is answered again with the brief in front. A refusal after the launch reply
said "resumed" is published as ``resume_lost`` (CONTRACT.md 6).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path

import structlog
from seedline_contracts.runner import LaunchReply, LaunchRequest, RunnerEvent

from .containment import note_step
from .engines.base import Engine, EngineOutput, ResumeRefused, TurnResult, join_replies
from .framing import frame_first_prompt
from .publishing import Publisher
from .store import Conversation
from .timeline_out import END_PART, timeline_entry

log = structlog.get_logger(__name__)


@dataclass(frozen=True)
class Step:
    """One message for the engine: the launch's instruction or a delivered turn."""

    step_id: str
    content: str


class ResumeCheck:
    """The launch reply waiting to learn whether the engine accepts the resume."""

    def __init__(self) -> None:
        self.verdict: asyncio.Future[bool] = asyncio.get_running_loop().create_future()

    @property
    def decided(self) -> bool:
        return self.verdict.done()

    @property
    def accepted(self) -> bool:
        return self.verdict.done() and self.verdict.result()

    def decide(self, accepted: bool) -> None:
        """The first word stands: a late acceptance never overturns a "not resumed" reply."""
        if not self.verdict.done():
            self.verdict.set_result(accepted)


# How long a stop waits for an engine whose answer is out to return (its command line
# writing its record of the turn and exiting): a hung one is ended anyway after it.
FINISH_SECONDS = 5.0


@dataclass
class LiveConversation:
    request: LaunchRequest
    engine_name: str
    engine: Engine
    conversation: Conversation
    engine_session_id: str | None
    workdir: Path | None = None
    # None until the launch reply is known (it may wait on the engine's first line).
    launch_reply: LaunchReply | None = None
    replied: asyncio.Event = field(default_factory=asyncio.Event)
    pending_brief: str | None = None
    held_brief: str | None = None
    # The digest of a brief the launch reply said waits for the first message: reported
    # as given once a turn with it is answered.
    brief_owed: str | None = None
    # The machine's line about a tree it was carried, said once before the first prompt.
    pending_note: str | None = None
    # The record proved the resume; the engine has yet to accept it.
    awaiting_acceptance: bool = False
    resume_check: ResumeCheck | None = None
    # The engine id last published as engine_bound.
    announced_engine_session_id: str | None = None
    accepted_turns: set[int] = field(default_factory=set)
    queue: asyncio.Queue[Step] = field(default_factory=asyncio.Queue)
    worker: asyncio.Task[None] | None = None
    # The running step's answer is out (its end marked) and its engine has not returned:
    # a command line writes its own record of the turn as it exits, and a stop then waits
    # for that (FINISH_SECONDS), so the record that moves with the conversation is whole.
    finishing: asyncio.Event | None = None

    @property
    def session_id(self) -> str:
        return self.request.session_id

    @property
    def resume_key(self) -> str | None:
        return self.request.resume.engine_session_id if self.request.resume else None

    def reply_with(self, reply: LaunchReply) -> None:
        self.launch_reply = reply
        self.replied.set()


class _StepSink:
    """Where one step's run reports: each output as it comes, and the engine's own id."""

    def __init__(self, worker: ConversationWorker, live: LiveConversation, step: Step) -> None:
        self._worker = worker
        self._live = live
        self._step = step
        self.outputs: list[EngineOutput] = []
        # Whether the step's end mark is out: one per step, the first the engine gives.
        self.ended = False

    async def __call__(self, output: EngineOutput) -> None:
        # Published before the engine reads on: what a dying machine loses is
        # only what the engine had not yet said.
        index = len(self.outputs)
        self.outputs.append(output)
        part: int | str = index
        if output.ends_turn and not self.ended:
            self.ended = True
            part = END_PART
            self._live.finishing = asyncio.Event()
        await self._worker._publish(self._live, self._step, part, output)

    async def end(self, output: EngineOutput) -> None:
        """Mark the step's end with `output` unless the engine has marked it already."""
        if not self.ended:
            await self(replace(output, ends_turn=True))

    async def bound(self, engine_session_id: str) -> None:
        await self._worker._engine_named(self._live, engine_session_id)


class ConversationWorker:
    def __init__(self, publisher: Publisher, clock: Callable[[], str]) -> None:
        self._publisher = publisher
        self._clock = clock

    def start(self, live: LiveConversation) -> None:
        if live.worker is not None:
            return
        live.worker = asyncio.create_task(self._work(live), name=f"conversation:{live.session_id}")

    async def stop(self, live: LiveConversation) -> None:
        if live.worker is None:
            return
        if live.finishing is not None:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(live.finishing.wait(), FINISH_SECONDS)
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
            finally:
                if live.finishing is not None:
                    live.finishing.set()
                    live.finishing = None

    async def _run(self, live: LiveConversation, step: Step) -> None:
        sink = _StepSink(self, live, step)
        try:
            prompt, result = await self._answer(live, step, sink)
        except asyncio.CancelledError:
            raise
        except ResumeRefused as refusal:
            # Nothing of the refused run was emitted: the same message goes again, to
            # a new conversation, with the brief in front.
            await self._resume_refused(live, sink, str(refusal))
            try:
                prompt, result = await self._answer(live, step, sink)
            except asyncio.CancelledError:
                raise
            except Exception as error:
                await sink.end(_failure_outcome(live.engine_name, error))
                return
        except Exception as error:
            await self._unanswered(live)
            await sink.end(_failure_outcome(live.engine_name, error))
            return
        # An engine that returned without saying its turn was over (a command line that
        # exited without its last line): the return is the only end there is.
        await sink.end(_unmarked_end(live.engine_name))
        note_step(None)
        # Spent only once a turn carrying it has been answered; a failed turn keeps it.
        live.pending_brief = live.pending_note = None
        if live.brief_owed is not None:
            await self._publisher.event(RunnerEvent(
                type="brief_given", session_id=live.session_id, at=self._clock(),
                brief_sha256=live.brief_owed))
            live.brief_owed = None
        live.conversation.append_exchange(prompt, join_replies(sink.outputs))
        if await self._resume_turned_out_cold(live, result):
            await sink(_cold_resume_note(live.engine_name))
        await self.note_engine_session(live, result.engine_session_id)

    async def _answer(
        self, live: LiveConversation, step: Step, sink: _StepSink
    ) -> tuple[str, TurnResult]:
        prompt = frame_first_prompt(live.pending_brief, step.content, live.pending_note)
        note_step(step.step_id, prompt)  # a runner started again reads this step back
        check = live.resume_check
        if check is None or check.decided:
            return prompt, await live.engine.run_turn(live.conversation, prompt, sink)
        attempt = asyncio.ensure_future(live.engine.run_turn(live.conversation, prompt, sink))
        try:
            await asyncio.wait({attempt, check.verdict}, return_when=asyncio.FIRST_COMPLETED)
        except BaseException:
            await _cancel(attempt)
            raise
        if not attempt.done() and not check.accepted:
            # The launch reply said "not resumed" before the engine said anything: this
            # run must not go on without the brief the reply says it was given.
            await _cancel(attempt)
            raise ResumeRefused(f"{live.engine_name} did not accept the resume in time.")
        return prompt, await attempt

    async def _engine_named(self, live: LiveConversation, engine_session_id: str) -> None:
        """The engine named its own conversation: settle a pending resume, publish the id."""
        if live.awaiting_acceptance:
            check = live.resume_check
            if check is not None and check.decided and not check.accepted:
                # Too late: the reply said "not resumed"; this run is being stopped and
                # the message answered anew with the brief.
                return
            if engine_session_id == live.resume_key:
                self._accepted(live)
            else:
                # Already on a new conversation of its own: nothing to rebind.
                await self._lose_resume(live, None, "it started a new conversation instead")
                if check is not None:
                    return  # the launch reply still waited: this run is stopped and redone
        await self.note_engine_session(live, engine_session_id)

    def _accepted(self, live: LiveConversation) -> None:
        live.awaiting_acceptance = False
        live.held_brief = None  # dropped unread: the engine continues its own conversation
        if live.resume_check is not None:
            live.resume_check.decide(True)

    async def _resume_refused(self, live: LiveConversation, sink: _StepSink, reason: str) -> None:
        log.info("resume_refused", session_id=live.session_id, reason=reason)
        if live.awaiting_acceptance:
            await self._lose_resume(live, sink, reason, rebind=True)
        else:
            # A conversation already under way that the engine lost later: go on anew.
            await self._go_cold(live)

    async def _lose_resume(
        self, live: LiveConversation, sink: _StepSink | None, reason: str, *, rebind: bool = False
    ) -> bool:
        """The engine will not continue: the held brief goes with the next prompt.

        ``rebind``: the engine is still bound to the conversation it refused. Returns
        whether the launch reply had already said "resumed"; the loss is then
        published as ``resume_lost``.
        """
        live.awaiting_acceptance = False
        check = live.resume_check
        told_resumed = check.accepted if check is not None else True
        if check is not None:
            check.decide(False)
        live.pending_brief, live.held_brief = live.held_brief, None
        if rebind:
            await self._go_cold(live)
        if told_resumed:
            await self._publisher.event(
                RunnerEvent(
                    type="resume_lost",
                    session_id=live.session_id,
                    at=self._clock(),
                    reason=reason,
                )
            )
            if sink is not None:
                await sink(_resume_lost_note(live.engine_name, live.pending_brief is not None))
        return told_resumed

    async def _unanswered(self, live: LiveConversation) -> None:
        """A first run that failed while the launch reply still waits: no resume is told."""
        check = live.resume_check
        if live.awaiting_acceptance and check is not None and not check.decided:
            await self._lose_resume(live, None, "the first run failed", rebind=True)

    async def _go_cold(self, live: LiveConversation) -> None:
        # Bind the engine to a new conversation of its own: no resume from now on.
        started = await live.engine.start(live.session_id, None, live.workdir)
        live.engine_session_id = started.engine_session_id
        await self.note_engine_session(live, started.engine_session_id)

    async def _resume_turned_out_cold(self, live: LiveConversation, result: TurnResult) -> bool:
        """Settle a resume no first line settled, once the turn shows whether it held.

        Returns whether a brief now waits for the next message because of it.
        """
        if not live.awaiting_acceptance:
            return False
        check = live.resume_check
        if result.resumed is False:
            # It answered in a new conversation of its own, without the brief.
            told_resumed = await self._lose_resume(live, None, "it answered without it")
            return told_resumed and live.pending_brief is not None
        if check is not None and check.decided and not check.accepted:
            # The reply said "not resumed" just before the engine accepted: keep the
            # reply true, so the next message goes to a new conversation with the brief.
            await self._lose_resume(live, None, "no word in time", rebind=True)
            return False
        self._accepted(live)
        return False

    async def _publish(
        self, live: LiveConversation, step: Step, index: int | str, output: EngineOutput
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

    async def note_engine_session(
        self, live: LiveConversation, engine_session_id: str | None
    ) -> None:
        """Publish ``engine_bound`` for an id the engine runs on, once per id."""
        if engine_session_id is None or engine_session_id == live.announced_engine_session_id:
            return
        live.engine_session_id = engine_session_id
        live.announced_engine_session_id = engine_session_id
        await self._publisher.event(
            RunnerEvent(
                type="engine_bound",
                session_id=live.session_id,
                at=self._clock(),
                engine_session_id=engine_session_id,
            )
        )


def _unmarked_end(engine_name: str) -> EngineOutput:
    return EngineOutput("outcome", f"{engine_name} ended its run without saying the turn was done.")


def _failure_outcome(engine_name: str, error: Exception) -> EngineOutput:
    detail = str(error).strip() or type(error).__name__
    return EngineOutput("outcome", f"{engine_name} could not answer this message: {detail}")


async def _cancel(task: asyncio.Future[object]) -> None:
    # Cancelling a run kills its command line's processes; wait until it has ended.
    while not task.done():
        task.cancel()
        await asyncio.wait({task}, timeout=1.0)
    if not task.cancelled():
        task.exception()  # retrieved: a run stopped this way has nothing more to say


def _resume_lost_note(engine_name: str, briefed: bool) -> EngineOutput:
    given = " and was given a brief of it with this message" if briefed else ""
    return EngineOutput(
        "outcome",
        f"{engine_name} could not continue its earlier conversation after all{given}.",
    )


def _cold_resume_note(engine_name: str) -> EngineOutput:
    return EngineOutput(
        "outcome",
        f"{engine_name} could not pick up its earlier conversation after all and answered "
        "without it; the brief of the earlier conversation goes with the next message.",
    )
