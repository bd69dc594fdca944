"""The seed-composer's routing table: what it answers, consumes and may send."""

from __future__ import annotations

from seedline_contracts import channels
from seedline_contracts.events import ContinuityDecided, SeedComposed
from seedline_platform import erasure
from seedline_platform.routing import Route
from seedline_platform.settings import Settings

from .handlers import Composer


def routes(settings: Settings) -> tuple[Route, ...]:
    return (
        Route.event(ContinuityDecided, Composer.handle_decision, durable="seed-composer",
                    description="Composes the brief each decision offers (CONTRACT.md 5).",
                    # Its text is sealed with the instance's key, made on first use.
                    sends=(SeedComposed, channels.KEY_RINGS)),
        Route.request(channels.BRIEFS_GET, Composer.get_brief,
                      description="The latest brief offered to a conversation, byte for byte "
                                  "(CONTRACT.md 4)."),
        erasure.route("its stored briefs"),
    )
