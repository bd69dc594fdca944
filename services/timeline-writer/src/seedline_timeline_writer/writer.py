"""Append normalised entries to SEEDLINE_TIMELINE, once per entry_id, for ever.

Dedupe has two layers: JetStream's Nats-Msg-Id window (2 minutes) catches a
retried publish, and the projection's entry_id index catches everything later.
The projection is written here, right after the append, so the index is always
as new as the stream; ``catch_up`` closes the one gap a crash can leave (appended
to the stream, not yet projected) before any new input is looked at.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Callable, Sequence

from nats.aio.msg import Msg
from nats.js import JetStreamContext

from seedline_contracts import subjects
from seedline_contracts.codec import decode, encode
from seedline_contracts.timeline import TimelineEntry
from seedline_platform.clock import now_text
from seedline_platform.logging import get_logger
from seedline_platform.natsio import (
    AtomicBatchRefused,
    park_message,
    publish_atomic,
    publish_window,
)
from seedline_platform.replay import last_seq, replay

from .normalise import Accepted, normalise, rejected_record
from .store import TimelineStore

log = get_logger(__name__)


@dataclass(frozen=True)
class AppendResult:
    seq: int
    duplicate: bool


def _subject(entry: TimelineEntry) -> str:
    return subjects.timeline_subject(entry.instance_id, entry.repo, entry.session_id, entry.kind)


class TimelineWriter:
    def __init__(
        self, js: JetStreamContext, store: TimelineStore, clock: Callable[[], str] = now_text
    ) -> None:
        self._js = js
        self._store = store
        self._clock = clock
        # One append at a time: dedupe-then-publish must not interleave, or two
        # copies of an entry could both look new.
        self._lock = asyncio.Lock()
        # Set while an append may have reached the stream without its projection:
        # a retry would then see those entries as new, publish them again and get
        # duplicate acks, so it first projects what the stream already holds.
        self._unsettled = False

    async def catch_up(self) -> int:
        """Project stream entries that a crash left unprojected. Returns how many."""
        start = await self._store.applied_seq() + 1
        end = await last_seq(self._js, subjects.TIMELINE_STREAM)
        count = 0
        async for msgs in replay(self._js, subjects.TIMELINE_STREAM, subjects.TIMELINE_ALL, start, end):
            await self._store.append(
                [(m.metadata.sequence.stream, decode(m.data, TimelineEntry)) for m in msgs]
            )
            count += len(msgs)
        if count:
            log.info("timeline_caught_up", entries=count, through_seq=end)
        return count

    async def append_entries(self, entries: Sequence[TimelineEntry]) -> list[AppendResult]:
        """Append in order; an entry_id seen before (ever) returns the first entry's seq."""
        async with self._lock:
            if self._unsettled:
                await self.catch_up()
                self._unsettled = False
            known = await self._store.known([e.entry_id for e in entries])
            fresh: list[TimelineEntry] = []
            for entry in entries:
                if entry.entry_id not in known:
                    known[entry.entry_id] = 0  # claimed by this batch
                    fresh.append(entry)
            self._unsettled = True
            published = await self._publish(fresh)
            for seq, entry, _ in published:
                known[entry.entry_id] = seq
            await self._store.append([(seq, entry) for seq, entry, dup in published if not dup])
            self._unsettled = False
            fresh_ids = {id(e) for e in fresh}
            return [
                AppendResult(known[e.entry_id], duplicate=id(e) not in fresh_ids) for e in entries
            ]

    async def _publish(self, fresh: Sequence[TimelineEntry]) -> list[tuple[int, TimelineEntry, bool]]:
        """Append to the stream; returns (seq, entry, already stored) for each entry.

        One atomic batch when the stream allows it (one commit instead of one fsync
        per entry). When the server refuses the batch (a Nats-Msg-Id still in its
        duplicate window after a crash, or atomic batches off), nothing of it was
        stored and each entry is published on its own, duplicates reported per entry.
        """
        messages = [(_subject(e), encode(e), {"Nats-Msg-Id": e.entry_id}) for e in fresh]
        if not messages:
            return []
        try:
            seqs = await publish_atomic(self._js, messages)
            return [(seq, entry, False) for seq, entry in zip(seqs, fresh)]
        except AtomicBatchRefused as refused:
            log.info("atomic_batch_refused", reason=str(refused), size=len(messages))
        acks = await publish_window(self._js, messages)
        return [(ack.seq, entry, bool(ack.duplicate)) for entry, ack in zip(fresh, acks)]

    async def handle_ingest(self, msgs: Sequence[Msg]) -> None:
        """A batch from SEEDLINE_INGEST: append what is valid, park what is not."""
        received_at = self._clock()
        accepted: list[TimelineEntry] = []
        rejected: list[tuple[str, bytes, None]] = []
        for msg in msgs:
            result = normalise(msg.data, received_at)
            if isinstance(result, Accepted):
                accepted.append(result.entry)
            else:
                record = rejected_record(result, msg.data, received_at, msg.metadata.sequence.stream)
                rejected.append((subjects.REJECTED_TIMELINE, encode(record), None))
        if accepted:
            await self.append_entries(accepted)
        if rejected:
            await publish_window(self._js, rejected)
            log.info("ingest_rejected", count=len(rejected))

    async def park(self, msg: Msg, reason: str) -> None:
        await park_message(self._js, msg, reason, subjects.REJECTED_TIMELINE)
