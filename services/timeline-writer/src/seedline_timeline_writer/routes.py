"""The timeline-writer's routing table: what it answers, consumes and may send."""

from __future__ import annotations

from seedline_contracts import subjects
from seedline_contracts.events import SeedComposed
from seedline_platform.routing import Kind, Route
from seedline_platform.settings import Settings


def routes(settings: Settings) -> tuple[Route, ...]:
    if settings.ingest_partitions == 1:
        # One writer takes every form, also a partition the server maps ingest to.
        durable = "timeline-writer"
        first, *also = [*subjects.INGEST_SUBJECTS, subjects.ingest_partition_filter()]
    else:
        durable = f"timeline-writer-p{settings.ingest_partition}"
        first, also = subjects.ingest_partition_filter(settings.ingest_partition), []
    return (
        Route(Kind.BATCH, first, "ingest.handle", also=tuple(also),
              stream=subjects.INGEST_STREAM, durable=durable, park=subjects.REJECTED_TIMELINE,
              description="Appends each entry to the timeline once, in order (CONTRACT.md 2).",
              sends=(subjects.TIMELINE_ALL, subjects.REJECTED_TIMELINE)),
        Route(Kind.REQUEST, subjects.API_TIMELINE_APPEND, "api.append",
              description="Append one entry and answer its seq (CONTRACT.md 2.1).",
              sends=(subjects.INGEST_TIMELINE,)),
        Route(Kind.REQUEST, subjects.API_TIMELINE_READ, "api.read",
              description="A repo's or one conversation's entries, newest page first (2.3)."),
        Route(Kind.REQUEST, subjects.API_INSTANCES_FORGET, "forgetter.handle",
              description="Forget an instance: destroy its key, drop its rows (Erasure, 1.2)."),
        Route(Kind.EVENT, subjects.session_event_filter("seed_composed"), "record_launch",
              stream=subjects.SESSIONS_STREAM, durable="timeline-writer-launches",
              message=SeedComposed,
              park=subjects.REJECTED_SESSIONS,
              description="Which conversation was launched on which machine (CONTRACT.md 6)."),
    )
