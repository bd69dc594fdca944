"""Composition root of the continuity-resolver.

Its projection folds both streams in stream order (what an event means depends on
the ones before it), so the two projection consumers are ordered ``BatchConsumer``s;
the request/reply APIs, the wake subscriber and the settling subscriptions are
FastStream.
"""

from __future__ import annotations

import asyncio
from typing import Sequence

from faststream.nats import NatsMessage
from nats.aio.msg import Msg

from seedline_contracts import subjects
from seedline_contracts.codec import decode, decoder
from seedline_contracts.events import OpenFailed, Opened, SessionEvent, WakeRequested
from seedline_contracts.timeline import TimelineEntry
from seedline_core import decision as core
from seedline_platform.app_base import ServiceApp
from seedline_platform.lifecycle_events import lifecycle_event
from seedline_platform.publishing import JetStreamPublisher, Publisher
from seedline_platform.replay import last_seq
from seedline_platform.settings import Settings
from seedline_platform.watermark import Watermark
from seedline_timeline_view import PostgresTimelineView, TimelineView

from .machines import MachineDirectory, PresenceDirectory
from .opening import Opener, OpenerSettings
from .pending import SETTLING, PendingOpens, reply_of
from .postgres_repository import PostgresConversationRepository
from .repository import SESSIONS, TIMELINE, ConversationRepository, LifecycleStep

NAME = "continuity-resolver"


class ResolverApp(ServiceApp):
    name = NAME
    description = "Decides resume or fresh for each open, with its reason; relocates."

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

    def routes(self) -> None:
        self.answer(subjects.API_SESSIONS_OPEN, lambda m: self.opener.open(m),
                    "Open a conversation: resume or brief a fresh engine (CONTRACT.md 3).")
        self.answer(subjects.API_SESSIONS_RELOCATE, lambda m: self.opener.relocate(m),
                    "Move a conversation to another machine (CONTRACT.md 4, 4.1).")
        self.on_events(
            stream=subjects.SESSIONS_STREAM, durable="continuity-resolver-wakes",
            subject=subjects.session_event_filter("wake_requested"), handle=self._on_wake,
            park=self._park, description="A person's message woke a conversation (4).",
        )
        for event_type in SETTLING:
            # Every copy listens (no queue group): the copy holding the request answers it.
            async def settle(msg: NatsMessage) -> None:
                self.pending.settle(msg.body)

            settle.__name__ = f"settle_{event_type}"
            self.broker.subscriber(
                subjects.session_event_filter(event_type), title=f"settle-{event_type}",
                description="Answers the open or relocation waiting on this conversation.",
            )(settle)

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
        self.opener = Opener(
            repo=self.repo,
            view=p["view"] or PostgresTimelineView(self.pool),
            publisher=p["publisher"] or JetStreamPublisher(self.js),
            machines=p["machines"] or PresenceDirectory(self.js),
            pending=self.pending,
            settings=OpenerSettings(
                open_timeout=s.open_timeout_seconds,
                decision=core.DecisionSettings(
                    resume_window=s.resume_window, stateless_engines=s.stateless_engines
                ),
            ),
            stream_ends=self._stream_ends,
            reached=lambda projection, seq, timeout: self.marks[projection].reached(seq, timeout),
            count_decision=lambda reason: self.decisions_total.labels(reason).inc(),
        )
        self.consume(stream=subjects.TIMELINE_STREAM, durable="continuity-resolver-timeline",
                     filter_subjects=[subjects.TIMELINE_ALL], handle=self.apply_timeline,
                     park=self._park, idempotent=True)
        self.consume(stream=subjects.SESSIONS_STREAM, durable="continuity-resolver-sessions",
                     filter_subjects=[subjects.SESSION_EVENTS_ALL], handle=self.apply_sessions,
                     park=self._park, idempotent=True)

    async def apply_timeline(self, msgs: Sequence[Msg]) -> None:
        await self.repo.apply_timeline(timeline_facts(msgs))
        await self.marks[TIMELINE].advance(msgs[-1].metadata.sequence.stream)

    async def apply_sessions(self, msgs: Sequence[Msg]) -> None:
        last = msgs[-1].metadata.sequence.stream
        await self.repo.apply_lifecycle(lifecycle_steps(msgs), last)
        await self.marks[SESSIONS].advance(last)

    async def _stream_ends(self) -> dict[str, int]:
        timeline, sessions = await asyncio.gather(
            last_seq(self.js, subjects.TIMELINE_STREAM), last_seq(self.js, subjects.SESSIONS_STREAM)
        )
        return {TIMELINE: timeline, SESSIONS: sessions}

    async def _on_wake(self, msg: Msg) -> None:
        await self.opener.wake(decode(msg.data, WakeRequested), msg.metadata.sequence.stream)

    async def _park(self, msg: Msg, reason: str) -> None:
        await self.parker(subjects.REJECTED_SESSIONS)(msg, reason)


def timeline_facts(msgs: Sequence[Msg]) -> list[tuple]:
    facts = []
    for msg in msgs:
        e = decode(msg.data, TimelineEntry)
        facts.append((msg.metadata.sequence.stream, e.instance_id, e.repo, e.session_id, e.at,
                      e.engine))
    return facts


def lifecycle_steps(msgs: Sequence[Msg]) -> list[LifecycleStep]:
    steps: list[LifecycleStep] = []
    events = decoder(SessionEvent)
    for msg in msgs:
        seq = msg.metadata.sequence.stream
        event = events.decode(msg.data)
        meaning = lifecycle_event(event, seq)
        if meaning is None:
            continue
        # An open sent without a request_id that timed out was given its conversation's id
        # as one (opening.py): its answer is kept under that claim.
        request_id = (event.plan.request_id or event.session_id
                      if isinstance(event, (Opened, OpenFailed)) else None)
        steps.append((seq, event.session_id, meaning, reply_of(event), request_id))
    return steps


def create_app(settings: Settings, **ports) -> ResolverApp:
    return ResolverApp(settings, **ports)
