"""The continuity-resolver's routing table: what it answers, consumes and may send."""

from __future__ import annotations

from seedline_contracts import subjects
from seedline_contracts.events import SessionEvent, WakeRequested
from seedline_contracts.timeline import TimelineEntry
from seedline_platform.routing import Kind, Route
from seedline_platform.settings import Settings

from .pending import SETTLING

INSTRUCTION = "seedline.ingest.timeline.{instance}"


def routes(settings: Settings) -> tuple[Route, ...]:
    return (
        Route(Kind.REQUEST, subjects.API_SESSIONS_OPEN, "opening.open",
              description="Open a conversation: resume or brief a fresh engine (CONTRACT.md 3).",
              # The person's instruction goes into the timeline as an entry of its own.
              sends=(INSTRUCTION, "open_requested", "continuity_decided")),
        Route(Kind.REQUEST, subjects.API_SESSIONS_RELOCATE, "opening.relocate",
              description="Move a conversation to another machine (CONTRACT.md 4, 4.1).",
              sends=("continuity_decided",)),
        Route(Kind.EVENT, subjects.session_event_filter("wake_requested"), "on_wake",
              stream=subjects.SESSIONS_STREAM, durable="continuity-resolver-wakes",
              message=WakeRequested,
              park=subjects.REJECTED_SESSIONS,
              description="A person's message woke a conversation (4).",
              sends=("open_requested", "continuity_decided")),
        # Every copy hears these: the copy holding the request answers it.
        *(Route(Kind.BROADCAST, subjects.session_event_filter(event_type), "settle",
                description="Answers the open or relocation waiting on this conversation.")
          for event_type in SETTLING),
        Route(Kind.BATCH, subjects.TIMELINE_ALL, "apply_timeline",
              stream=subjects.TIMELINE_STREAM, durable="continuity-resolver-timeline",
              park=subjects.REJECTED_SESSIONS, idempotent=True, message=TimelineEntry,
              description="Projects each repo's activity, for the decision's inputs."),
        Route(Kind.BATCH, subjects.SESSION_EVENTS_ALL, "apply_sessions",
              stream=subjects.SESSIONS_STREAM, durable="continuity-resolver-sessions",
              park=subjects.REJECTED_SESSIONS, idempotent=True, message=SessionEvent,
              description="Folds each conversation's lifecycle (CONTRACT.md 4.1)."),
    )
