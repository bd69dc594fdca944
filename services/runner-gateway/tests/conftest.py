"""The gateway's handlers wired to fakes, with its own events folded back in as the stream would."""


from __future__ import annotations

import json
from dataclasses import dataclass, field

import pytest

from seedline_contracts import subjects
from seedline_contracts.codec import decode, encode
from seedline_contracts.events import LaunchPlan, Opened, OpenRequested, SeedComposed
from seedline_contracts.instances import Erasure
from seedline_contracts.worktrees import SavedWork
from seedline_contracts.runner import RunnerPresence
from seedline_contracts.sessions import BriefStats, Continuity
from seedline_devtools.fakes import FakeMsg
from seedline_devtools.fakes import ask, deliver
from seedline_platform.consumer import Batch
from seedline_platform.lifecycle_events import session_events
from seedline_platform.publishing import RecordingPublisher
from seedline_platform.settings import Settings
from seedline_contracts.runner import RunnerEvent
from seedline_contracts.timeline import TimelineEntry
from seedline_runner_gateway.api import GatewayApi
from seedline_runner_gateway.bootstrap import Ports, bootstrap
from seedline_runner_gateway.turns import TimelineFollower
from seedline_runner_gateway.machine_calls import FakeMachines
from seedline_runner_gateway.notify import RecordingNotifier
from seedline_runner_gateway.presence import Sighting
from seedline_runner_gateway.routes import routes
from seedline_runner_gateway.state import InMemoryGatewayState
from seedline_timeline_view import InMemoryTimelineView

AT = "2026-12-01T10:00:00Z"
INSTANCE, REPO = "inst-a", "apps/x"


@dataclass
class FakePresence:
    machines: dict[str, Sighting] = field(default_factory=dict)
    # Revisions already in the bucket that the watch has not delivered yet, by machine.
    stored: dict[str, int] = field(default_factory=dict)

    def put(self, node_id: str, label: str, live: list[str] | None, revision: int,
            instances: list[str] | None = None, **said) -> Sighting:
        presence = RunnerPresence(node_id=node_id, label=label, engines=["scripted"],
                                  live=live, instances=instances or [], **said)
        sighting = Sighting(presence, revision, 0.0)
        self.machines[node_id] = sighting
        return sighting

    async def get(self, node_id: str) -> Sighting | None:
        return self.machines.get(node_id)

    def known(self) -> list[str]:
        return sorted(self.machines)

    async def latest_revision(self, node_id: str) -> int:
        s = self.machines.get(node_id)
        return max(self.stored.get(node_id, 0), s.revision if s else 0)


class Gateway:
    """The gateway as its bootstrap builds it, on fakes; its own events folded back in as
    the stream consumer would."""

    def __init__(self) -> None:
        self.state = InMemoryGatewayState()
        self.machines = FakeMachines()
        self.publisher = RecordingPublisher()
        self.notifier = RecordingNotifier()
        self.presence = FakePresence()
        # The timeline's projection, as the timeline-writer fills it (an engine's output).
        self.timeline = InMemoryTimelineView()
        self._folded = 0
        self._seq = 0
        # While set, the fold is behind: the stream's end is told, nothing is folded.
        self.lagging = False
        # The instances whose rows the gateway dropped.
        self.dropped: list[str] = []
        self.parts = bootstrap(Settings(), Ports(
            state=self.state, machines=self.machines, publisher=self.publisher,
            notifier=self.notifier, presence=lambda watcher: self.presence,
            stream_end=self._fold_all, recorded_reply=self.recorded_reply,
            clock=lambda: AT, new_id=lambda: "csess_woken", fold_drained=self._consumer,
            drop_forgotten=self._drop, newest_entries=self.timeline.newest_at))
        self.stopper, self.reconciler = self.parts.stopper, self.parts.reconciler
        self.launcher, self.resume_lost = self.parts.launcher, self.parts.resume_lost
        self.api, self.follower = self.parts.api, self.parts.follower

    async def _drop(self, record: Erasure) -> None:
        self.dropped.append(record.instance_id)

    async def ask(self, handler, body: bytes | dict) -> dict:
        """A request answered as the gateway's edge answers it (its routing table's row)."""
        return await ask(routes(Settings()), self.parts, handler, body)

    async def deliver(self, handler, *args):
        """A message handed over as the gateway's edge hands it (its row's sends checked)."""
        return await deliver(routes(Settings()), self.parts, handler, *args)

    async def report(self, node_id: str, body: dict) -> None:
        """A machine's runner event, as it arrives on seedline.runner.<node>.events."""
        msg = FakeMsg(json.dumps(body).encode(), subject=f"seedline.runner.{node_id}.events")
        await self.deliver(GatewayApi.on_runner_event, decode(msg.data, RunnerEvent), msg)

    async def person(self, msg: FakeMsg) -> None:
        """A timeline entry reaching the gateway's follower, as a batch of one."""
        await self.deliver(TimelineFollower.handle, Batch(
            [(decode(msg.data, TimelineEntry), msg)], msg.metadata.sequence.stream))

    def online(self, node_id: str, label: str = "Mac mini", live=None, revision: int = 1,
               instances=None, **said) -> None:
        """`said`: what else its presence says (protocol, version)."""
        self.machines.online.add(node_id)
        self.presence.put(node_id, label, live if live is not None else [], revision, instances,
                          **said)
        self.state.labels[node_id] = label

    def count_reads(self) -> list[str]:
        """The conversations read one by one from now on (GatewayState.held), in order."""
        reads: list[str] = []
        read = self.state.held

        async def counted(session_id: str):
            reads.append(session_id)
            return await read(session_id)

        self.state.held = counted
        return reads

    async def fold(self, upto: int | None = None) -> None:
        """Every session event published so far, folded as the stream consumer would."""
        await self.parts.fold.caught_up(upto)

    async def _consumer(self) -> int | None:
        """Where the fold's consumer stands (consumer_drained): with nothing left once every
        session event published was handed to the fold, the last of them at `_seq`."""
        unfolded = self.publisher.messages[self._folded:]
        if any(subject.startswith("seedline.session.") for subject, _, _ in unfolded):
            return None
        return self._seq

    async def _fold_all(self) -> int:
        """The end of the stream: what was published so far, handed to the fold first."""
        if self.lagging:
            unfolded = self.publisher.messages[self._folded:]
            return self._seq + sum(1 for subject, _, _ in unfolded
                                   if subject.startswith("seedline.session."))
        recorded = []
        for subject, payload, _ in self.publisher.messages[self._folded:]:
            self._folded += 1
            if not subject.startswith("seedline.session."):
                continue
            self._seq += 1
            recorded.append(FakeMsg(payload, subject=subject, stream_seq=self._seq))
        await self.parts.fold.apply_sessions(Batch(session_events(recorded), self._seq))
        return self._seq

    async def recorded_reply(self, session_id: str):
        """The reply of the conversation's last `opened` event, as the stream holds it."""
        found = None
        for subject, payload, _ in self.publisher.messages:
            if subject == subjects.session_event_subject(session_id, "opened"):
                found = decode(payload, Opened).reply
        return found

    async def requested(self, session_id: str, node_id: str = "mac", repo: str = REPO,
                        instance_id: str = INSTANCE) -> None:
        await self.publisher.publish([(
            subjects.session_event_subject(session_id, "open_requested"),
            encode(OpenRequested(session_id=session_id, at=AT, instance_id=instance_id, repo=repo,
                                 engine="scripted", node_id=node_id, request_id=None,
                                 force_fresh=False, clean_slate=False, has_instruction=False)),
            None,
        )])
        await self.fold()

    async def open(self, session_id: str, node_id: str = "mac", **plan) -> None:
        """open_requested, then the launch of its seed_composed, folded."""
        await self.requested(session_id, node_id, plan.get("repo", REPO),
                             plan.get("instance_id", INSTANCE))
        await self.launcher.launch(composed(session_id, node_id, **plan))
        await self.fold()

    async def launched_unfolded(self, session_id: str, node_id: str = "mac") -> None:
        """open_requested folded, then its launch with the fold behind (`lagging`): the
        machine has it, this copy's fold does not hold its `opened`."""
        await self.requested(session_id, node_id)
        self.lagging = True
        await self.launcher.launch(composed(session_id, node_id))

    composed = staticmethod(lambda *a, **k: composed(*a, **k))

    def events(self, kind: str) -> list[dict]:
        return [json.loads(p) for p in self.publisher.on("seedline.session.")
                if json.loads(p)["type"] == kind]


def composed(session_id: str, node_id: str = "mac", *, text: str | None = "the brief",
             relocation: bool = False, relocation_from: str | None = None,
             instance_id: str = INSTANCE, wake_seq: int | None = None,
             decided_seq: int | None = None, carry: SavedWork | None = None,
             repo: str = REPO) -> SeedComposed:
    plan = LaunchPlan(
        instance_id=instance_id, repo=repo, engine="scripted", node_id=node_id,
        continuity=Continuity("fresh", None, "no_previous", "there is no earlier conversation"),
        resume_key=None, instruction="Add castling", clean_slate=False,
        relocation=relocation, relocation_from=relocation_from, wake_seq=wake_seq,
        carry=carry,
    )
    brief = BriefStats(rows=3, chars=40, omitted_rows=0, until_seq=3, sha256="ab" * 32) if text \
        else None
    return SeedComposed(session_id=session_id, at=AT, brief=brief, plan=plan, text=text,
                        decided_seq=decided_seq)


@pytest.fixture
def gw() -> Gateway:
    return Gateway()
