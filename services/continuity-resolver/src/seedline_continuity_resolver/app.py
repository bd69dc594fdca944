"""Composition root of the continuity-resolver: its ports, connected; its parts, bootstrapped.

Its projection folds both streams in stream order (what an event means depends on the
ones before it), so the two projection consumers are ordered ``BatchConsumer``s; the
request/reply APIs, the wake subscriber and the settling subscriptions are FastStream.
"""

from __future__ import annotations

import asyncio
import functools

from seedline_client import ClientError, SeedlineClient
from seedline_contracts import channels, subjects
from seedline_contracts.events import ContinuityDecided
from seedline_contracts.sessions import StopRequest
from seedline_platform import erasure
from seedline_platform.app_base import ServiceApp
from seedline_platform.consumer import consumer_drained
from seedline_platform.publishing import JetStreamPublisher
from seedline_platform.logging import get_logger
from seedline_platform.outage import StreamsUnavailable
from seedline_platform.replay import last_seq
from seedline_platform.routing import Route
from seedline_platform.session_reads import newest_event
from seedline_platform.sending import check_send
from seedline_platform.sealing import sealer_for
from seedline_platform.settings import Settings
from seedline_timeline_view import PostgresTimelineView

from .bootstrap import NAME, Parts, Ports, bootstrap
from .machines import PresenceDirectory
from .projection import SESSIONS_DURABLE
from .postgres_repository import FORGET_FIRST, FORGET_STATEMENTS, PostgresConversationRepository
from .repository import SESSIONS, TIMELINE
from .routes import routes

log = get_logger(__name__)

STREAM_ENDS_PATIENCE = 12.0  # past a cluster's election of a stream's new leader


class ResolverApp(ServiceApp):
    name = NAME
    description = "Decides resume or fresh for each open, with its reason; relocates."
    route_table = staticmethod(routes)
    keyed_pool_size = 2  # its two folds, the timeline's and the lifecycle's

    async def build(self) -> Parts:
        repo = PostgresConversationRepository(self.pool, keyed=self.keyed_pool)
        await repo.setup()
        sealer = sealer_for(self.js, self.settings)
        return bootstrap(self.settings, Ports(
            repo=repo, view=PostgresTimelineView(self.pool, sealer),
            publisher=JetStreamPublisher(self.js),
            decision_recorded=functools.partial(_decision_recorded, self.js),
            machines=PresenceDirectory(self.js),
            stream_ends=self._stream_ends, stop=self._stop, sealer=sealer, metrics=self.metrics,
            sessions_drained=functools.partial(
                consumer_drained, self.js, subjects.SESSIONS_STREAM, SESSIONS_DURABLE),
            js=self.js,
            drop_forgotten=erasure.dropping(self.pool, FORGET_STATEMENTS, sealer,
                                            first=FORGET_FIRST),
        ))

    async def batch_options(self, route: Route) -> dict:
        # Both folds store how far they applied their stream, with their rows.
        projection = TIMELINE if route.stream == subjects.TIMELINE_STREAM else SESSIONS
        return {"applied": self.parts.projection.marks[projection].stored}

    async def _stop(self, session_id: str, reason: str) -> None:
        """Stop a live conversation through the gateway, waiting for its machine."""
        check_send(channels.SESSIONS_STOP.address)
        try:
            await SeedlineClient(self.nc).stop(StopRequest(session_id=session_id, reason=reason),
                                               timeout=self.settings.launch_timeout_seconds + 5)
        except ClientError as error:
            # The relocation goes on: the launch stops what still runs before it is sent.
            log.warning("relocation_stop_failed", session_id=session_id, error=str(error))

    async def _stream_ends(self) -> dict[str, int]:
        """Where both streams end now. A stream that lost its leader answers again once the
        others elect one (about 5 s in a cluster): waited out up to STREAM_ENDS_PATIENCE,
        then the request is answered `unavailable`, to be asked again."""
        loop = asyncio.get_running_loop()
        give_up = loop.time() + STREAM_ENDS_PATIENCE
        while True:
            try:
                timeline, sessions = await asyncio.gather(
                    last_seq(self.js, subjects.TIMELINE_STREAM),
                    last_seq(self.js, subjects.SESSIONS_STREAM))
                return {TIMELINE: timeline, SESSIONS: sessions}
            except StreamsUnavailable:
                if loop.time() >= give_up:
                    raise
                await asyncio.sleep(0.5)


async def _decision_recorded(js, session_id: str) -> bool:
    return await newest_event(js, session_id, ContinuityDecided) is not None


def create_app(settings: Settings) -> ResolverApp:
    return ResolverApp(settings)
