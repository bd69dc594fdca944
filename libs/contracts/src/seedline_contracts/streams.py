"""Stream configurations (CONTRACT.md section 1, DESIGN.md rule 5).

Plain data so the contract stays free of any client library; the platform turns
these into nats-py StreamConfig objects and checks live streams against them.
"""

from __future__ import annotations

from dataclasses import dataclass

from . import subjects

DUPLICATE_WINDOW_SECONDS = 120.0


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


INGEST = StreamSpec(
    name=subjects.INGEST_STREAM,
    subjects=("seedline.ingest.>",),
    retention="workqueue",
    discard="new",
    deny_delete=False,
    deny_purge=True,
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

ALL_STREAMS: tuple[StreamSpec, ...] = (INGEST, TIMELINE, SESSIONS, REJECTED)
