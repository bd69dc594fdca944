"""A replay over a range the stream no longer holds whole, against a real nats-server: it
reads what is left, in order, and ends where the stream holds nothing more of the range."""

from __future__ import annotations

import asyncio

import nats
import pytest

from seedline_platform.replay import replay

pytestmark = pytest.mark.servers


async def test_a_replay_over_deleted_messages_reads_the_rest_and_ends(nats_server):
    nc = await nats.connect(nats_server.url)
    try:
        js = nc.jetstream()
        await js.add_stream(name="GAPS", subjects=["gaps.>"])
        for n in range(1, 9):
            await js.publish(f"gaps.{'kept' if n % 2 else 'other'}", str(n).encode())
        for seq in (3, 7, 8):  # one inside the range, and its end
            await js.delete_msg("GAPS", seq)
        read = [(m.metadata.sequence.stream, m.data)
                async for batch in replay(js, "GAPS", "gaps.kept", 1, 8, batch=2)
                for m in batch]
        assert read == [(1, b"1"), (5, b"5")]
        read = [m.metadata.sequence.stream
                async for batch in replay(js, "GAPS", ">", 2, 7) for m in batch]
        assert read == [2, 4, 5, 6]
    finally:
        await nc.close()


async def test_a_replay_of_one_subject_ends_where_the_range_ends_in_another_s_message(
        nats_server):
    nc = await nats.connect(nats_server.url)
    try:
        js = nc.jetstream()
        await js.add_stream(name="LATER", subjects=["later.>"])
        await js.publish("later.a", b"1")
        await js.publish("later.b", b"2")
        read = await asyncio.wait_for(_seqs(js), 10)
        assert read == [1]
    finally:
        await nc.close()


async def _seqs(js) -> list[int]:
    return [m.metadata.sequence.stream
            async for batch in replay(js, "LATER", "later.a", 1, 2) for m in batch]
