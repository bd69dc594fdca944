"""Composition root of the continuity-resolver."""

from __future__ import annotations

from seedline_contracts import subjects
from seedline_platform import natsio, pg, timeline_table
from seedline_platform.app_base import ServiceApp
from seedline_platform.natsio import Responder
from seedline_platform.settings import Settings

from .opening import Opener
from .pending import PendingOpens
from .projection import ConversationProjection

NAME = "continuity-resolver"


class ResolverApp(ServiceApp):
    name = NAME

    async def setup(self) -> None:
        await natsio.ensure_runners_bucket(self.js, replicas=self.settings.stream_replicas)
        await pg.apply_schema(self.pool, "timeline", timeline_table.DDL)
        projection = ConversationProjection(self.pool)
        await projection.setup()
        park = self.parker(subjects.REJECTED_SESSIONS)
        self.consume(stream=subjects.TIMELINE_STREAM, durable="continuity-resolver-timeline",
                     filter_subjects=[subjects.TIMELINE_ALL], handle=projection.apply_timeline,
                     park=park)
        self.consume(stream=subjects.SESSIONS_STREAM, durable="continuity-resolver-sessions",
                     filter_subjects=[subjects.SESSION_EVENTS_ALL], handle=projection.apply_sessions,
                     park=park)
        self.pending = PendingOpens()
        await self.nc.subscribe(subjects.session_event_filter("opened"), cb=self.pending.on_event)
        await self.nc.subscribe(subjects.session_event_filter("open_failed"), cb=self.pending.on_event)

    async def serve(self, responder: Responder) -> None:
        opener = Opener(self.nc, self.js, self.pool, self.settings, self.pending)
        await responder.serve(subjects.API_SESSIONS_OPEN, opener.open)
        await responder.serve(subjects.API_SESSIONS_RELOCATE, opener.relocate)


def create_app(settings: Settings) -> ResolverApp:
    return ResolverApp(settings)
