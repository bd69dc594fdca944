"""The watermark a read-your-writes wait waits on: woken by this copy's fold, and by the
stored offset when a sibling copy folded."""

from __future__ import annotations

import asyncio

from seedline_platform.watermark import Watermark


class Stored:
    """The offset table, as a sibling copy's fold would move it."""

    def __init__(self) -> None:
        self.seq = 0
        self.reads = 0

    async def read(self) -> int:
        self.reads += 1
        return self.seq


async def test_a_wait_for_a_seq_wakes_at_this_copys_commit_not_at_a_recheck():
    stored = Stored()
    mark = Watermark(stored.read, recheck_seconds=30.0)
    waiting = asyncio.create_task(mark.reached(5, timeout=30.0))
    await asyncio.sleep(0.01)
    await mark.advance(5)
    assert await asyncio.wait_for(waiting, 1.0) is True
    assert mark.seq == 5


async def test_a_sibling_copys_fold_is_seen_through_the_stored_offset():
    stored = Stored()
    mark = Watermark(stored.read, recheck_seconds=0.01)
    waiting = asyncio.create_task(mark.reached(3, timeout=5.0))
    await asyncio.sleep(0.03)
    stored.seq = 3  # folded elsewhere: this copy's advance is never called
    assert await asyncio.wait_for(waiting, 1.0) is True
    assert stored.reads >= 2


async def test_a_seq_never_folded_is_answered_false_after_the_timeout():
    mark = Watermark(Stored().read, recheck_seconds=0.01)
    assert await mark.reached(1, timeout=0.05) is False
