"""Composition root of the seed-composer: both of its edges are FastStream subscribers."""

from __future__ import annotations

from nats.js.errors import NotFoundError

from seedline_contracts import subjects
from seedline_contracts.codec import decode
from seedline_contracts.events import SeedComposed
from seedline_core import redaction
from seedline_platform import erasure
from seedline_platform.app_base import ServiceApp
from seedline_platform.publishing import JetStreamPublisher, Publisher
from seedline_platform.sealing import PREFIX, key_name, sealer_for
from seedline_platform.settings import Settings
from seedline_timeline_view import PostgresTimelineView

from .briefs import BriefStore, PostgresBriefStore
from .handlers import Composer
from .reader import TimelineReader, ViewReader
from .routes import routes
from .summary import summarizer_from

NAME = "seed-composer"


class ComposerApp(ServiceApp):
    name = NAME
    description = "Turns each continuity decision into a brief; serves the latest brief."
    route_table = staticmethod(routes)

    def __init__(
        self, settings: Settings, *, reader: TimelineReader | None = None,
        store: BriefStore | None = None, publisher: Publisher | None = None,
    ) -> None:
        self._ports = {"reader": reader, "store": store, "publisher": publisher}
        super().__init__(settings)
        self.brief_rows = self.metrics.histogram(
            "seedline_brief_rows", "Entries kept in each brief offered.", [],
            buckets=(0, 5, 10, 20, 30, 40, 50, 60, 100, 200),
        )
        self.brief_chars = self.metrics.histogram(
            "seedline_brief_chars", "Characters of entry text in each brief offered.", [],
            buckets=(0, 1_000, 2_000, 4_000, 8_000, 12_000, 20_000, 40_000),
        )

    async def setup(self) -> None:
        # The secret detectors load once here (about 0.1 s), not inside the first open.
        redaction.load_detectors()
        self.sealer = sealer_for(self.js, self.settings)
        p = self._ports
        store = p["store"]
        if store is None:
            store = PostgresBriefStore(self.pool)
            await store.setup()
            # Its briefs name their instance only in the sealed text's header.
            self.loops.append(erasure.follower(self.js, erasure.dropping(self.pool, (
                f"DELETE FROM briefs WHERE starts_with(text, '{PREFIX}' || %s || ':')",
            ), self.sealer, key_name), self.settings.stream_replicas))
        self.composer = Composer(
            p["publisher"] or JetStreamPublisher(self.js),
            p["reader"] or ViewReader(PostgresTimelineView(self.pool, self.sealer)),
            store, budget_for=self.settings.brief_budget,
            summarizer=summarizer_from(self.settings), on_brief=self._observe,
            recorded=self._recorded, sealer=self.sealer,
        )

    async def _recorded(self, session_id: str) -> SeedComposed | None:
        """The newest seed_composed of a conversation, read from SEEDLINE_SESSIONS."""
        subject = subjects.session_event_subject(session_id, "seed_composed")
        try:
            msg = await self.js.get_last_msg(subjects.SESSIONS_STREAM, subject)
        except NotFoundError:
            return None
        return decode(msg.data, SeedComposed)

    def _observe(self, rows: int, chars: int) -> None:
        self.brief_rows.observe(rows)
        self.brief_chars.observe(chars)


def create_app(settings: Settings, **ports) -> ComposerApp:
    return ComposerApp(settings, **ports)
