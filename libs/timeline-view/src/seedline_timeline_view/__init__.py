"""The timeline read model, seen from outside its owner (the timeline-writer).

Other services read the timeline's projection only through ``TimelineView``
(port.py), with a read-only Postgres grant; only the timeline-writer creates and
writes the table. ``PostgresTimelineView`` and ``InMemoryTimelineView`` pass the same
contract tests.
"""

from .memory import InMemoryTimelineView
from .port import NO_UPPER_SEQ, AppliedEntry, ConversationBefore, RepoHead, TimelineView
from .postgres import PostgresTimelineView

__all__ = [
    "NO_UPPER_SEQ", "AppliedEntry", "ConversationBefore", "InMemoryTimelineView", "PostgresTimelineView",
    "RepoHead", "TimelineView",
]
