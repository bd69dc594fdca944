"""Where a filtered durable consumer stands once it has nothing left (consumer_drained),
against a real nats-server: the seq of the last event it took, not the stream's end, and
nothing while it has an event to deliver or to hear acknowledged."""

from __future__ import annotations

import nats
import pytest
from nats.js import api

from seedline_platform.consumer import consumer_drained

pytestmark = pytest.mark.servers


async def test_a_drained_filtered_consumer_stands_at_the_last_event_it_took(nats_server):
    nc = await nats.connect(nats_server.url)
    try:
        js = nc.jetstream()
        await js.add_stream(name="FOLDS", subjects=["folds.>"])
        await js.add_consumer("FOLDS", api.ConsumerConfig(
            durable_name="taker", filter_subject="folds.taken",
            ack_policy=api.AckPolicy.EXPLICIT))
        assert await consumer_drained(js, "FOLDS", "taker") == 0  # nothing yet, nothing left
        for subject in ("folds.taken", "folds.other", "folds.taken", "folds.other"):
            await js.publish(subject, b"{}")
        assert await consumer_drained(js, "FOLDS", "taker") is None  # two to deliver
        sub = await js.pull_subscribe("folds.taken", durable="taker", stream="FOLDS")
        first, second = await sub.fetch(2, timeout=2)
        await first.ack()
        assert await consumer_drained(js, "FOLDS", "taker") is None  # one unacknowledged
        await second.ack_sync()
        assert await consumer_drained(js, "FOLDS", "taker") == 3  # the stream ends at 4
        assert await consumer_drained(js, "FOLDS", "nobody") is None  # cannot say
    finally:
        await nc.close()
