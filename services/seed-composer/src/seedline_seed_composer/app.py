"""Composition root of the seed-composer."""

from __future__ import annotations

from seedline_contracts import subjects
from seedline_platform import pg, timeline_table
from seedline_platform.app_base import ServiceApp
from seedline_platform.natsio import Responder
from seedline_platform.settings import Settings

from .briefs import BriefStore
from .composer import Composer
from .reader import PostgresTimelineReader, TimelineReader

NAME = "seed-composer"


class ComposerApp(ServiceApp):
    name = NAME

    def __init__(self, settings: Settings, reader: TimelineReader | None = None) -> None:
        super().__init__(settings)
        self._reader = reader

    async def setup(self) -> None:
        await pg.apply_schema(self.pool, "timeline", timeline_table.DDL)
        store = BriefStore(self.pool)
        await store.setup()
        self.composer = Composer(self.js, self._reader or PostgresTimelineReader(self.pool), store,
                                 self.settings)
        self.consume(stream=subjects.SESSIONS_STREAM, durable="seed-composer",
                     filter_subjects=[subjects.session_event_filter("continuity_decided")],
                     handle=self.composer.handle_decisions,
                     park=self.parker(subjects.REJECTED_SESSIONS),
                     batch_size=min(self.settings.batch_size, 64))

    async def serve(self, responder: Responder) -> None:
        await responder.serve(subjects.API_BRIEFS_GET, self.composer.get_brief)


def create_app(settings: Settings, reader: TimelineReader | None = None) -> ComposerApp:
    return ComposerApp(settings, reader)
