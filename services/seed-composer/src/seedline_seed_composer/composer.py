"""The seed-composer's handlers: compose a brief for each decision, serve the latest one."""

from __future__ import annotations

from typing import Sequence

import msgspec
from nats.aio.msg import Msg

from seedline_contracts import subjects
from seedline_contracts.codec import decode, encode
from seedline_contracts.errors import error_reply
from seedline_contracts.events import ContinuityDecided, SeedComposed
from seedline_contracts.sessions import BriefGetRequest, BriefStats
from seedline_core.notices import error_message
from seedline_platform import natsio
from seedline_platform.clock import now_text
from seedline_platform.logging import get_logger

from .briefs import BriefStore
from .composing import compose_for
from .reader import TimelineReader

log = get_logger(__name__)


class Composer:
    """Handles continuity_decided events and briefs.get requests."""

    def __init__(self, js, reader: TimelineReader, store: BriefStore) -> None:
        self._js = js
        self.reader = reader
        self._store = store

    async def handle_decisions(self, msgs: Sequence[Msg]) -> None:
        out = []
        for msg in msgs:
            decision = decode(msg.data, ContinuityDecided)
            brief = await compose_for(decision, self.reader)
            if brief is not None:
                await self._store.save(decision.session_id, msg.metadata.sequence.stream, brief)
            event = SeedComposed(
                session_id=decision.session_id,
                at=now_text(),
                brief=BriefStats(**brief.stats()) if brief else None,
                plan=decision.plan,
            )
            # The msg id makes a redelivered decision publish its seed_composed once.
            msg_id = f"seed_composed:{msg.metadata.sequence.stream}"
            out.append((subjects.session_event_subject(decision.session_id, "seed_composed"),
                        encode(event), {"Nats-Msg-Id": msg_id}))
            log.info("seed_composed", session_id=decision.session_id,
                     rows=brief.rows if brief else 0)
        await natsio.publish_window(self._js, out)

    async def get_brief(self, msg: Msg) -> bytes:
        try:
            request = decode(msg.data, BriefGetRequest)
        except (msgspec.ValidationError, msgspec.DecodeError) as exc:
            return encode(error_reply("invalid_request", f"The brief request is not valid: {exc}."))
        brief = await self._store.latest(request.session_id)
        if brief is None:
            return encode(error_reply("not_found", error_message("not_found", what="brief for that conversation")))
        return encode(brief)
