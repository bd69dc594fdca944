"""Stopping a conversation's worker ends it even when a cancel is lost on the way."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace

from seedline_runner.live import ConversationWorker


async def test_a_worker_that_lost_one_cancel_is_cancelled_again_until_it_ends():
    lost = asyncio.Event()

    async def work() -> None:
        # As a wait_for in Python 3.11 can do when its awaited reply lands at that moment.
        try:
            await asyncio.sleep(3600)
        except asyncio.CancelledError:
            lost.set()
        await asyncio.Event().wait()  # its next message, which never comes

    live = SimpleNamespace(worker=asyncio.create_task(work()))
    await asyncio.sleep(0)

    await asyncio.wait_for(ConversationWorker(publisher=None, clock=str).stop(live), 10)

    assert lost.is_set() and live.worker is None
