"""Stopping a conversation's worker ends it even when a cancel is lost on the way."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace

from seedline_contracts.runner import LaunchRequest
from seedline_runner import live as live_module
from seedline_runner.engines.base import EngineOutput, TurnResult
from seedline_runner.live import ConversationWorker, LiveConversation, Step
from seedline_runner.store import Conversation


async def test_a_worker_that_lost_one_cancel_is_cancelled_again_until_it_ends():
    lost = asyncio.Event()

    async def work() -> None:
        # As a wait_for in Python 3.11 can do when its awaited reply lands at that moment.
        try:
            await asyncio.sleep(3600)
        except asyncio.CancelledError:
            lost.set()
        await asyncio.Event().wait()  # its next message, which never comes

    live = SimpleNamespace(worker=asyncio.create_task(work()), finishing=None)
    await asyncio.sleep(0)

    await asyncio.wait_for(ConversationWorker(publisher=None, clock=str).stop(live), 10)

    assert lost.is_set() and live.worker is None


class _RecordsAfterItsAnswer:
    """An engine that says its answer, then writes its own record of the turn and returns,
    as a command line does when it exits; or never returns (`hangs`)."""

    def __init__(self, hangs: bool = False) -> None:
        self.hangs = hangs
        self.answered = asyncio.Event()
        self.recorded = False

    async def run_turn(self, conversation, prompt: str, emit) -> TurnResult:
        await emit(EngineOutput(kind="chat_assistant", content="done", ends_turn=True))
        self.answered.set()
        await asyncio.sleep(3600 if self.hangs else 0.3)
        self.recorded = True
        return TurnResult(engine_session_id="engine-1", resumed=None)


class _Published:
    def __init__(self) -> None:
        self.entries: list = []

    async def entry(self, entry) -> None:
        self.entries.append(entry)

    async def event(self, event) -> None: ...


def _running(engine) -> tuple[ConversationWorker, LiveConversation]:
    request = LaunchRequest(session_id="csess_1", instance_id="inst", repo="apps/x",
                            engine="fake", resume=None, seed=None, instruction="go")
    live = LiveConversation(request=request, engine_name="fake", engine=engine,
                            conversation=Conversation("c-1"), engine_session_id=None)
    worker = ConversationWorker(publisher=_Published(), clock=lambda: "2026-12-05T10:00:00Z")
    worker.start(live)
    live.queue.put_nowait(Step("s1", "go"))
    return worker, live


async def test_a_stop_right_after_the_answer_lets_the_engine_finish_its_record():
    engine = _RecordsAfterItsAnswer()
    worker, live = _running(engine)
    await asyncio.wait_for(engine.answered.wait(), 10)

    await asyncio.wait_for(worker.stop(live), 10)

    assert engine.recorded and live.worker is None


async def test_an_engine_that_does_not_return_after_its_answer_is_ended_anyway(monkeypatch):
    monkeypatch.setattr(live_module, "FINISH_SECONDS", 0.2)
    engine = _RecordsAfterItsAnswer(hangs=True)
    worker, live = _running(engine)
    await asyncio.wait_for(engine.answered.wait(), 10)

    await asyncio.wait_for(worker.stop(live), 10)

    assert not engine.recorded and live.worker is None
