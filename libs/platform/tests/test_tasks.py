"""cancel_and_wait ends a task that swallowed its first cancel."""

from __future__ import annotations

import asyncio

from seedline_platform.tasks import cancel_and_wait


async def test_a_task_that_swallows_a_cancel_is_cancelled_again_until_it_ends():
    swallowed = 0

    async def stubborn() -> None:
        nonlocal swallowed
        while True:
            try:
                await asyncio.sleep(10)
            except asyncio.CancelledError:
                if swallowed == 0:  # what wait_for does on 3.11 when a reply races the cancel
                    swallowed += 1
                    continue
                raise

    task = asyncio.create_task(stubborn())
    await asyncio.sleep(0)
    await asyncio.wait_for(cancel_and_wait(task), 5)
    assert task.cancelled() and swallowed == 1


async def test_a_task_that_failed_is_waited_for_without_raising():
    async def fails() -> None:
        raise RuntimeError("gone")

    task = asyncio.create_task(fails())
    await asyncio.sleep(0)
    await cancel_and_wait(task)
    assert isinstance(task.exception(), RuntimeError)
