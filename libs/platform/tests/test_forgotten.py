"""erasure.Forgotten: what a fold leaves out once an erasure is taken in, and the fence
that takes one in only between two batches."""

from __future__ import annotations

import asyncio

from seedline_contracts.instances import Erasure
from seedline_core import lifecycle as lc
from seedline_platform.erasure import Forgotten
from seedline_platform.lifecycle_events import Step

GONE, KEPT = "inst-gone", "inst-kept"


def erasure(through_seq: int) -> Erasure:
    return Erasure(instance_id=GONE, reason="left", by=None, at="2026-12-01T10:00:00Z",
                   entries=1, through_seq=through_seq)


def requested(session_id: str, instance_id: str, wake_seq: int | None) -> Step:
    return Step(1, session_id, lc.Requested(session_id, instance_id, "apps/x", 1, "mac",
                                            "scripted", wake_seq), None, None)


class Fact:
    def __init__(self, instance_id: str, seq: int) -> None:
        self.instance_id, self.seq = instance_id, seq


async def test_only_what_the_erasure_covers_is_left_out():
    forgotten = Forgotten()
    steps = [requested("a", GONE, 10), requested("b", GONE, 11), requested("c", GONE, None),
             requested("d", KEPT, 5), Step(2, "a", lc.Stopped("done"), None, None)]
    assert forgotten.kept_steps(steps) == steps
    await forgotten.add(erasure(through_seq=10))
    # The covered wake's request goes; its later events stay (they find no row), and so do
    # a later wake, an open asked for by a person and the other instance's.
    assert [s.session_id for s in forgotten.kept_steps(steps)] == ["b", "c", "d", "a"]
    facts = [Fact(GONE, 9), Fact(GONE, 10), Fact(GONE, 11), Fact(KEPT, 3)]
    assert [(f.instance_id, f.seq) for f in forgotten.kept_facts(facts)] == [
        (GONE, 11), (KEPT, 3)]
    assert forgotten.covers(GONE, 10) and not forgotten.covers(GONE, None)
    assert not forgotten.covers(KEPT, 1)


async def test_an_erasure_is_taken_in_only_once_the_batch_being_folded_is_written():
    forgotten = Forgotten()
    written = asyncio.Event()
    seen_while_folding = []

    async def fold_a_batch():
        async with forgotten.folding():
            await asyncio.sleep(0.05)  # the batch's write in flight
            seen_while_folding.append(forgotten.covers(GONE, 1))
            written.set()

    folding = asyncio.create_task(fold_a_batch())
    await asyncio.sleep(0)
    await forgotten.add(erasure(through_seq=5))
    assert written.is_set() and seen_while_folding == [False]
    assert forgotten.covers(GONE, 1)
    await folding
