"""Composition root of the continuity-resolver."""

from __future__ import annotations

import asyncio

from seedline_contracts import subjects
from seedline_platform import natsio, pg, timeline_table
from seedline_platform.consumer import BatchConsumer
from seedline_platform.logging import get_logger
from seedline_platform.settings import Settings

from .opening import Opener
from .pending import PendingOpens
from .projection import ConversationProjection

log = get_logger(__name__)
NAME = "continuity-resolver"


class ResolverApp:
    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.nc = None
        self.pool = None
        self.consumers: list[BatchConsumer] = []
        self.responder: natsio.Responder | None = None

    async def start(self) -> None:
        s = self.settings
        self.nc = await natsio.connect(s.nats_servers, NAME)
        js = self.nc.jetstream()
        await natsio.ensure_streams(js, replicas=s.stream_replicas)
        await natsio.ensure_runners_bucket(js, replicas=s.stream_replicas)
        await natsio.enforce_durability(self.nc, js, s.nats_monitor_url, s.strict_durability)
        self.pool = await pg.open_pool(s.database_url, NAME)
        await pg.apply_schema(self.pool, "timeline", timeline_table.DDL)
        projection = ConversationProjection(self.pool)
        await projection.setup()

        async def park(msg, reason):
            await natsio.park_message(js, msg, reason, subjects.REJECTED_SESSIONS)

        self.consumers = [
            BatchConsumer(js, stream=subjects.TIMELINE_STREAM, durable="continuity-resolver-timeline",
                          filter_subjects=[subjects.TIMELINE_ALL], handle=projection.apply_timeline,
                          park=park, batch_size=s.batch_size, max_deliver=s.max_deliver),
            BatchConsumer(js, stream=subjects.SESSIONS_STREAM, durable="continuity-resolver-sessions",
                          filter_subjects=[subjects.SESSION_EVENTS_ALL], handle=projection.apply_sessions,
                          park=park, batch_size=s.batch_size, max_deliver=s.max_deliver),
        ]
        for consumer in self.consumers:
            await consumer.start()
        pending = PendingOpens()
        await self.nc.subscribe(subjects.session_event_filter("opened"), cb=pending.on_event)
        await self.nc.subscribe(subjects.session_event_filter("open_failed"), cb=pending.on_event)
        opener = Opener(self.nc, js, self.pool, s, pending)
        self.responder = natsio.Responder(self.nc, NAME)
        await self.responder.serve(subjects.API_SESSIONS_OPEN, opener.open)
        await self.responder.serve(subjects.API_SESSIONS_RELOCATE, opener.relocate)
        log.info("ready")

    async def run(self) -> None:
        await asyncio.gather(*(c.run() for c in self.consumers))

    async def stop(self) -> None:
        if self.responder:
            await self.responder.close()
        if self.nc and not self.nc.is_closed:
            # close, not drain: unacknowledged work is redelivered, and a
            # drain would wait on pull subscriptions whose fetches were cancelled.
            await self.nc.close()
        if self.pool:
            await self.pool.close()


def create_app(settings: Settings) -> ResolverApp:
    return ResolverApp(settings)
