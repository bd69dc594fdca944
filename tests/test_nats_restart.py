"""nats-server killed (SIGKILL) and restarted mid-load, on the same port and store.

The timeline-writer and the continuity-resolver run in this event loop and are
never restarted: they reconnect by themselves. A producer publishes numbered
entries with JetStream publish and retries each one with the same Nats-Msg-Id
until it is acknowledged. Afterwards every acknowledged entry is in
SEEDLINE_TIMELINE and in the projection exactly once (DESIGN.md rules 2, 4, 5).
"""

from __future__ import annotations

import asyncio
import time
from collections import Counter

import pytest
from nats.js.api import DeliverPolicy

from seedline_contracts import subjects
from seedline_continuity_resolver.app import create_app as create_resolver
from seedline_platform import natsio
from seedline_platform.replay import last_seq
from seedline_devtools.testing import running
from seedline_devtools.testing_load import (
    acked_at_least,
    ingest_taken,
    projected_all,
    projected_at_least,
    Producer,
    out_of_ingest_order,
    projected_ids,
    stream_order,
    wait_until,
)
from seedline_timeline_writer.app import create_app as create_writer

pytestmark = [pytest.mark.servers, pytest.mark.slow, pytest.mark.timeout(120)]


async def timeline_projected(js, durable: str) -> bool:
    info = await js.consumer_info(subjects.TIMELINE_STREAM, durable)
    end = await last_seq(js, subjects.TIMELINE_STREAM)
    return info.num_ack_pending == 0 and info.ack_floor.stream_seq >= end


# A delivery the restart cut off (sent to the writer, never received) is given
# again only after the consumer's ack_wait (6 s); the writer is drained then.
ACK_WAIT_MARGIN = 45


async def test_nats_server_killed_and_restarted_mid_load_keeps_every_acknowledged_entry_once(
    settings, nats_server
):
    if nats_server.process is None:
        pytest.skip("needs the embedded nats-server, which this test kills and restarts")
    server = nats_server.process
    started = time.monotonic()
    writer, resolver = running(create_writer(settings)), running(create_resolver(settings))
    async with writer, resolver:
        nc = await natsio.connect(settings.nats_servers, "restart-producer")
        js = nc.jetstream(publish_async_max_pending=1024)
        producer = Producer(js, prefix="r")
        producing = asyncio.create_task(producer.run())
        try:
            before_kill = await wait_until(
                lambda: projected_at_least(settings.database_url, 300), 30, "a first 300 projected entries"
            )
            server.kill()
            acked_before_restart = len(producer.ingest_seq)
            await asyncio.sleep(1.5)
            server.start()
            await wait_until(lambda: acked_at_least(producer, acked_before_restart + 300), 30,
                             "300 more acknowledged entries after the restart")
            producer.stopping.set()
            await producing
        finally:
            producer.stopping.set()
            producing.cancel()
            await asyncio.gather(producing, return_exceptions=True)

        acked = producer.acked
        await wait_until(lambda: projected_all(settings.database_url, acked), ACK_WAIT_MARGIN,
                         "projecting every acknowledged entry")
        await wait_until(lambda: ingest_taken(js), ACK_WAIT_MARGIN,
                         "the writer acknowledging all ingest")
        await wait_until(lambda: timeline_projected(js, "continuity-resolver-timeline"),
                         ACK_WAIT_MARGIN, "the resolver projecting the whole timeline")
        # The resolver's fold kept its consumer in the server's memory: the restart lost it,
        # and it was made again from just after the offset the fold had stored.
        made_again = await js.consumer_info(subjects.TIMELINE_STREAM, "continuity-resolver-timeline")
        assert made_again.config.mem_storage
        assert made_again.config.deliver_policy == DeliverPolicy.BY_START_SEQUENCE
        # Neither service was restarted: their run tasks lived through the outage.
        for service in (writer, resolver):
            assert not service._task.done(), f"{type(service.app).__name__} stopped running"

        order = await stream_order(js)
        in_stream = Counter(order)
        in_projection = await projected_ids(settings.database_url)
        twice = sorted(i for i, c in in_stream.items() if c > 1)
        assert not twice, f"{len(twice)} entries appended more than once: {twice[:10]}"
        assert not [i for i, c in in_projection.items() if c > 1]
        lost = sorted(acked - in_stream.keys())
        assert not lost, f"{len(lost)} acknowledged entries lost from the stream: {lost[:10]}"
        assert acked <= in_projection.keys()
        late = out_of_ingest_order(order, producer.ingest_seq)
        assert not late, f"{len(late)} entries appended out of ingest order, first {late[:5]}"
        # Unacknowledged publishes may have landed too, but only once and in both places.
        assert in_projection.keys() == in_stream.keys()
        assert (await js.stream_info(subjects.REJECTED_STREAM)).state.messages == 0
        await nc.close()
    print(f"\nacknowledged {len(acked)} (projected before the kill: {before_kill}), "
          f"{producer.retries} retries, {time.monotonic() - started:.1f} s")
