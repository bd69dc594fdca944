"""seedline.api.timeline.append and seedline.api.timeline.read: thin handlers."""

from __future__ import annotations

from dataclasses import dataclass

from seedline_contracts import subjects
from seedline_contracts.errors import ErrorReply, error_reply
from seedline_contracts.normalise import Accepted, normalise
from seedline_contracts.timeline import (
    MAX_READ_LIMIT,
    AppendReply,
    TimelineEntry,
    TimelineReadReply,
    TimelineReadRequest,
)
from seedline_contracts.times import now_text
from seedline_contracts.tokens import name_problem
from seedline_core.notices import error_message
from seedline_platform.outage import Outage
from seedline_platform.publishing import Publisher

from .store import TimelineStore

MIN_SEQ_WAIT_SECONDS = 5.0


def _unavailable() -> ErrorReply:
    return error_reply("unavailable", error_message("unavailable"))


APPEND_WAIT_SECONDS = 5.0


@dataclass(frozen=True)
class AppendRequest:
    """A synchronous append as the edge read it: the entry as the writer will store it,
    and the body as sent (it goes through ingest as it came, unknown fields and all)."""

    entry: TimelineEntry
    body: bytes


def read_append(body: bytes) -> AppendRequest | ErrorReply:
    """The edge's reading of an append: the ingest rules of CONTRACT.md 2.1, whose refusals
    (not_json, invalid_entry naming the field, bad_token) are answered, not parked."""
    result = normalise(body, now_text())
    if not isinstance(result, Accepted):
        return error_reply(result.reason_code, result.message)
    return AppendRequest(result.entry, body)


class TimelineApi:
    """The synchronous append goes through ingest like every entry (so it takes its
    place in its instance's order, whichever partition's writer holds that instance) and
    answers once the entry is readable."""

    def __init__(
        self, store: TimelineStore, ingest: Publisher,
        min_seq_wait: float = MIN_SEQ_WAIT_SECONDS, append_wait: float = APPEND_WAIT_SECONDS,
    ) -> None:
        self._store = store
        self._ingest = ingest
        self._min_seq_wait = min_seq_wait
        self._append_wait = append_wait

    async def append(self, request: AppendRequest) -> AppendReply | ErrorReply:
        entry_id = request.entry.entry_id
        try:
            first = await self._store.known([entry_id])
            if entry_id in first:
                return AppendReply(seq=first[entry_id], duplicate=True)
            subject = subjects.ingest_timeline_subject(request.entry.instance_id)
            await self._ingest.publish([(subject, request.body, {"Nats-Msg-Id": entry_id})])
            seq = await self._stored(entry_id)
        except Outage:
            return _unavailable()
        if seq is None:
            return error_reply("unavailable", (
                "The entry was taken for the timeline but is not readable yet; read it with "
                "its entry_id in a moment, or send it again (the same entry_id is never stored "
                "twice)."
            ))
        return AppendReply(seq=seq, duplicate=False)

    async def _stored(self, entry_id: str) -> int | None:
        """Read your own write: its seq once the timeline view holds it."""
        return await self._store.wait_until_stored(entry_id, self._append_wait)

    async def read(self, request: TimelineReadRequest) -> TimelineReadReply | ErrorReply:
        for name in ("instance_id", "repo", "session_id"):
            value = getattr(request, name)
            problem = None if value is None and name == "session_id" else name_problem(value)
            if problem:
                return error_reply("invalid_request", f"The read request's {name} {problem}.")
        if request.limit < 1:
            return error_reply("invalid_request", "limit must be at least 1.")
        limit = min(request.limit, MAX_READ_LIMIT)
        try:
            if request.min_seq is not None and not await self._store.wait_until_applied(
                request.min_seq, self._min_seq_wait
            ):
                return error_reply(
                    "not_yet_visible",
                    f"Entry {request.min_seq} is not readable yet; retry the read in a moment.")
            rows, has_more = await self._store.read(request, limit)
        except Outage:
            return _unavailable()
        return TimelineReadReply(entries=rows, has_more=has_more)
