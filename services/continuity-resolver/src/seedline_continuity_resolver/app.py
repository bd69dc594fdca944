"""Composition root of the continuity-resolver.

Its projection folds both streams in stream order (what an event means depends on
the ones before it), so the two projection consumers are ordered ``BatchConsumer``s;
the request/reply APIs, the wake subscriber and the settling subscriptions are
FastStream.
"""

from __future__ import annotations

import asyncio
from typing import Sequence

from nats.aio.msg import Msg

from seedline_contracts import subjects
from seedline_contracts.events import SessionEvent, WakeRequested
from seedline_contracts.timeline import TimelineEntry
from seedline_contracts.times import format_utc, parse_rfc3339
from seedline_core import decision as core
from seedline_platform import erasure
from seedline_platform.app_base import ServiceApp
from seedline_platform.consumer import Batch
from seedline_platform.lifecycle_events import lifecycle_steps
from seedline_platform.publishing import JetStreamPublisher, Publisher
from seedline_platform.replay import last_seq
from seedline_platform.sealing import sealed_instance, sealer_for
from seedline_platform.settings import Settings
from seedline_platform.watermark import Watermark
from seedline_timeline_view import PostgresTimelineView, TimelineView

from .answers import Answers
from .catch_up import CatchUp
from .machines import MachineDirectory, PresenceDirectory
from .opening import Opener
from .opening_api import OpeningApi
from .pending import PendingOpens
from .postgres_repository import FORGET_STATEMENTS, PostgresConversationRepository
from .repository import SESSIONS, TIMELINE, ConversationRepository, TimelineFact
from .routes import routes

__all__ = ["ResolverApp", "create_app", "lifecycle_steps", "timeline_facts"]

NAME = "continuity-resolver"


class ResolverApp(ServiceApp):
    name = NAME
    description = "Decides resume or fresh for each open, with its reason; relocates."
    route_table = staticmethod(routes)

    def __init__(
        self, settings: Settings, *, repo: ConversationRepository | None = None,
        view: TimelineView | None = None, publisher: Publisher | None = None,
        machines: MachineDirectory | None = None,
    ) -> None:
        self._ports = {"repo": repo, "view": view, "publisher": publisher, "machines": machines}
        self.pending = PendingOpens()
        super().__init__(settings)
        self.decisions_total = self.metrics.counter(
            "seedline_continuity_decided_total", "Continuity decisions, by reason_code.",
            ["reason_code"],
        )

    async def setup(self) -> None:
        p = self._ports
        self.repo = p["repo"]
        if self.repo is None:
            self.repo = PostgresConversationRepository(self.pool)
            await self.repo.setup()
        self.marks = {
            projection: Watermark(lambda projection=projection: self.repo.applied(projection))
            for projection in (TIMELINE, SESSIONS)
        }
        s = self.settings
        sealer = sealer_for(self.js, s)
        if p["repo"] is None:  # its own tables: a forgotten instance's rows go (Erasure, 1.2)
            self.loops.append(erasure.follower(self.js, erasure.dropping(
                self.pool, FORGET_STATEMENTS, sealer), s.stream_replicas))
        view = p["view"] or PostgresTimelineView(self.pool, sealer)
        self.opener = Opener(
            repo=self.repo,
            view=view,
            publisher=p["publisher"] or JetStreamPublisher(self.js),
            machines=p["machines"] or PresenceDirectory(self.js),
            catch_up=CatchUp(
                self.repo, view, stream_ends=self._stream_ends,
                reached=lambda projection, seq, timeout: self.marks[projection].reached(
                    seq, timeout),
            ),
            answers=Answers(self.repo, self.pending, s.open_timeout_seconds),
            decision=core.DecisionSettings(
                resume_window=s.resume_window, stateless_engines=s.stateless_engines),
            sealer=sealer,
            count_decision=lambda reason: self.decisions_total.labels(reason).inc(),
        )
        self.opening = OpeningApi(self.opener)

    async def apply_timeline(self, batch: Batch[TimelineEntry]) -> None:
        if facts := timeline_facts(batch.items):
            await self.repo.apply_timeline(facts)
        # A batch of parked entries alone (the writer validated them: never seen) moves
        # only this copy's mark; the stored offset follows with the next entry.
        await self.marks[TIMELINE].advance(batch.last_seq)

    async def apply_sessions(self, batch: Batch[SessionEvent]) -> None:
        await self.repo.apply_lifecycle(lifecycle_steps(batch.items), batch.last_seq)
        await self.marks[SESSIONS].advance(batch.last_seq)

    async def _stream_ends(self) -> dict[str, int]:
        timeline, sessions = await asyncio.gather(
            last_seq(self.js, subjects.TIMELINE_STREAM), last_seq(self.js, subjects.SESSIONS_STREAM)
        )
        return {TIMELINE: timeline, SESSIONS: sessions}

    async def on_wake(self, event: WakeRequested, msg: Msg) -> None:
        await self.opener.wake(event, msg.metadata.sequence.stream)

    async def settle(self, msg: Msg) -> None:
        self.pending.settle(msg.data)


def timeline_facts(items: Sequence[tuple[TimelineEntry, Msg]]) -> list[tuple]:
    """Each entry's activity time is the earlier of its `at` and when the writer accepted
    it, the stream message's own time (CONTRACT.md 3.1, 1.2): event data, so a rebuild
    from the stream gives the same rows."""
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
    # Content sealed at rest (1.2) is never kept here in the clear: the decision reads the
    # turn through the timeline view, which opens it.
    return "" if sealed_instance(entry.content) else entry.content[:core.EXCERPT_CHARS]


def create_app(settings: Settings, **ports) -> ResolverApp:
    return ResolverApp(settings, **ports)
