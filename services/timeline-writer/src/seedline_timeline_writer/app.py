"""Composition root of the timeline-writer.

The ingest consumer is the hot path: batch fetches, one atomic JetStream batch and
one Postgres transaction per batch, and stream order kept across copies and crashes.
FastStream 0.7's pull subscriber hands a fetched batch to its handler concurrently,
message by message, with an ack each: that loses ingest order and the batch append
(0.25-0.34 of raw publish before atomic batches, against 0.39-0.43 with them), so this
one consumer is ``BatchConsumer`` on nats-py. Everything else is FastStream.
"""

from __future__ import annotations

from nats.js.api import RetentionPolicy

from seedline_contracts import subjects
from seedline_contracts.events import SeedComposed
from seedline_platform import erasure
from seedline_platform.app_base import ServiceApp
from seedline_platform.publishing import JetStreamPublisher, Publisher
from seedline_platform.routing import Route
from seedline_platform.sealing import KvKeyStore, sealer_for
from seedline_platform.settings import Settings

from .api import TimelineApi
from .forget import Forgetter
from .ingest import IngestHandler
from .launches import (
    LaunchCheck,
    LaunchFeed,
    LaunchRegistry,
    PostgresLaunchRegistry,
    SessionsLaunchFeed,
    launch_of,
)
from .routes import routes
from .store import PostgresTimelineStore, TimelineStore
from .stream import JetStreamTimeline, TimelineStream
from .writer import TimelineWriter

NAME = "timeline-writer"


class TimelineWriterApp(ServiceApp):
    name = NAME
    description = "Appends the timeline once per entry, projects it, serves reads."
    route_table = staticmethod(routes)

    def __init__(
        self, settings: Settings, *, store: TimelineStore | None = None,
        stream: TimelineStream | None = None, launches: LaunchRegistry | None = None,
        feed: LaunchFeed | None = None, rejects: Publisher | None = None,
    ) -> None:
        self._ports = {"store": store, "stream": stream, "launches": launches, "feed": feed,
                       "rejects": rejects}
        super().__init__(settings)
        self.rejects_total = self.metrics.counter(
            "seedline_ingest_rejected_total", "Ingest input refused, by reason.", ["reason_code"]
        )

    async def setup(self) -> None:
        p, s = self._ports, self.settings
        partition = s.ingest_partition
        self.sealer = sealer_for(self.js, s)
        self.store = p["store"] or PostgresTimelineStore(self.pool, partition, self.sealer)
        if p["store"] is None:
            await self.store.setup()
        self.launches = p["launches"] or PostgresLaunchRegistry(self.pool)
        stream = p["stream"] or JetStreamTimeline(self.js, partition)
        self.writer = TimelineWriter(stream, self.store, s.redact_at_ingest, self.sealer)
        self.forgetter = Forgetter(self.js, self.pool, KvKeyStore(self.js, s.stream_replicas),
                                   self.sealer, s.stream_replicas)
        self.loops.append(erasure.follower(self.js, self.forgetter.drop, s.stream_replicas))
        await self.writer.catch_up()
        publisher = p["rejects"] or JetStreamPublisher(self.js)
        self.api = TimelineApi(self.store, publisher)
        check = LaunchCheck(self.launches, p["feed"] or SessionsLaunchFeed(self.js))
        self.ingest = IngestHandler(
            self.writer, check, publisher,
            count_reject=lambda reason: self.rejects_total.labels(reason).inc(),
            tracer=self.tracer,
        )

    async def batch_options(self, route: Route) -> dict:
        # A stream made before ingest kept messages by age is still a work queue, whose
        # consumers must acknowledge each message and which no second consumer may read
        # (ingest is idempotent by entry_id, so by age a dead copy's batch is reread).
        info = await self.js.stream_info(subjects.INGEST_STREAM)
        by_age = info.config.retention == RetentionPolicy.LIMITS
        return {"ack_all": by_age, "idempotent": by_age}

    async def record_launch(self, composed: SeedComposed, msg) -> None:
        await self.launches.record([launch_of(composed)])


def create_app(settings: Settings, **ports) -> TimelineWriterApp:
    return TimelineWriterApp(settings, **ports)
