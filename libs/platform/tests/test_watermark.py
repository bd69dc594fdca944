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
        await asyncio.sleep(0)  # a round trip: other waits go on meanwhile
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


class Consumer:
    """Whether a fold's consumer has anything left, as consumer_drained asks the server:
    when drained, the seq it last delivered (`last`)."""

    def __init__(self, drained: bool = False, last: int = 0) -> None:
        self.drained = drained
        self.last = last
        self.asks = 0
        self.release = asyncio.Event()
        self.release.set()

    async def ask(self) -> int | None:
        self.asks += 1
        answer = self.last if self.drained else None  # as things were when asked
        await self.release.wait()
        return answer


async def test_a_fold_of_some_events_reaches_a_seq_it_never_takes_once_its_consumer_is_drained():
    # The stream ends at 9 in an event the fold does not take: its offset stays at 7.
    stored, consumer = Stored(), Consumer(drained=False)
    stored.seq = 7
    mark = Watermark(stored.read, recheck_seconds=0.01, drained=consumer.ask)
    waiting = asyncio.create_task(mark.reached(9, timeout=5.0))
    await asyncio.sleep(0.05)
    assert not waiting.done()  # an event it takes is still on its way
    consumer.drained = True
    assert await asyncio.wait_for(waiting, 1.0) is True
    # Without the probe, the same wait lasts its timeout.
    assert await Watermark(stored.read, recheck_seconds=0.01).reached(9, timeout=0.05) is False


async def test_waits_share_one_ask_and_an_ask_begun_before_a_wait_does_not_answer_it():
    stored, consumer = Stored(), Consumer(drained=False)
    mark = Watermark(stored.read, recheck_seconds=30.0, drained=consumer.ask)
    consumer.release.clear()
    first = asyncio.create_task(mark.reached(5, timeout=5.0))
    await asyncio.sleep(0.01)
    assert consumer.asks == 1
    # A wait that began after that ask was sent cannot take its answer: the event it waits
    # for may have been recorded after the server answered.
    consumer.drained = True
    second = asyncio.create_task(mark.reached(4, timeout=5.0))
    await asyncio.sleep(0.01)
    assert consumer.asks == 2
    consumer.release.set()
    assert await asyncio.wait_for(second, 1.0) is True
    # Its own ask said "not drained", and the second's proved seq 4 only: it waits on (30 s
    # recheck).
    assert not first.done()
    # Waits that begin together share one ask.
    consumer.release.clear()
    asks = consumer.asks
    together = [asyncio.create_task(mark.reached(6, timeout=5.0)) for _ in range(20)]
    await asyncio.sleep(0.01)
    consumer.release.set()
    assert await asyncio.wait_for(asyncio.gather(*together), 1.0) == [True] * 20
    assert consumer.asks - asks == 1
    await mark.advance(6)
    assert await asyncio.wait_for(first, 1.0) is True


async def test_a_drained_consumer_holds_everything_without_a_seq_and_an_unfed_mark_never_does():
    consumer = Consumer(drained=True)  # nothing delivered yet: seq 0, drained all the same
    mark = Watermark(Stored().read, drained=consumer.ask)
    assert await mark.holds_everything() is True and consumer.asks == 1
    consumer.last = 12
    assert await mark.settled() == 12  # where it stands: a read at 12 or later holds it all
    consumer.drained = False
    assert await mark.holds_everything() is False and await mark.settled() is None
    assert await Watermark(Stored().read).holds_everything() is False
    assert await Watermark(Stored().read).settled() is None


async def test_a_fold_of_this_copy_has_a_drained_wait_ask_again_at_once_not_at_a_recheck():
    stored, consumer = Stored(), Consumer(drained=False)
    mark = Watermark(stored.read, recheck_seconds=30.0, drained=consumer.ask)
    waiting = asyncio.create_task(mark.reached(9, timeout=30.0))
    await asyncio.sleep(0.01)
    assert consumer.asks == 1 and not waiting.done()
    consumer.drained = True  # the fold takes the last event it had (seq 7)...
    await mark.advance(7)
    assert await asyncio.wait_for(waiting, 1.0) is True  # ...and the wait asks again then
    assert consumer.asks == 2 and stored.reads == 1  # the stored offset was not read again


async def test_a_wait_a_drained_consumer_answers_reads_no_stored_offset():
    stored, consumer = Stored(), Consumer(drained=True, last=4)
    mark = Watermark(stored.read, recheck_seconds=30.0, drained=consumer.ask)
    assert await asyncio.wait_for(mark.reached(9, timeout=5.0), 1.0) is True
    assert (consumer.asks, stored.reads) == (1, 0)
    consumer.drained = False  # something left: the stored offset is read, and waited on
    assert await mark.reached(10, timeout=0.05) is False and stored.reads > 0


async def test_what_a_drained_consumer_proved_is_not_asked_again():
    # A launch waits for its decision's place twice (before the launch and before its
    # outcome): the second wait asks the server nothing.
    stored, consumer = Stored(), Consumer(drained=True, last=4)
    mark = Watermark(stored.read, recheck_seconds=30.0, drained=consumer.ask)
    assert await asyncio.wait_for(mark.reached(9, timeout=5.0), 1.0) is True
    consumer.drained = False  # something new since: it does not unprove seq 9
    assert await asyncio.wait_for(mark.reached(9, timeout=5.0), 1.0) is True
    assert await asyncio.wait_for(mark.reached(8, timeout=5.0), 1.0) is True
    assert (consumer.asks, stored.reads) == (1, 0) and mark.seq == 9
    assert await mark.reached(10, timeout=0.05) is False  # past it: asked, and waited on
    assert consumer.asks > 1


async def test_a_fold_whose_consumer_had_more_is_not_asked_after_until_a_batch_without():
    # In a burst each batch the fold takes comes with more behind it: a wait for a seq the
    # fold never takes asks the server nothing until the fold has taken what was pending.
    stored, consumer = Stored(), Consumer(drained=False)
    mark = Watermark(stored.read, recheck_seconds=30.0, drained=consumer.ask)
    await mark.advance(3, more=True)
    waiting = asyncio.create_task(mark.reached(9, timeout=30.0))
    await mark.advance(5, more=True)
    await mark.advance(7, more=True)
    await asyncio.sleep(0.01)
    assert consumer.asks == 0 and not waiting.done()
    consumer.drained = True
    await mark.advance(8, more=False)  # the last it had: now it may be drained
    assert await asyncio.wait_for(waiting, 1.0) is True
    assert consumer.asks == 1 and stored.reads == 1


async def test_a_fold_that_said_more_is_asked_after_at_a_recheck():
    # Another copy may take the batch that was pending: the recheck asks all the same.
    stored, consumer = Stored(), Consumer(drained=True)
    mark = Watermark(stored.read, recheck_seconds=0.02, drained=consumer.ask)
    await mark.advance(3, more=True)
    assert await asyncio.wait_for(mark.reached(9, timeout=5.0), 1.0) is True
    assert consumer.asks == 1


async def test_a_wait_given_the_offset_its_caller_just_read_does_not_read_it_again_first():
    stored, consumer = Stored(), Consumer(drained=False)
    mark = Watermark(stored.read, recheck_seconds=30.0, drained=consumer.ask)
    stored.seq = 7  # what the caller read with its rows
    assert await mark.reached(7, timeout=1.0, stored=7) is True and stored.reads == 0
    waiting = asyncio.create_task(mark.reached(9, timeout=5.0, stored=7))
    await asyncio.sleep(0.01)
    assert stored.reads == 0 and not waiting.done()  # waits on this copy's fold
    await mark.advance(9)
    assert await asyncio.wait_for(waiting, 1.0) is True and stored.reads == 0


async def test_a_wait_for_what_this_copys_fold_took_waits_for_its_commit_with_no_read():
    stored, consumer = Stored(), Consumer(drained=False)
    mark = Watermark(stored.read, recheck_seconds=30.0, drained=consumer.ask)
    mark.taking(6)  # the fold took a batch ending at 6 and is writing it
    waiting = asyncio.create_task(mark.reached(5, timeout=30.0))
    await asyncio.sleep(0.01)
    assert (stored.reads, consumer.asks) == (0, 0) and not waiting.done()
    await mark.advance(6)
    assert await asyncio.wait_for(waiting, 1.0) is True
    assert (stored.reads, consumer.asks) == (0, 0)
    # Past what it took: read and asked as before.
    assert await mark.reached(8, timeout=0.05) is False and stored.reads > 0


async def test_a_fold_that_took_a_seq_and_does_not_move_is_looked_past_after_a_recheck():
    stored = Stored()
    mark = Watermark(stored.read, recheck_seconds=0.01)
    mark.taking(4)
    stored.seq = 4  # folded elsewhere after all (this copy's batch went back)
    assert await asyncio.wait_for(mark.reached(4, timeout=5.0), 1.0) is True
    assert stored.reads >= 1
