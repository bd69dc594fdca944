"""The seed-composer's routing table: what it answers, consumes and may send."""

from __future__ import annotations

from seedline_contracts import subjects
from seedline_contracts.events import ContinuityDecided
from seedline_platform.routing import Kind, Route
from seedline_platform.settings import Settings


def routes(settings: Settings) -> tuple[Route, ...]:
    return (
        Route(Kind.EVENT, subjects.session_event_filter("continuity_decided"),
              "composer.handle_decision", stream=subjects.SESSIONS_STREAM,
              durable="seed-composer", park=subjects.REJECTED_SESSIONS,
              message=ContinuityDecided,
              description="Composes the brief each decision offers (CONTRACT.md 5).",
              sends=("seed_composed",)),
        Route(Kind.REQUEST, subjects.API_BRIEFS_GET, "composer.get_brief",
              description="The latest brief offered to a conversation, byte for byte "
                          "(CONTRACT.md 4)."),
    )
