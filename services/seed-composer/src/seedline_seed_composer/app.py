"""Composition root of the seed-composer."""

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
from seedline_platform import natsio, pg, timeline_table
from seedline_platform.clock import now_text
from seedline_platform.consumer import BatchConsumer
from seedline_platform.logging import get_logger
from seedline_platform.settings import Settings

from .briefs import BriefStore
from .composing import compose_for
from .reader import PostgresTimelineReader, TimelineReader

log = get_logger(__name__)
NAME = "seed-composer"


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


class ComposerApp:
    def __init__(self, settings: Settings, reader: TimelineReader | None = None) -> None:
        self.settings = settings
        self._reader = reader
        self.nc = None
        self.pool = None
        self.consumer: BatchConsumer | None = None
        self.responder: natsio.Responder | None = None
        self.composer: Composer | None = None

    async def start(self) -> None:
        s = self.settings
        self.nc = await natsio.connect(s.nats_servers, NAME)
        js = self.nc.jetstream()
        await natsio.ensure_streams(js, replicas=s.stream_replicas)
        await natsio.enforce_durability(self.nc, js, s.nats_monitor_url, s.strict_durability)
        self.pool = await pg.open_pool(s.database_url, NAME)
        await pg.apply_schema(self.pool, "timeline", timeline_table.DDL)
        store = BriefStore(self.pool)
        await store.setup()
        self.composer = Composer(js, self._reader or PostgresTimelineReader(self.pool), store)

        async def park(msg, reason):
            await natsio.park_message(js, msg, reason, subjects.REJECTED_SESSIONS)

        self.consumer = BatchConsumer(
            js, stream=subjects.SESSIONS_STREAM, durable="seed-composer",
            filter_subjects=[subjects.session_event_filter("continuity_decided")],
            handle=self.composer.handle_decisions, park=park,
            batch_size=min(s.batch_size, 64), max_deliver=s.max_deliver,
        )
        await self.consumer.start()
        self.responder = natsio.Responder(self.nc, NAME)
        await self.responder.serve(subjects.API_BRIEFS_GET, self.composer.get_brief)
        log.info("ready")

    async def run(self) -> None:
        assert self.consumer is not None
        await self.consumer.run()

    async def stop(self) -> None:
        if self.responder:
            await self.responder.close()
        if self.nc and not self.nc.is_closed:
            # close, not drain: unacknowledged work is redelivered, and a
            # drain would wait on pull subscriptions whose fetches were cancelled.
            await self.nc.close()
        if self.pool:
            await self.pool.close()


def create_app(settings: Settings, reader: TimelineReader | None = None) -> ComposerApp:
    return ComposerApp(settings, reader)
