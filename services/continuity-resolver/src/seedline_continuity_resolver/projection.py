"""The resolver's projection of both streams, folded in stream order (what an event means
depends on the ones before it): each repo's activity from the timeline, each
conversation's lifecycle from SEEDLINE_SESSIONS, and a watermark per stream that a
decision waits on to read its own writes."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence

from nats.aio.msg import Msg

from seedline_contracts.events import SessionEvent
from seedline_contracts.timeline import TimelineEntry
from seedline_contracts.times import format_utc, parse_rfc3339
from seedline_core import decision as core
from seedline_platform.consumer import Batch
from seedline_platform.erasure import Forgotten
from seedline_platform.lifecycle_events import RequestedHere, lifecycle_steps
from seedline_platform.sealing import sealed_instance
from seedline_platform.watermark import Watermark

from .repository import SESSIONS, TIMELINE, ConversationRepository, TimelineFact


# The durable consumer of the lifecycle fold: it takes only the events that move a
# lifecycle (seedline_platform.lifecycle_events.LIFECYCLE_EVENTS).
SESSIONS_DURABLE = "continuity-resolver-sessions"


class ResolverProjection:
    def __init__(self, repo: ConversationRepository,
                 sessions_drained: Callable[[], Awaitable[int | None]] | None = None,
                 forgotten: Forgotten | None = None) -> None:
        self._repo = repo
        # The erasures this copy has taken in: what they cover is never folded, although
        # it may arrive after the instance's rows were dropped (erasure.Forgotten).
        self.forgotten = forgotten or Forgotten()
        self._requested = RequestedHere()
        self.marks = {
            TIMELINE: Watermark(lambda: repo.applied(TIMELINE)),
            SESSIONS: Watermark(lambda: repo.applied(SESSIONS), drained=sessions_drained),
        }

    async def apply_timeline(self, batch: Batch[TimelineEntry]) -> None:
        self.marks[TIMELINE].taking(batch.last_seq)
        async with self.forgotten.folding():
            if facts := self.forgotten.kept_facts(timeline_facts(batch.items)):
                await self._repo.apply_timeline(facts)
        # A batch of parked entries alone (the writer validated them: never seen) moves
        # only this copy's mark; the stored offset follows with the next entry.
        await self.marks[TIMELINE].advance(batch.last_seq)

    async def apply_sessions(self, batch: Batch[SessionEvent]) -> None:
        self.marks[SESSIONS].taking(batch.last_seq)
        async with self.forgotten.folding():
            steps = self.forgotten.kept_steps(self._requested.news(lifecycle_steps(batch.items)))
            await self._repo.apply_lifecycle(steps, batch.last_seq)
        self._requested.folded(steps)
        await self.marks[SESSIONS].advance(batch.last_seq, more=batch.more)

    async def reached(self, projection: str, seq: int, timeout: float) -> bool:
        return await self.marks[projection].reached(seq, timeout)


def timeline_facts(items: Sequence[tuple[TimelineEntry, Msg]]) -> list[TimelineFact]:
    """Each entry's activity time is the earlier of its `at` and when the writer accepted
    it, the stream message's own time (CONTRACT.md 3.1): event data, so a rebuild from the
    stream gives the same rows."""
    facts = []
    for e, msg in items:
        active = core.entry_activity_at(parse_rfc3339(e.at), msg.metadata.timestamp)
        turn = e.kind in core.TURN_KINDS
        facts.append(TimelineFact(
            msg.metadata.sequence.stream, e.instance_id, e.repo, e.session_id,
            format_utc(active), e.engine, e.kind, _excerpt(e) if turn else "",
        ))
    return facts


def _excerpt(entry: TimelineEntry) -> str:
    # Content sealed at rest is never kept here in the clear: the decision reads the turn
    # through the timeline view, which opens it.
    return "" if sealed_instance(entry.content) else entry.content[:core.EXCERPT_CHARS]
