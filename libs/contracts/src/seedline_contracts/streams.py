"""Stream configurations (CONTRACT.md section 1, DESIGN.md rule 5).

Plain data so the contract stays free of any client library; the platform turns
these into nats-py StreamConfig objects and checks live streams against them.
"""

from __future__ import annotations

from dataclasses import dataclass

from . import subjects

DUPLICATE_WINDOW_SECONDS = 120.0
# How long SEEDLINE_INGEST keeps a message after it arrived (the writer takes it in
# milliseconds; the rest is room for a writer that is down, and for inspection).
INGEST_MAX_AGE_SECONDS = 7 * 24 * 3600.0
# How long SEEDLINE_NOTICES keeps a notice (CONTRACT.md 1: limits, 30 days).
NOTICES_MAX_AGE_SECONDS = 30 * 24 * 3600.0


@dataclass(frozen=True)
class StreamSpec:
    name: str
    subjects: tuple[str, ...]
    retention: str  # "limits" | "workqueue"
    discard: str  # "old" | "new"
    deny_delete: bool
    deny_purge: bool
    duplicate_window: float = DUPLICATE_WINDOW_SECONDS
    storage: str = "file"
    # Atomic batch publishing (nats-server 2.12+): a batch is stored with one commit.
    atomic_batches: bool = False
    max_age: float = 0.0  # seconds; 0 keeps messages for ever


# Limits retention with a maximum age, not a work queue: under sync_interval: always
# removing each acknowledged message from a work queue is one more fsync per entry,
# while messages past their age go in bulk. The writer's consumer acknowledges a whole
# batch at once (AckPolicy.ALL).
INGEST = StreamSpec(
    name=subjects.INGEST_STREAM,
    subjects=("seedline.ingest.>",),
    retention="limits",
    discard="new",
    deny_delete=False,
    deny_purge=True,
    max_age=INGEST_MAX_AGE_SECONDS,
)
TIMELINE = StreamSpec(
    name=subjects.TIMELINE_STREAM,
    subjects=(subjects.TIMELINE_ALL,),
    retention="limits",
    discard="new",
    deny_delete=True,
    deny_purge=True,
    atomic_batches=True,
)
SESSIONS = StreamSpec(
    name=subjects.SESSIONS_STREAM,
    subjects=(subjects.SESSION_EVENTS_ALL,),
    retention="limits",
    discard="new",
    deny_delete=True,
    deny_purge=True,
)
# Kept until an operator removes them, so deletes and purges stay allowed.
REJECTED = StreamSpec(
    name=subjects.REJECTED_STREAM,
    subjects=("seedline.rejected.>",),
    retention="limits",
    discard="new",
    deny_delete=False,
    deny_purge=False,
)

# Notices are plain publishes (CONTRACT.md, Conventions) that this stream keeps, so a
# person who was not listening still gets them; the oldest go first past their age.
# Deletes and purges stay allowed: forgetting an instance removes its notices.
NOTICES = StreamSpec(
    name=subjects.NOTICES_STREAM,
    subjects=(subjects.NOTIFY_ALL,),
    retention="limits",
    discard="old",
    deny_delete=False,
    deny_purge=False,
    max_age=NOTICES_MAX_AGE_SECONDS,
)

ALL_STREAMS: tuple[StreamSpec, ...] = (INGEST, TIMELINE, SESSIONS, REJECTED, NOTICES)
