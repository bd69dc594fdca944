"""The continuity-resolver's routing table: what it answers, consumes and may send."""

from __future__ import annotations

from seedline_contracts import channels, subjects
from seedline_contracts.channels import event_tag
from seedline_contracts.events import (
    ContinuityDecided,
    OpenRequested,
    SessionEvent,
    WakeRequested,
)
from seedline_contracts.timeline import TimelineEntry
from seedline_platform import erasure
from seedline_platform.lifecycle_events import LIFECYCLE_EVENTS
from seedline_platform.routing import Kind, Route
from seedline_platform.settings import Settings

from .opening_api import OpeningApi, read_open
from .pending import SETTLING, PendingOpens
from .projection import SESSIONS_DURABLE, ResolverProjection


def routes(settings: Settings) -> tuple[Route, ...]:
    return (
        Route.request(channels.SESSIONS_OPEN, OpeningApi.open, decode=read_open,
                      description="Open a conversation: resume or brief a fresh engine "
                                  "(CONTRACT.md 3).",
                      # The person's instruction goes into the timeline as an entry of its
                      # own, and into the plan sealed with the instance's key.
                      sends=(channels.INGEST_OF_INSTANCE, OpenRequested, ContinuityDecided,
                             channels.KEY_RINGS)),
        Route.request(channels.SESSIONS_RELOCATE, OpeningApi.relocate,
                      description="Move a conversation to another machine (CONTRACT.md 4, "
                                  "4.1).",
                      # A live one is stopped first, its checkout saved as it stops.
                      sends=(channels.SESSIONS_STOP, ContinuityDecided)),
        Route.event(WakeRequested, OpeningApi.wake, durable="continuity-resolver-wakes",
                    description="A person's message woke a conversation (4).",
                    sends=(OpenRequested, ContinuityDecided, channels.KEY_RINGS)),
        # Every copy hears these: the copy holding the request answers it.
        *(Route(Kind.BROADCAST, subjects.session_event_filter(event_tag(event_type)),
                PendingOpens.settle, message=SessionEvent,
                description="Answers the open or relocation waiting on this conversation.")
          for event_type in SETTLING),
        Route(Kind.BATCH, subjects.TIMELINE_ALL, ResolverProjection.apply_timeline,
              stream=subjects.TIMELINE_STREAM, durable="continuity-resolver-timeline",
              park=subjects.REJECTED_SESSIONS, idempotent=True, message=TimelineEntry,
              description="Projects each repo's activity, for the decision's inputs."),
        Route.fold(LIFECYCLE_EVENTS, ResolverProjection.apply_sessions,
                   durable=SESSIONS_DURABLE, message=SessionEvent,
                   description="Folds each conversation's lifecycle (CONTRACT.md 4.1)."),
        erasure.route("its rows"),
    )
