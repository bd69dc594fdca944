"""Composition root of the timeline-writer."""

from __future__ import annotations

import asyncio

from seedline_contracts import subjects
from seedline_platform import natsio, pg
from seedline_platform.consumer import BatchConsumer
from seedline_platform.logging import get_logger
from seedline_platform.settings import Settings

from .api import TimelineApi
from .store import PostgresTimelineStore
from .writer import TimelineWriter

log = get_logger(__name__)
NAME = "timeline-writer"


class TimelineWriterApp:
    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.nc = None
        self.pool = None
        self.store: PostgresTimelineStore | None = None
        self.writer: TimelineWriter | None = None
        self.consumer: BatchConsumer | None = None
        self.responder: natsio.Responder | None = None

    async def start(self) -> None:
        s = self.settings
        self.nc = await natsio.connect(s.nats_servers, NAME)
        js = self.nc.jetstream()
        await natsio.ensure_streams(js, replicas=s.stream_replicas)
        await natsio.enforce_durability(self.nc, js, s.nats_monitor_url, s.strict_durability)
        self.pool = await pg.open_pool(s.database_url, NAME)
        self.store = PostgresTimelineStore(self.pool)
        await self.store.setup()
        self.writer = TimelineWriter(js, self.store)
        await self.writer.catch_up()
        self.consumer = BatchConsumer(
            js,
            stream=subjects.INGEST_STREAM,
            durable="timeline-writer",
            filter_subjects=[subjects.INGEST_TIMELINE],
            handle=self.writer.handle_ingest,
            park=self.writer.park,
            batch_size=s.batch_size,
            max_deliver=s.max_deliver,
        )
        await self.consumer.start()
        # Subscribe to request subjects only once ready to answer them.
        api = TimelineApi(self.writer, self.store)
        self.responder = natsio.Responder(self.nc, NAME)
        await self.responder.serve(subjects.API_TIMELINE_APPEND, api.append)
        await self.responder.serve(subjects.API_TIMELINE_READ, api.read)
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


def create_app(settings: Settings) -> TimelineWriterApp:
    return TimelineWriterApp(settings)
