"""Composition root of the seed-composer: its ports, connected; its parts, bootstrapped."""

from __future__ import annotations

import functools

from seedline_contracts.events import SeedComposed
from seedline_core import redaction
from seedline_platform import erasure
from seedline_platform.app_base import ServiceApp
from seedline_platform.publishing import JetStreamPublisher
from seedline_platform.sealing import PREFIX, key_name, sealer_for
from seedline_platform.session_reads import newest_event
from seedline_platform.settings import Settings
from seedline_timeline_view import PostgresTimelineView

from .bootstrap import NAME, Parts, Ports, bootstrap
from .briefs import PostgresBriefStore
from .reader import ViewReader
from .routes import routes

# Its briefs name their instance only in the sealed text's header.
FORGET_STATEMENTS = (f"DELETE FROM briefs WHERE starts_with(text, '{PREFIX}' || %s || ':')",)


class ComposerApp(ServiceApp):
    name = NAME
    description = "Turns each continuity decision into a brief; serves the latest brief."
    route_table = staticmethod(routes)

    async def build(self) -> Parts:
        # The secret detectors load once here (about 0.1 s), not inside the first open.
        redaction.load_detectors()
        sealer = sealer_for(self.js, self.settings)
        store = PostgresBriefStore(self.pool)
        await store.setup()
        return bootstrap(self.settings, Ports(
            publisher=JetStreamPublisher(self.js),
            reader=ViewReader(PostgresTimelineView(self.pool, sealer)),
            store=store,
            recorded=functools.partial(newest_event, self.js, event_type=SeedComposed),
            sealer=sealer, metrics=self.metrics, js=self.js,
            drop_forgotten=erasure.dropping(self.pool, FORGET_STATEMENTS, sealer, key_name),
        ))


def create_app(settings: Settings) -> ComposerApp:
    return ComposerApp(settings)
