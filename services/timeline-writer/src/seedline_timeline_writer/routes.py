"""The timeline-writer's routing table: what it answers, consumes and may send."""

from __future__ import annotations

from seedline_contracts import channels, subjects
from seedline_platform import erasure
from seedline_platform.routing import Kind, Route
from seedline_platform.settings import Settings

from .api import TimelineApi, read_append
from .forget import Forgetter
from .ingest import IngestHandler


def routes(settings: Settings) -> tuple[Route, ...]:
    if settings.ingest_partitions == 1:
        # One writer takes every form, also a partition the server maps ingest to.
        durable = "timeline-writer"
        first, *also = [*subjects.INGEST_SUBJECTS, subjects.ingest_partition_filter()]
    else:
        durable = f"timeline-writer-p{settings.ingest_partition}"
        first, also = subjects.ingest_partition_filter(settings.ingest_partition), []
    return (
        Route(Kind.BATCH, first, IngestHandler.handle, also=tuple(also),
              stream=subjects.INGEST_STREAM, durable=durable, park=subjects.REJECTED_TIMELINE,
              description="Appends each entry to the timeline once, in order (CONTRACT.md 2).",
              # Content is sealed with the instance's key, made on first use.
              sends=(channels.TIMELINE, channels.REJECTED_TIMELINE, channels.KEY_RINGS)),
        Route.request(channels.TIMELINE_APPEND, TimelineApi.append, decode=read_append,
                      description="Append one entry and answer its seq (CONTRACT.md 2.1).",
                      # Through ingest like every entry, on its instance's subject.
                      sends=(channels.INGEST_OF_INSTANCE,)),
        Route.request(channels.TIMELINE_READ, TimelineApi.read,
                      description="A repo's or one conversation's entries, newest page first "
                                  "(2.3)."),
        Route.request(channels.INSTANCES_FORGET, Forgetter.handle,
                      description="Forget an instance: stop its live conversations, destroy "
                                  "its key, drop its rows (Erasure).",
                      # Its live conversations are stopped first, through the gateway.
                      sends=(channels.SESSIONS_LIST, channels.SESSIONS_STOP, channels.ERASURES,
                             channels.KEY_RINGS, channels.WORKTREES)),
        erasure.route("its rows and cached key"),
    )
