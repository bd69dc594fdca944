"""seedline.api.timeline.append and seedline.api.timeline.read: thin handlers."""

from __future__ import annotations

import msgspec
from nats.aio.msg import Msg

from seedline_contracts.codec import decode, encode
from seedline_contracts.errors import error_reply
from seedline_contracts.normalise import Accepted, normalise
from seedline_contracts.timeline import (
    MAX_READ_LIMIT,
    AppendReply,
    TimelineReadReply,
    TimelineReadRequest,
)
from seedline_contracts.times import now_text
from seedline_contracts.tokens import name_problem
from seedline_core.notices import error_message
from seedline_platform.consumer import is_outage

from .store import TimelineStore
from .writer import TimelineWriter

MIN_SEQ_WAIT_SECONDS = 5.0


def _unavailable() -> bytes:
    return encode(error_reply("unavailable", error_message("unavailable")))


class TimelineApi:
    def __init__(
        self, writer: TimelineWriter, store: TimelineStore,
        min_seq_wait: float = MIN_SEQ_WAIT_SECONDS,
    ) -> None:
        self._writer = writer
        self._store = store
        self._min_seq_wait = min_seq_wait

    async def append(self, msg: Msg) -> bytes:
        result = normalise(msg.data, now_text())
        if not isinstance(result, Accepted):
            return encode(error_reply(result.reason_code, result.message))
        try:
            (appended,) = await self._writer.append_entries([result.entry])
        except Exception as exc:
            if is_outage(exc):
                return _unavailable()
            raise
        return encode(AppendReply(seq=appended.seq, duplicate=appended.duplicate))

    async def read(self, msg: Msg) -> bytes:
        try:
            request = decode(msg.data, TimelineReadRequest)
        except (msgspec.ValidationError, msgspec.DecodeError) as exc:
            return encode(error_reply("invalid_request", f"The read request is not valid: {exc}."))
        for name in ("instance_id", "repo", "session_id"):
            value = getattr(request, name)
            problem = None if value is None and name == "session_id" else name_problem(value)
            if problem:
                return encode(error_reply("invalid_request", f"The read request's {name} {problem}."))
        if request.limit < 1:
            return encode(error_reply("invalid_request", "limit must be at least 1."))
        limit = min(request.limit, MAX_READ_LIMIT)
        try:
            if request.min_seq is not None and not await self._store.wait_until_applied(
                request.min_seq, self._min_seq_wait
            ):
                return encode(error_reply(
                    "not_yet_visible",
                    f"Entry {request.min_seq} is not readable yet; retry the read in a moment.",
                ))
            rows, has_more = await self._store.read(request, limit)
        except Exception as exc:
            if is_outage(exc):
                return _unavailable()
            raise
        return encode(TimelineReadReply(entries=rows, has_more=has_more))
