"""The ingest path on fakes: validation, dedupe, runner-scoped permission, rejects."""

from __future__ import annotations

import asyncio
import json

from seedline_contracts import subjects
from seedline_contracts.timeline import TimelineEntry
from seedline_devtools.fakes import FakeMsg
from seedline_platform.publishing import RecordingPublisher
from seedline_platform.settings import Settings
from seedline_timeline_writer.bootstrap import Ports, bootstrap
from seedline_timeline_writer.launches import InMemoryLaunchFeed, InMemoryLaunchRegistry, Launch
from seedline_timeline_writer.store import InMemoryTimelineStore
from seedline_timeline_writer.stream import InMemoryTimelineStream
from seedline_timeline_writer.writer import TimelineWriter

NOW = "2026-12-01T10:00:00Z"
MAC = subjects.ingest_runner_subject("mac-mini-1")


def body(n: int, **over) -> bytes:
    entry = {"entry_id": f"e-{n}", "instance_id": "inst-a", "repo": "apps/x",
             "session_id": "csess_1", "kind": "chat_assistant", "content": f"reply {n}"}
    entry.update(over)
    return json.dumps(entry).encode()


class Harness:
    def __init__(self, redact_at_ingest: bool = False) -> None:
        self.store = InMemoryTimelineStore()
        self.stream = InMemoryTimelineStream()
        self.registry = InMemoryLaunchRegistry()
        self.feed = InMemoryLaunchFeed()
        self.rejects = RecordingPublisher()
        settings = Settings(redact_at_ingest=redact_at_ingest)
        parts = bootstrap(settings, Ports(
            store=self.store, stream=self.stream, publisher=self.rejects,
            launches=self.registry, feed=self.feed, clock=lambda: NOW))
        self.writer, self.ingest = parts.writer, parts.ingest

    async def feed_msgs(self, *msgs: FakeMsg) -> None:
        await self.ingest.handle(list(msgs))

    def stored_ids(self) -> list[str]:
        return [e.entry_id for e in self.stream.entries]

    def reasons(self) -> list[str]:
        return [json.loads(p)["reason_code"] for p in self.rejects.on(subjects.REJECTED_TIMELINE)]


async def test_trusted_entries_are_appended_in_order_and_duplicates_once():
    h = Harness()
    await h.feed_msgs(FakeMsg(body(1)), FakeMsg(body(2)), FakeMsg(body(1, content="again")))
    await h.feed_msgs(FakeMsg(body(2)))
    assert h.stored_ids() == ["e-1", "e-2"]
    assert (await h.store.entry(1)).content == "reply 1"


PRINTED = "DATABASE_URL=postgres://admin:hunter2@db.internal/app\nNODE_ENV=production"


async def test_entries_are_stored_as_written_unless_the_operator_redacts_at_ingest():
    plain, redacting = Harness(), Harness(redact_at_ingest=True)
    for h in (plain, redacting):
        await h.feed_msgs(FakeMsg(body(1, content=PRINTED)), FakeMsg(body(2)))
    assert plain.stream.entries[0].content == PRINTED
    assert plain.stream.entries[0].redacted is None
    stored = redacting.stream.entries[0]
    assert stored.content == (
        "DATABASE_URL=postgres://admin:[secret left out: password in a URL]@db.internal/app"
        "\nNODE_ENV=production"
    )
    assert stored.redacted == 1
    # The stored entry says it was redacted, even when nothing was found.
    assert redacting.stream.entries[1].redacted == 0
    assert (await redacting.store.entry(1)).content == stored.content


async def test_a_runner_entry_of_a_conversation_never_launched_there_is_not_permitted():
    h = Harness()
    h.registry.launches.add(Launch("other-box", "inst-a", "apps/x", "csess_1"))
    await h.feed_msgs(FakeMsg(body(1), subject=MAC))
    assert h.stored_ids() == [] and h.reasons() == ["not_permitted"]


async def test_a_runner_entry_of_its_own_launch_is_accepted_but_never_a_chat_user():
    h = Harness()
    h.registry.launches.add(Launch("mac-mini-1", "inst-a", "apps/x", "csess_1"))
    await h.feed_msgs(FakeMsg(body(1), subject=MAC), FakeMsg(body(2, kind="chat_user"), subject=MAC))
    assert h.stored_ids() == ["e-1"] and h.reasons() == ["not_permitted"]


async def test_the_same_session_id_of_another_instance_is_another_conversation():
    h = Harness()
    h.registry.launches.add(Launch("mac-mini-1", "inst-a", "apps/x", "csess_1"))
    await h.feed_msgs(FakeMsg(body(1, instance_id="inst-b"), subject=MAC))
    assert h.reasons() == ["not_permitted"]


async def test_a_launch_not_yet_recorded_is_read_from_the_sessions_stream_before_refusing():
    h = Harness()
    h.feed.events = [None, Launch("mac-mini-1", "inst-a", "apps/x", "csess_1")]
    await h.feed_msgs(FakeMsg(body(1), subject=MAC))
    assert h.stored_ids() == ["e-1"] and h.reasons() == []
    # Its conversation's newest launch, read directly: the stream was not read through.
    assert h.registry.mark == 0
    await h.feed_msgs(FakeMsg(body(2), subject=MAC))  # now known without reading again
    assert h.stored_ids() == ["e-1", "e-2"]


async def test_a_machine_s_first_output_of_its_newest_launch_asks_the_registry_nothing():
    h = Harness()
    asked = []
    permitted = h.registry.permitted

    async def counted(launches):
        asked.append(launches)
        return await permitted(launches)

    h.registry.permitted = counted
    h.feed.events = [Launch("mac-mini-1", "inst-a", "apps/x", "csess_1")]
    await h.feed_msgs(FakeMsg(body(1), subject=MAC))
    assert h.stored_ids() == ["e-1"] and asked == []  # the feed's newest, then recorded
    assert h.registry.launches == {Launch("mac-mini-1", "inst-a", "apps/x", "csess_1")}
    # Output of a launch older than its conversation's newest asks the registry first.
    h.registry.launches.add(Launch("pc-2", "inst-a", "apps/x", "csess_1"))
    h.registry.held_here = lambda launches: set()  # as a copy that did not record it
    await h.feed_msgs(FakeMsg(body(2), subject=subjects.ingest_runner_subject("pc-2")))
    assert h.stored_ids() == ["e-1", "e-2"] and len(asked) == 1 and h.registry.mark == 0


async def test_a_launch_older_than_its_conversations_newest_is_found_by_reading_the_stream():
    h = Harness()
    # Launched on this machine, then moved: its newest launch is elsewhere, and this
    # machine's output from before the move still counts.
    h.feed.events = [Launch("mac-mini-1", "inst-a", "apps/x", "csess_1"),
                     Launch("pc-2", "inst-a", "apps/x", "csess_1")]
    await h.feed_msgs(FakeMsg(body(1), subject=MAC))
    assert h.stored_ids() == ["e-1"] and h.reasons() == []
    assert h.registry.mark == 2


async def test_bad_input_is_rejected_with_its_reason_and_nothing_else_is_lost():
    h = Harness()
    await h.feed_msgs(
        FakeMsg(b"not json"), FakeMsg(body(1, at="0001-01-01T00:00:00Z")),
        FakeMsg(body(2, repo="a\x00b")), FakeMsg(body(3)),
    )
    assert h.stored_ids() == ["e-3"]
    assert h.reasons() == ["not_json", "invalid_entry", "bad_token"]


async def test_an_append_that_failed_after_reaching_the_stream_is_projected_on_retry():
    h = Harness()
    original = h.store.append
    calls = {"n": 0}

    async def loses_first_commit(stored):
        calls["n"] += 1
        if calls["n"] == 1:
            raise ConnectionError("Postgres went away")
        await original(stored)

    h.store.append = loses_first_commit
    try:
        await h.feed_msgs(FakeMsg(body(1)))
    except ConnectionError:
        pass
    await h.feed_msgs(FakeMsg(body(1)), FakeMsg(body(2)))
    assert h.stored_ids() == ["e-1", "e-2"]
    assert [s for s in sorted(h.store.entries)] == [1, 2]


class HeldStore:
    """The projection, with one copy's writes held back until released."""

    def __init__(self, store: InMemoryTimelineStore) -> None:
        self.store, self.waiting, self.release = store, asyncio.Event(), asyncio.Event()

    def __getattr__(self, name):
        return getattr(self.store, name)

    async def append(self, stored) -> None:
        if stored:
            self.waiting.set()
            await self.release.wait()
        await self.store.append(stored)


def entry(n: int) -> TimelineEntry:
    return TimelineEntry(f"e-{n}", "inst-a", "apps/x", "csess_1", "terminal", f"line {n}",
                         NOW, None, None)


async def test_two_copies_appending_at_once_leave_no_entry_out_of_the_projection():
    """Copy A's entries reach the stream first, copy B's after them and are projected
    first: A's must not be skipped as below the projection's offset (fault harness, seed 9)."""
    stream, store = InMemoryTimelineStream(), InMemoryTimelineStore()
    held = HeldStore(store)
    a, b = TimelineWriter(stream, held), TimelineWriter(stream, store)

    first = asyncio.create_task(a.append_entries([entry(1), entry(2)]))
    await held.waiting.wait()
    await b.append_entries([entry(3)])
    held.release.set()
    await first

    assert sorted(store.entries) == [1, 2, 3]
    assert [e.entry_id for _, e in sorted(store.entries.items())] == ["e-1", "e-2", "e-3"]


async def test_a_copy_told_its_entries_are_duplicates_projects_what_the_other_stored():
    """Copy A stored entries and died before projecting them; copy B, handed the same
    entries, gets duplicate acks: it projects them from the stream."""
    stream, store = InMemoryTimelineStream(), InMemoryTimelineStore()
    await stream.append([entry(1), entry(2)])  # A's append, never projected

    await TimelineWriter(stream, store).append_entries([entry(1), entry(2)])

    assert sorted(store.entries) == [1, 2]


async def test_a_copy_appending_alone_never_asks_the_offset_and_asks_after_another_copy():
    stream, store = InMemoryTimelineStream(), InMemoryTimelineStore()
    asked = []
    applied = store.applied_seq

    async def counted():
        asked.append(1)
        return await applied()

    store.applied_seq = counted
    a = TimelineWriter(stream, store)
    for n in range(1, 4):
        await a.append_entries([entry(n)])
    assert asked == []  # each append begins where this copy's last one ended
    await stream.append([entry(4)])  # another copy's append, which died before projecting
    await a.append_entries([entry(5)])
    assert len(asked) == 1
    assert [e.entry_id for _, e in sorted(store.entries.items())] == [
        "e-1", "e-2", "e-3", "e-4", "e-5"]
