"""The resolver's opener wired to fakes, with the events it records folded back in."""

from __future__ import annotations

import json
from datetime import datetime, timezone

import pytest

from seedline_contracts.codec import encode
from seedline_contracts.timeline import TimelineEntry
from seedline_contracts.times import parse_rfc3339
from seedline_continuity_resolver.bootstrap import Ports, bootstrap
from seedline_continuity_resolver.opening_api import OpeningApi
from seedline_continuity_resolver.routes import routes
from seedline_continuity_resolver.projection import timeline_facts
from seedline_continuity_resolver.repository import InMemoryConversationRepository
from seedline_platform.settings import Settings
from seedline_platform.lifecycle_events import lifecycle_steps, session_events
from seedline_platform.publishing import RecordingPublisher
from seedline_devtools.fakes import FakeMsg, ask
from seedline_timeline_view import InMemoryTimelineView

NOW = datetime(2026, 12, 1, 12, 0, tzinfo=timezone.utc)


class Resolver:
    def __init__(self) -> None:
        self.repo = InMemoryConversationRepository()
        self.view = InMemoryTimelineView()
        self.publisher = RecordingPublisher()
        ids = iter(f"csess_{n:03d}" for n in range(1, 1000))
        parts = bootstrap(Settings(open_timeout_seconds=0.2), Ports(
            repo=self.repo, view=self.view, publisher=self.publisher,
            decision_recorded=self.decision_recorded, clock=lambda: NOW,
            new_id=lambda: next(ids)))
        self.parts = parts
        self.pending, self.catch_up = parts.pending, parts.catch_up
        self.opener, self.api = parts.opener, parts.opening
        self._folded = 0
        self._seq = 0
        self._timeline_seq = 0
        self.ingest_lands = True  # False: the writer is slow, land_ingest() lands it later
        self._unlanded: list[bytes] = []

    async def decision_recorded(self, session_id: str) -> bool:
        return any(e["session_id"] == session_id for e in self.published("continuity_decided"))

    async def entry(self, session_id: str, instance_id: str = "inst-a", repo: str = "apps/x",
                    kind: str = "chat_assistant", at: str = "2026-12-01T11:00:00Z",
                    engine: str | None = None, content: str = "work",
                    entry_id: str | None = None, accepted: str | None = None) -> int:
        """An entry the writer stored; `accepted` is when (the stream message's time),
        its `at` when not given."""
        self._timeline_seq += 1
        seq = self._timeline_seq
        entry = TimelineEntry(entry_id or f"e-{seq}", instance_id, repo, session_id, kind,
                              content, at, engine, None)
        self.view.apply(seq, entry)
        stored = FakeMsg(encode(entry), stream_seq=seq,
                         timestamp=parse_rfc3339(accepted or at))
        await self.repo.apply_timeline(timeline_facts([(entry, stored)]))
        return seq

    async def record(self, event) -> None:
        """An event some other service recorded (the gateway's opened, say)."""
        await self.publisher.publish([(f"seedline.session.{event.session_id}.x",
                                       encode(event), None)])
        await self.fold()

    async def fold(self) -> None:
        """Apply every session event published so far, as the projection consumer would."""
        recorded = []
        for subject, payload, _ in self.publisher.messages[self._folded:]:
            self._folded += 1
            if subject.startswith("seedline.ingest."):
                self._unlanded.append(payload)
                if self.ingest_lands:
                    await self.land_ingest()
            if not subject.startswith("seedline.session."):
                continue
            self._seq += 1
            recorded.append(FakeMsg(payload, subject=subject, stream_seq=self._seq))
        await self.repo.apply_lifecycle(lifecycle_steps(session_events(recorded)), self._seq)

    async def land_ingest(self) -> None:
        """What the timeline-writer does with the entries the opener put into ingest."""
        for payload in self._unlanded:
            e = json.loads(payload)
            await self.entry(e["session_id"], e["instance_id"], e["repo"], e["kind"], e["at"],
                             e["engine"], e["content"], e["entry_id"])
        self._unlanded.clear()

    async def open(self, **body) -> dict:
        request = {"instance_id": "inst-a", "repo": "apps/x", "engine": "claude",
                   "node_id": "mac", **body}
        reply = await self.ask(OpeningApi.open, request)
        await self.fold()
        return reply

    async def ask(self, handler, body: bytes | dict) -> dict:
        """A request answered as the resolver's edge answers it (its routing table's row)."""
        return await ask(routes(Settings()), self.parts, handler, body)

    def published(self, kind: str) -> list[dict]:
        found = []
        for subject, payload, _ in self.publisher.messages:
            body = json.loads(payload)
            if body.get("type") == kind or (kind == "ingest" and subject.startswith("seedline.ingest")):
                found.append(body)
        return found


@pytest.fixture
def resolver() -> Resolver:
    return Resolver()
