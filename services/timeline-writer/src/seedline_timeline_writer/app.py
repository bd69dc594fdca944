"""Composition root of the timeline-writer."""

from __future__ import annotations

from seedline_contracts import subjects
from seedline_platform.app_base import ServiceApp
from seedline_platform.natsio import Responder
from seedline_platform.settings import Settings

from .api import TimelineApi
from .store import PostgresTimelineStore
from .writer import TimelineWriter

NAME = "timeline-writer"


class TimelineWriterApp(ServiceApp):
    name = NAME

    async def setup(self) -> None:
        self.store = PostgresTimelineStore(self.pool)
        await self.store.setup()
        self.writer = TimelineWriter(self.js, self.store)
        await self.writer.catch_up()
        self.consume(stream=subjects.INGEST_STREAM, durable="timeline-writer",
                     filter_subjects=[subjects.INGEST_TIMELINE],
                     handle=self.writer.handle_ingest, park=self.writer.park)

    async def serve(self, responder: Responder) -> None:
        api = TimelineApi(self.writer, self.store)
        await responder.serve(subjects.API_TIMELINE_APPEND, api.append)
        await responder.serve(subjects.API_TIMELINE_READ, api.read)


def create_app(settings: Settings) -> TimelineWriterApp:
    return TimelineWriterApp(settings)
