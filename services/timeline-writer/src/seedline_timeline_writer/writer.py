"""Append normalised entries to SEEDLINE_TIMELINE, once per entry_id, for ever.

Dedupe has two layers: JetStream's Nats-Msg-Id window (2 minutes) catches a
retried publish, and the projection's entry_id index catches everything later.
The projection is written here, right after the append, so the index is always
as new as the stream; ``catch_up`` closes the one gap a crash can leave (appended
to the stream, not yet projected) before any new input is looked at.

Copies of the writer append side by side (the ingest consumer hands a copy what another
holds when it sees a gap, and any copy answers a synchronous append), and the projection
takes rows only above its stored offset. So a copy never projects its own entries above
entries of the stream it has not projected: it first reads those from the stream, and
after appends another copy made (duplicate acks) it projects through them too. Otherwise
a copy projecting seq 102 before another projects 100 and 101 would leave those two out of
the projection for ever (found by the fault harness, seed 9: a partition of one node).
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Sequence

import msgspec

from seedline_contracts.timeline import TimelineEntry
from seedline_core.redaction import redact
from seedline_platform.sealing import Sealer
from seedline_platform.logging import get_logger

from .store import TimelineStore
from .stream import TimelineStream

log = get_logger(__name__)


@dataclass(frozen=True)
class AppendResult:
    seq: int
    duplicate: bool


def without_secrets(entry: TimelineEntry) -> TimelineEntry:
    """The entry with its secrets left out, saying how many (CONTRACT.md 5)."""
    redacted = redact(entry.content)
    return msgspec.structs.replace(entry, content=redacted.text, redacted=redacted.count)


class TimelineWriter:
    def __init__(
        self, stream: TimelineStream, store: TimelineStore, redact_at_ingest: bool = False,
        sealer: Sealer | None = None,
    ) -> None:
        self._stream = stream
        self._store = store
        self._redact = redact_at_ingest
        # Content is sealed once, here: the stream and the projection store the same
        # sealed text, so a rebuild copies it without opening it.
        self._sealer = sealer
        # One append at a time: dedupe-then-publish must not interleave, or two
        # copies of an entry could both look new.
        self._lock = asyncio.Lock()
        # Set while an append may have reached the stream without its projection:
        # a retry would then see those entries as new, publish them again and get
        # duplicate acks, so it first projects what the stream already holds.
        self._unsettled = False
        # How far this copy knows the projection holds the stream (the offset never goes
        # back: a rebuild replays to the end): a copy appending alone asks no further.
        self._projected = 0

    async def catch_up(self) -> int:
        """Project stream entries that a crash left unprojected. Returns how many."""
        end = await self._stream.last_seq()
        count = await self._project_from_stream(end)
        if count:
            log.info("timeline_caught_up", entries=count, through_seq=end)
        return count

    async def _project_from_stream(self, end: int) -> int:
        """Project what the stream holds above the projection's offset, through `end`."""
        if end <= self._projected:
            return 0
        start = await self._store.applied_seq() + 1
        count = 0
        if start <= end:
            async for stored in self._stream.since(start, end):
                await self._store.append(stored)
                count += len(stored)
        self._projected = max(self._projected, end)
        return count

    async def _stored_form(self, entries: Sequence[TimelineEntry]) -> list[TimelineEntry]:
        """Secrets left out when the operator asks for it; content sealed."""
        if self._redact:
            entries = [without_secrets(entry) for entry in entries]
        if self._sealer is None or not self._sealer.enabled:
            return list(entries)
        return [
            msgspec.structs.replace(e, content=await self._sealer.seal(e.instance_id, e.content))
            for e in entries
        ]

    async def append_entries(self, entries: Sequence[TimelineEntry]) -> list[AppendResult]:
        """Append in order; an entry_id seen before (ever) returns the first entry's seq."""
        async with self._lock:
            # Inside the lock: sealing may wait for a key, and appends keep their call order.
            entries = await self._stored_form(entries)
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
            appended = await self._stream.append(fresh)
            for (seq, _), entry in zip(appended, fresh):
                known[entry.entry_id] = seq
            own = [(seq, entry) for (seq, dup), entry in zip(appended, fresh) if not dup]
            if own:  # another copy's entries below them first, as the stream holds them
                await self._project_from_stream(own[0][0] - 1)
                await self._store.append(own)
                self._projected = max(self._projected, *(seq for seq, _ in own))
            if len(own) < len(appended):  # stored by another copy, maybe not projected yet
                await self._project_from_stream(max(seq for seq, _ in appended))
            self._unsettled = False
            fresh_ids = {id(e) for e in fresh}
            return [
                AppendResult(known[e.entry_id], duplicate=id(e) not in fresh_ids) for e in entries
            ]
