"""Composition root of the timeline-writer: its ports, connected; its parts, bootstrapped.

The ingest consumer is the hot path: batch fetches, one atomic JetStream batch and
one Postgres transaction per batch, and stream order kept across copies and crashes.
FastStream 0.7's pull subscriber hands a fetched batch to its handler concurrently,
message by message, with an ack each: that loses ingest order and the batch append
(0.25-0.34 of raw publish before atomic batches, against 0.39-0.43 with them), so this
one consumer is ``BatchConsumer`` on nats-py. Everything else is FastStream.
"""

from __future__ import annotations

from nats.js.api import RetentionPolicy

from seedline_client import ClientError, NoAnswer, NotRunning, Refused, SeedlineClient
from seedline_contracts import channels, subjects
from seedline_contracts.sessions import SessionsListRequest, StopRequest
from seedline_platform.app_base import ServiceApp
from seedline_platform.publishing import JetStreamPublisher
from seedline_platform.routing import Route
from seedline_platform.sealing import KvKeyStore, sealer_for
from seedline_platform.sending import check_send
from seedline_platform.settings import Settings

from .bootstrap import NAME, Parts, Ports, bootstrap
from .forget import STOP_REASON, Forgetter, LiveNotStopped
from .launches import PostgresLaunchRegistry, SessionsLaunchFeed
from .routes import routes
from .store import PostgresTimelineStore
from .stream import JetStreamTimeline


class TimelineWriterApp(ServiceApp):
    name = NAME
    description = "Appends the timeline once per entry, projects it, serves reads."
    route_table = staticmethod(routes)
    # Launches are learnt from the machine's first output now (launches.py).
    retired_durables = ((subjects.SESSIONS_STREAM, "timeline-writer-launches"),)
    _launches: PostgresLaunchRegistry | None = None

    async def build(self) -> Parts:
        s = self.settings
        sealer = sealer_for(self.js, s)
        store = PostgresTimelineStore(self.pool, s.ingest_partition, sealer)
        await store.setup()
        launches = self._launches = PostgresLaunchRegistry(self.pool)
        parts = bootstrap(s, Ports(
            store=store, stream=JetStreamTimeline(self.js, s.ingest_partition),
            publisher=JetStreamPublisher(self.js),
            launches=launches, feed=SessionsLaunchFeed(self.js),
            sealer=sealer, metrics=self.metrics, tracer=self.tracer, js=self.js,
            forgetter=Forgetter(self.js, self.pool, KvKeyStore(self.js, s.stream_replicas),
                                sealer, launches, s.stream_replicas, stop_live=self._stop_live),
        ))
        await parts.writer.catch_up()
        return parts

    async def stop(self) -> None:
        if self._launches is not None:
            await self._launches.write_unwritten()  # before the pool closes
        await super().stop()

    async def _stop_live(self, instance_id: str) -> int:
        """Stop each live conversation of the instance through the gateway, each waiting for
        its machine to end the engine and its process tree."""
        check_send(channels.SESSIONS_LIST.address)
        check_send(channels.SESSIONS_STOP.address)
        client = SeedlineClient(self.nc)
        try:
            live = await client.live(SessionsListRequest(instance_id=instance_id))
            for conversation in live.conversations:
                await client.stop(StopRequest(session_id=conversation.session_id,
                                              reason=STOP_REASON),
                                  timeout=self.settings.launch_timeout_seconds + 5)
        except ClientError as error:
            raise LiveNotStopped(
                f"The instance's live conversations could not be stopped: {_why(error)}."
            ) from error
        return len(live.conversations)

    async def batch_options(self, route: Route) -> dict:
        # A stream made before ingest kept messages by age is still a work queue, whose
        # consumers must acknowledge each message and which no second consumer may read
        # (ingest is idempotent by entry_id, so by age a dead copy's batch is reread).
        info = await self.js.stream_info(subjects.INGEST_STREAM)
        by_age = info.config.retention == RetentionPolicy.LIMITS
        return {"ack_all": by_age, "idempotent": by_age}


def _why(error: ClientError) -> str:
    if isinstance(error, NotRunning):
        return f"the {error.service} is not running"
    if isinstance(error, NoAnswer):
        return f"the {error.service} did not answer in time"
    if isinstance(error, Refused):
        return error.message.rstrip(".")
    return f"no usable answer from the {error.service}"


def create_app(settings: Settings) -> TimelineWriterApp:
    return TimelineWriterApp(settings)
