"""Where the writer appends: SEEDLINE_TIMELINE, the source of truth (the port and a fake).

The JetStream adapter stores a batch of several entries as one atomic batch when the
stream allows it (one commit instead of one fsync per entry). When the server refuses
the batch (a Nats-Msg-Id still in its duplicate window after a crash, or atomic batches
off), nothing of it was stored, and each entry is published on its own with its
Nats-Msg-Id, duplicates reported per entry. One entry is one publish: a message is stored
whole or not at all by itself, and an atomic batch is first staged on the server's disk
(three fsyncs more for every entry a conversation appends one at a time).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from typing import Protocol

from nats.js import JetStreamContext

from seedline_contracts import subjects
from seedline_contracts.codec import decode, encode
from seedline_contracts.timeline import TimelineEntry
from seedline_platform.logging import get_logger
from seedline_platform.natsio import AtomicBatchRefused, publish_atomic, publish_window
from seedline_platform.observability import trace_headers
from seedline_platform.replay import last_seq, replay

log = get_logger(__name__)

Stored = tuple[int, TimelineEntry]


class TimelineStream(Protocol):
    async def append(self, entries: Sequence[TimelineEntry]) -> list[tuple[int, bool]]:
        """Append in order; (seq, already stored under this entry_id) for each entry."""
        ...

    async def last_seq(self) -> int: ...

    def since(self, start: int, end: int) -> AsyncIterator[list[Stored]]:
        """This partition's stored entries with start <= seq <= end, in order, in batches."""
        ...


def entry_subject(entry: TimelineEntry) -> str:
    return subjects.timeline_subject(entry.instance_id, entry.repo, entry.session_id, entry.kind)


PARTITION_HEADER = "Seedline-Partition"


class JetStreamTimeline:
    """Appends as one ingest partition's writer; each message names its partition, so a
    writer catching up after a crash projects only what it appended itself."""

    def __init__(self, js: JetStreamContext, partition: int = 0) -> None:
        self._js = js
        self._partition = str(partition)

    async def append(self, entries: Sequence[TimelineEntry]) -> list[tuple[int, bool]]:
        messages = [
            (entry_subject(e), encode(e),
             trace_headers({"Nats-Msg-Id": e.entry_id, PARTITION_HEADER: self._partition}))
            for e in entries
        ]
        if not messages:
            return []
        if len(messages) > 1:
            try:
                return [(seq, False) for seq in await publish_atomic(self._js, messages)]
            except AtomicBatchRefused as refused:
                log.info("atomic_batch_refused", reason=str(refused), size=len(messages))
        acks = await publish_window(self._js, messages)
        return [(ack.seq, bool(ack.duplicate)) for ack in acks]

    async def last_seq(self) -> int:
        return await last_seq(self._js, subjects.TIMELINE_STREAM)

    async def since(self, start: int, end: int) -> AsyncIterator[list[Stored]]:
        async for msgs in replay(
            self._js, subjects.TIMELINE_STREAM, subjects.TIMELINE_ALL, start, end
        ):
            mine = [m for m in msgs if (m.headers or {}).get(PARTITION_HEADER, "0") == self._partition]
            if mine:
                yield [(m.metadata.sequence.stream, decode(m.data, TimelineEntry)) for m in mine]


class InMemoryTimelineStream:
    """For unit tests: a stream that numbers entries from 1 and dedupes by entry_id."""

    def __init__(self) -> None:
        self.entries: list[TimelineEntry] = []
        self._by_id: dict[str, int] = {}
        self.fail_next = 0

    async def append(self, entries: Sequence[TimelineEntry]) -> list[tuple[int, bool]]:
        if self.fail_next:
            self.fail_next -= 1
            raise TimeoutError("the stream did not answer")
        out = []
        for entry in entries:
            if entry.entry_id in self._by_id:
                out.append((self._by_id[entry.entry_id], True))
                continue
            self.entries.append(entry)
            self._by_id[entry.entry_id] = len(self.entries)
            out.append((len(self.entries), False))
        return out

    async def last_seq(self) -> int:
        return len(self.entries)

    async def since(self, start: int, end: int) -> AsyncIterator[list[Stored]]:
        batch = [(seq, self.entries[seq - 1]) for seq in range(max(1, start), end + 1)]
        if batch:
            yield batch
