"""The gateway's handlers wired to fakes, with its own events folded back in as the stream would."""


from __future__ import annotations

import json
from dataclasses import dataclass, field

import pytest

from seedline_contracts import subjects
from seedline_contracts.codec import decode, encode
from seedline_contracts.events import LaunchPlan, Opened, OpenRequested, SeedComposed
from seedline_contracts.runner import RunnerPresence
from seedline_contracts.sessions import BriefStats, Continuity
from seedline_devtools.fakes import FakeMsg
from seedline_platform.lifecycle_events import lifecycle_steps, session_events
from seedline_platform.publishing import RecordingPublisher
from seedline_runner_gateway.launch_outcomes import LaunchOutcomes
from seedline_runner_gateway.launching import Launcher
from seedline_runner_gateway.machine_calls import FakeMachines
from seedline_runner_gateway.notify import RecordingNotifier
from seedline_runner_gateway.presence import Sighting
from seedline_runner_gateway.reconcile import Reconciler
from seedline_runner_gateway.resume_lost import ResumeLostRecorder
from seedline_runner_gateway.state import InMemoryGatewayState
from seedline_runner_gateway.stopping import Stopper

AT = "2026-12-01T10:00:00Z"
INSTANCE, REPO = "inst-a", "apps/x"


@dataclass
class FakePresence:
    machines: dict[str, Sighting] = field(default_factory=dict)
    # Revisions already in the bucket that the watch has not delivered yet, by machine.
    stored: dict[str, int] = field(default_factory=dict)

    def put(self, node_id: str, label: str, live: list[str] | None, revision: int,
            instances: list[str] | None = None) -> Sighting:
        presence = RunnerPresence(node_id=node_id, label=label, engines=["scripted"],
                                  live=live, instances=instances or [])
        sighting = Sighting(presence, revision, 0.0)
        self.machines[node_id] = sighting
        return sighting

    async def get(self, node_id: str) -> Sighting | None:
        return self.machines.get(node_id)

    async def latest_revision(self, node_id: str) -> int:
        s = self.machines.get(node_id)
        return max(self.stored.get(node_id, 0), s.revision if s else 0)


class Gateway:
    def __init__(self) -> None:
        self.state = InMemoryGatewayState()
        self.machines = FakeMachines()
        self.publisher = RecordingPublisher()
        self.notifier = RecordingNotifier()
        self.presence = FakePresence()
        self.stopper = Stopper(self.publisher, self.machines, self.notifier, clock=lambda: AT)
        self.reconciler = Reconciler(self.state, self.stopper, self.fold)
        outcomes = LaunchOutcomes(
            state=self.state, machines=self.machines, publisher=self.publisher,
            stopper=self.stopper, notifier=self.notifier, caught_up=self.fold, clock=lambda: AT,
        )
        self.launcher = Launcher(
            state=self.state, presence=self.presence, machines=self.machines,
            publisher=self.publisher, stopper=self.stopper, reconciler=self.reconciler,
            outcomes=outcomes, caught_up=self.fold, clock=lambda: AT,
        )
        self._folded = 0
        self._seq = 0
        self.resume_lost = ResumeLostRecorder(self.publisher, self.notifier,
                                              self.recorded_reply, clock=lambda: AT)

    def online(self, node_id: str, label: str = "Mac mini", live=None, revision: int = 1,
               instances=None) -> None:
        self.machines.online.add(node_id)
        self.presence.put(node_id, label, live if live is not None else [], revision, instances)
        self.state.labels[node_id] = label

    async def fold(self, upto: int | None = None) -> None:
        """Apply every session event published so far, as the stream consumer would."""
        recorded = []
        for subject, payload, _ in self.publisher.messages[self._folded:]:
            self._folded += 1
            if not subject.startswith("seedline.session."):
                continue
            self._seq += 1
            recorded.append(FakeMsg(payload, subject=subject, stream_seq=self._seq))
        await self.state.apply_lifecycle(lifecycle_steps(session_events(recorded)), self._seq)

    async def recorded_reply(self, session_id: str):
        """The reply of the conversation's last `opened` event, as the stream holds it."""
        found = None
        for subject, payload, _ in self.publisher.messages:
            if subject == subjects.session_event_subject(session_id, "opened"):
                found = decode(payload, Opened).reply
        return found

    async def requested(self, session_id: str, node_id: str = "mac") -> None:
        await self.publisher.publish([(
            subjects.session_event_subject(session_id, "open_requested"),
            encode(OpenRequested(session_id=session_id, at=AT, instance_id=INSTANCE, repo=REPO,
                                 engine="scripted", node_id=node_id, request_id=None,
                                 force_fresh=False, clean_slate=False, has_instruction=False)),
            None,
        )])
        await self.fold()

    async def open(self, session_id: str, node_id: str = "mac", **plan) -> None:
        """open_requested, then the launch of its seed_composed, folded."""
        await self.requested(session_id, node_id)
        await self.launcher.launch(composed(session_id, node_id, **plan))
        await self.fold()

    composed = staticmethod(lambda *a, **k: composed(*a, **k))

    def events(self, kind: str) -> list[dict]:
        return [json.loads(p) for p in self.publisher.on("seedline.session.")
                if json.loads(p)["type"] == kind]


def composed(session_id: str, node_id: str = "mac", *, text: str | None = "the brief",
             relocation: bool = False, relocation_from: str | None = None,
             instance_id: str = INSTANCE, wake_seq: int | None = None,
             decided_seq: int | None = None) -> SeedComposed:
    plan = LaunchPlan(
        instance_id=instance_id, repo=REPO, engine="scripted", node_id=node_id,
        continuity=Continuity("fresh", None, "no_previous", "there is no earlier conversation"),
        resume_key=None, instruction="Add castling", clean_slate=False,
        relocation=relocation, relocation_from=relocation_from, wake_seq=wake_seq,
    )
    brief = BriefStats(rows=3, chars=40, omitted_rows=0, until_seq=3, sha256="ab" * 32) if text \
        else None
    return SeedComposed(session_id=session_id, at=AT, brief=brief, plan=plan, text=text,
                        decided_seq=decided_seq)


@pytest.fixture
def gw() -> Gateway:
    return Gateway()
