"""How the writer's JetStream adapter stores what it appends, on a real nats-server."""

from __future__ import annotations

import pytest

from seedline_contracts import subjects
from seedline_contracts.timeline import TimelineEntry
from seedline_platform import natsio
from seedline_timeline_writer.stream import JetStreamTimeline

pytestmark = pytest.mark.servers


def entry(n: int) -> TimelineEntry:
    return TimelineEntry(f"s-{n}", "bd43f4de", "apps/chess", "csess_1", "chat_user",
                         f"message {n}", "2026-08-17T10:00:00Z", None, None)


async def batch_ids(js, seqs: list[int]) -> list[str | None]:
    stored = [await js.get_msg(subjects.TIMELINE_STREAM, seq) for seq in seqs]
    return [(m.headers or {}).get("Nats-Batch-Id") for m in stored]


async def test_one_entry_is_one_publish_and_several_are_one_atomic_batch(settings):
    nc = await natsio.connect(settings.nats_servers, "stream-append-test")
    try:
        js = nc.jetstream()
        await natsio.ensure_streams(js, replicas=1)
        timeline = JetStreamTimeline(js)

        [(alone, duplicate)] = await timeline.append([entry(1)])
        assert not duplicate
        several = await timeline.append([entry(2), entry(3), entry(4)])
        assert [seq for seq, _ in several] == [alone + 1, alone + 2, alone + 3]
        # The server keeps the batch's id on what it stored of one.
        lone, *batched = await batch_ids(js, [alone, *(seq for seq, _ in several)])
        assert lone is None
        assert batched[0] is not None and set(batched) == {batched[0]}
        # A repeat of the lone entry is reported as stored before, at its seq.
        assert await timeline.append([entry(1)]) == [(alone, True)]
    finally:
        await nc.close()
