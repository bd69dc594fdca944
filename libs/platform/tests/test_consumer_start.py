"""A batch consumer started while the cluster answers nothing (a leader being elected after
a node is lost) waits and asks again, and then consumes; an error that is no outage still
fails the start at once."""

from __future__ import annotations

import asyncio
import contextlib

import nats
import pytest
from nats.errors import TimeoutError as NatsTimeout

from seedline_platform.consumer import BatchConsumer, Consumption

pytestmark = pytest.mark.servers


class Unanswered:
    """The JetStream context, whose first `silent` consumer creations go unanswered."""

    def __init__(self, js, silent: int, error: Exception) -> None:
        self._js, self.silent, self.error, self.asked = js, silent, error, 0

    async def add_consumer(self, *args, **kwargs):
        self.asked += 1
        if self.asked <= self.silent:
            raise self.error
        return await self._js.add_consumer(*args, **kwargs)

    def __getattr__(self, name):
        return getattr(self._js, name)


async def _started(nats_server, silent: int, error: Exception):
    nc = await nats.connect(nats_server.url)
    js = nc.jetstream()
    await js.add_stream(name="STARTS", subjects=["starts.>"])
    await js.publish("starts.x", b"one")
    given: list[list] = []

    async def handle(msgs) -> None:
        given.append(msgs)

    wrapped = Unanswered(js, silent, error)
    consumer = BatchConsumer(wrapped, Consumption("STARTS", "starts", ("starts.>",)),
                             handle=handle, park=_never_parked)
    return nc, consumer, wrapped, given


async def test_a_start_through_an_outage_asks_again_and_then_consumes(nats_server):
    nc, consumer, wrapped, given = await _started(nats_server, 2, NatsTimeout())
    try:
        await asyncio.wait_for(consumer.start(), 10)
        assert wrapped.asked == 3
        running = asyncio.create_task(consumer.run())
        for _ in range(100):
            if given:
                break
            await asyncio.sleep(0.05)
        assert [m.data for m in given[0]] == [b"one"]
        await consumer.stop(timeout=5)
        running.cancel()
        await asyncio.gather(running, return_exceptions=True)
    finally:
        await nc.close()


async def test_an_error_that_is_no_outage_fails_the_start_at_once(nats_server):
    nc, consumer, wrapped, _ = await _started(nats_server, 5, ValueError("bad config"))
    try:
        with pytest.raises(ValueError, match="bad config"):
            await consumer.start()
        assert wrapped.asked == 1
    finally:
        await nc.close()


async def _left_by_an_earlier_run(js, stream: str, messages: int, policy,
                                  acknowledged: int) -> None:
    """`stream` with `messages` messages and its durable `fold` as an earlier run left it:
    made with ack `policy`, three messages delivered, those up to `acknowledged` acked."""
    from nats.js import api as js_api

    await js.add_stream(name=stream, subjects=[f"{stream.lower()}.>"])
    for n in range(1, messages + 1):
        await js.publish(f"{stream.lower()}.{n}", str(n).encode())
    await js.add_consumer(stream, js_api.ConsumerConfig(
        durable_name="fold", ack_policy=policy, filter_subject=f"{stream.lower()}.>"))
    earlier = await js.pull_subscribe_bind("fold", stream=stream)
    for msg in await earlier.fetch(3, timeout=2):
        if msg.metadata.sequence.stream <= acknowledged:
            await msg.ack_sync()


async def _never_parked(msg, reason: str) -> None:
    raise AssertionError(reason)


async def test_a_durable_made_with_explicit_acks_is_made_again_with_one_ack_per_batch(nats_server):
    from nats.js import api as js_api

    nc = await nats.connect(nats_server.url)
    try:
        js = nc.jetstream()
        # As an earlier release made it: explicit acks; the third delivered, never acked.
        await _left_by_an_earlier_run(js, "POLICY", 5, js_api.AckPolicy.EXPLICIT, 2)
        given: list[bytes] = []

        async def handle(batch) -> None:
            given.extend(msg.data for msg in batch)  # untyped: the messages themselves

        consumer = BatchConsumer(js, Consumption("POLICY", "fold", ("policy.>",), ack_all=True),
                                 handle=handle, park=_never_parked)
        await consumer.start()
        info = await js.consumer_info("POLICY", "fold")
        assert info.config.ack_policy == js_api.AckPolicy.ALL
        running = asyncio.create_task(consumer.run())
        try:
            for _ in range(100):
                if len(given) >= 3:
                    break
                await asyncio.sleep(0.05)
            assert given == [b"3", b"4", b"5"]  # after what was acknowledged, nothing lost
        finally:
            await consumer.stop(timeout=2)
            running.cancel()
            await asyncio.gather(running, return_exceptions=True)
        # Started again (the service restarted), the durable made from a seq is taken as it
        # was made: where it starts cannot be changed either.
        again = BatchConsumer(js, Consumption("POLICY", "fold", ("policy.>",), ack_all=True),
                              handle=handle, park=_never_parked)
        await again.start()
        assert (await js.consumer_info("POLICY", "fold")).config.opt_start_seq == 3
    finally:
        await nc.close()


async def test_a_durable_that_acknowledged_past_the_stored_offset_is_made_again_from_it(
        nats_server):
    from nats.js import api as js_api

    nc = await nats.connect(nats_server.url)
    try:
        js = nc.jetstream()
        await _left_by_an_earlier_run(js, "BEHIND", 4, js_api.AckPolicy.ALL, 3)

        async def applied() -> int:
            return 1  # the projection was put back from an older copy: it holds only seq 1

        async def ignore(batch) -> None: ...

        consumer = BatchConsumer(js, Consumption("BEHIND", "fold", ("behind.>",), ack_all=True),
                                 handle=ignore, park=_never_parked, applied=applied)
        await consumer.start()
        info = await js.consumer_info("BEHIND", "fold")
        assert (info.config.deliver_policy, info.config.opt_start_seq) == (
            js_api.DeliverPolicy.BY_START_SEQUENCE, 2)
        assert info.num_pending == 3  # 2, 3 and 4 are delivered again
    finally:
        await nc.close()


async def test_a_consumer_of_a_stored_offset_keeps_its_state_in_memory_and_outlives_a_restart(
        nats_server):
    """Its durable is gone when the server restarts: made again from just after the offset
    the projection stored, the consumer reads on, and nothing at or below it comes again."""
    async with _restartable(nats_server) as js:
        await js.add_stream(name="KEPT", subjects=["kept.>"])
        for n in (1, 2, 3):
            await js.publish(f"kept.{n}", str(n).encode())
        stored = 0
        given: list[bytes] = []

        async def applied() -> int:
            return stored

        async def fold(batch) -> None:
            nonlocal stored
            given.extend(msg.data for msg in batch)
            stored = max(msg.metadata.sequence.stream for msg in batch)

        consumer = BatchConsumer(
            js, Consumption("KEPT", "fold", ("kept.>",), ack_all=True, idempotent=True,
                            fetch_wait=0.5),
            handle=fold, park=_never_parked, applied=applied)
        async with _running(consumer):
            assert (await js.consumer_info("KEPT", "fold")).config.mem_storage
            await _until(lambda: len(given) >= 3)
            nats_server.process.kill()
            nats_server.process.start()
            for n in (4, 5):
                await _published(js, f"kept.{n}", str(n).encode())
            await _until(lambda: len(given) >= 5, seconds=20)
            assert given == [b"1", b"2", b"3", b"4", b"5"]
            info = await js.consumer_info("KEPT", "fold")
            assert (info.config.mem_storage, info.config.opt_start_seq) == (True, 4)


async def test_a_pull_lost_with_its_server_is_asked_again_on_reconnecting(nats_server):
    """The server restarted never heard of the pull waiting when it went: the consumer asks
    again once connected, not when that request would have expired (a minute here)."""
    async with _restartable(nats_server) as js:
        await js.add_stream(name="PULLED", subjects=["pulled.>"])
        given: list[bytes] = []

        async def handle(msgs) -> None:
            given.extend(msg.data for msg in msgs)

        consumer = BatchConsumer(js, Consumption("PULLED", "d", ("pulled.>",), fetch_wait=60),
                                 handle=handle, park=_never_parked)
        async with _running(consumer):
            await asyncio.sleep(0.5)  # its pull waits on the server
            nats_server.process.kill()
            nats_server.process.start()
            await _published(js, "pulled.1", b"after the restart")
            await _until(lambda: given, seconds=20)
            assert given == [b"after the restart"]


async def test_a_durable_an_earlier_release_kept_on_disk_is_made_again_in_memory(nats_server):
    from nats.js import api as js_api

    nc = await nats.connect(nats_server.url)
    try:
        js = nc.jetstream()
        await _left_by_an_earlier_run(js, "ONDISK", 4, js_api.AckPolicy.ALL, 2)

        async def applied() -> int:
            return 3  # the projection holds one more than the durable heard acknowledged

        async def ignore(batch) -> None: ...

        consumer = BatchConsumer(js, Consumption("ONDISK", "fold", ("ondisk.>",), ack_all=True),
                                 handle=ignore, park=_never_parked, applied=applied)
        await consumer.start()
        info = await js.consumer_info("ONDISK", "fold")
        assert (info.config.mem_storage, info.config.opt_start_seq, info.num_pending) == (
            True, 4, 1)
    finally:
        await nc.close()


async def _until(done, seconds: float = 10.0) -> None:
    for _ in range(int(seconds / 0.05)):
        if done():
            return
        await asyncio.sleep(0.05)
    raise AssertionError("not within the time given")


async def _published(js, subject: str, data: bytes) -> None:
    """Published once the restarted server's JetStream answers again."""
    for _ in range(100):
        try:
            await js.publish(subject, data, timeout=1)
            return
        except Exception:
            await asyncio.sleep(0.1)
    raise AssertionError(f"{subject} not published")


@contextlib.asynccontextmanager
async def _restartable(nats_server):
    """A JetStream context on a connection that follows the embedded server through a
    restart (the test kills it and starts it again)."""
    if nats_server.process is None:
        pytest.skip("needs the embedded nats-server, which this test kills and restarts")
    nc = await nats.connect(nats_server.url, max_reconnect_attempts=-1, reconnect_time_wait=0.2)
    try:
        yield nc.jetstream()
    finally:
        await nc.close()


@contextlib.asynccontextmanager
async def _running(consumer: BatchConsumer):
    await consumer.start()
    running = asyncio.create_task(consumer.run())
    try:
        yield
    finally:
        await consumer.stop(timeout=2)
        running.cancel()
        await asyncio.gather(running, return_exceptions=True)


async def test_a_copy_starting_while_another_folds_a_batch_keeps_the_durable(nats_server):
    """The running copy stores a batch's offset, then acknowledges it: a copy starting in
    between must not take the durable for ahead of the projection and make it again under
    the running copy."""
    nc = await nats.connect(nats_server.url)
    try:
        js = nc.jetstream()
        await js.add_stream(name="JOINING", subjects=["joining.>"])
        for n in (1, 2, 3):
            await js.publish(f"joining.{n}", str(n).encode())
        stored = 0

        async def applied() -> int:
            return stored

        async def ignore(batch) -> None: ...

        consumption = Consumption("JOINING", "fold", ("joining.>",), ack_all=True)
        first_copy = BatchConsumer(js, consumption, handle=ignore, park=_never_parked,
                                   applied=applied)
        await first_copy.start()  # it made the durable; its fetches, below, by hand
        await first_copy.close()
        running = await js.pull_subscribe_bind("fold", stream="JOINING")
        (first, second, third) = await running.fetch(3, timeout=2)
        stored = 2
        await second.ack_sync()

        async def applied_then_folded() -> int:
            nonlocal stored
            read = stored
            # Right after this read, the running copy folds the third and acknowledges it.
            stored = 3
            await third.ack_sync()
            return read

        joining = BatchConsumer(js, consumption, handle=ignore, park=_never_parked,
                                applied=applied_then_folded)
        await joining.start()
        info = await js.consumer_info("JOINING", "fold")
        # As the first copy made it (from seq 1), with all three acknowledged: not made
        # again from just after a stale read of the offset, the third to be folded twice.
        assert (info.config.opt_start_seq, info.ack_floor.stream_seq, info.num_pending) == (
            1, 3, 0)
        await joining.close()
    finally:
        await nc.close()
