"""A batch consumer that names its message type: the payloads are decoded at the edge, the
handler is given a Batch, a payload that is not the type is parked on its first delivery,
and the batch's end is given even when its last message was parked. A parked message is
kept once for each consumer that parks it."""

from __future__ import annotations

import asyncio

import msgspec
import nats
import pytest

from seedline_platform.consumer import Batch, BatchConsumer, Consumption

pytestmark = pytest.mark.servers


class Fact(msgspec.Struct):
    n: int


async def _consume(nats_server, payloads: list[bytes], batches: int, batch_size: int = 16):
    """What the handler was given and what was parked, once `batches` batches came."""
    nc = await nats.connect(nats_server.url)
    js = nc.jetstream()
    await js.add_stream(name="TYPED", subjects=["typed.>"])
    given: list[Batch] = []
    parked: list[tuple[int, str]] = []

    async def handle(batch: Batch) -> None:
        given.append(batch)

    async def park(msg, reason: str) -> None:
        parked.append((msg.metadata.sequence.stream, reason))

    consumer = BatchConsumer(js, Consumption("TYPED", "typed", ("typed.>",), batch_size=batch_size,
                                             message=Fact), handle=handle, park=park)
    for payload in payloads:
        await js.publish("typed.x", payload)
    await consumer.start()
    running = asyncio.create_task(consumer.run())
    try:
        for _ in range(100):
            if len(given) >= batches:
                break
            await asyncio.sleep(0.05)
        info = await js.consumer_info("TYPED", "typed")
    finally:
        await consumer.stop(timeout=5)
        running.cancel()
        await asyncio.gather(running, return_exceptions=True)
        await nc.close()
    return given, parked, info


async def test_readable_messages_come_decoded_and_the_unreadable_one_is_parked_at_once(
        nats_server):
    given, parked, info = await _consume(
        nats_server, [b'{"n": 1}', b"not json", b'{"n": "three"}', b'{"n": 4}'], batches=1)
    (batch,) = given
    assert [(fact.n, msg.metadata.sequence.stream) for fact, msg in batch.items] == [(1, 1), (4, 4)]
    assert batch.last_seq == 4
    assert [seq for seq, _ in parked] == [2, 3]  # on their first delivery
    assert all(reason.startswith("not a Fact: ") for _, reason in parked)
    assert info.num_ack_pending == 0 and info.num_redelivered == 0


async def test_a_batch_says_whether_its_consumer_had_more_to_deliver(nats_server):
    given, _, _ = await _consume(nats_server, [b'{"n": 1}', b'{"n": 2}', b'{"n": 3}'],
                                 batches=2, batch_size=2)
    assert [(batch.last_seq, batch.more) for batch in given] == [(2, True), (3, False)]


async def test_a_batch_of_unreadable_messages_alone_still_gives_its_end(nats_server):
    given, parked, info = await _consume(nats_server, [b"[]", b'{"m": 1}'], batches=1)
    (batch,) = given
    assert batch.items == [] and batch.last_seq == 2  # the offset moves past both
    assert [seq for seq, _ in parked] == [1, 2]
    assert info.num_ack_pending == 0


async def test_a_message_is_kept_once_per_consumer_that_parks_it(nats_server):
    from seedline_contracts import subjects
    from seedline_platform import natsio

    nc = await nats.connect(nats_server.url)
    js = nc.jetstream()
    try:
        await natsio.ensure_streams(js, replicas=1)
        await js.add_stream(name="TWICE", subjects=["twice.>"])
        await js.publish("twice.x", b"unreadable")
        for durable in ("resolver-like", "gateway-like"):
            sub = await js.pull_subscribe("twice.>", durable=durable, stream="TWICE")
            (msg,) = await sub.fetch(1, timeout=2)
            for _ in range(2):  # parked again: its batch came back after a copy died
                await natsio.park_message(js, msg, "not a Fact", subjects.REJECTED_SESSIONS)
        info = await js.stream_info(subjects.REJECTED_STREAM)
        assert info.state.messages == 2
    finally:
        await nc.close()


async def test_a_projection_reset_behind_its_consumer_is_refilled_from_the_stream(nats_server):
    """The stored offset is the truth: where the durable acknowledged past it (rows and
    offset reset, or put back from an older backup), the projection is handed everything
    after it again; where it did not, nothing is handed twice."""
    nc = await nats.connect(nats_server.url)
    js = nc.jetstream()
    await js.add_stream(name="FOLDED", subjects=["folded.>"])
    stored = {"seq": 0}
    handed: list[int] = []

    async def applied() -> int:
        return stored["seq"]

    async def fold(batch: Batch) -> None:
        handed.extend(msg.metadata.sequence.stream for _, msg in batch.items)
        stored["seq"] = batch.last_seq

    async def park(msg, reason: str) -> None:
        raise AssertionError(reason)

    async def run_once(until: int) -> None:
        consumer = BatchConsumer(
            js, Consumption("FOLDED", "folded", ("folded.>",), batch_size=16, message=Fact,
                            idempotent=True), handle=fold, park=park, applied=applied)
        await consumer.start()
        running = asyncio.create_task(consumer.run())
        for _ in range(100):
            if stored["seq"] >= until and (await js.consumer_info(
                    "FOLDED", "folded")).ack_floor.stream_seq >= until:
                break
            await asyncio.sleep(0.05)
        await consumer.stop(timeout=5)
        running.cancel()
        await asyncio.gather(running, return_exceptions=True)

    try:
        for n in (1, 2, 3):
            await js.publish("folded.x", msgspec.json.encode(Fact(n)))
        await run_once(until=3)
        assert handed == [1, 2, 3]
        await js.publish("folded.x", msgspec.json.encode(Fact(4)))
        await run_once(until=4)  # started again, the offset where it was: only what is new
        assert handed == [1, 2, 3, 4]
        stored["seq"] = 0  # the rows and the offset were reset
        await run_once(until=4)
        assert handed == [1, 2, 3, 4, 1, 2, 3, 4]
    finally:
        await nc.close()
