"""Composition root of the runner-gateway.

Its fold of the lifecycle and its timeline follower are ordered ``BatchConsumer``s
(an event's meaning, and a turn's place, depend on what came before); launches, the
APIs and runner events are FastStream subscribers.
"""

from __future__ import annotations

import msgspec
from nats.js.errors import NotFoundError

from seedline_contracts import subjects
from seedline_contracts.codec import decode
from seedline_contracts.events import Opened, SessionEvent
from seedline_contracts.sessions import OpenReply
from seedline_platform import erasure, natsio
from seedline_platform.app_base import ServiceApp
from seedline_platform.consumer import Batch
from seedline_platform.lifecycle_events import lifecycle_steps
from seedline_platform.publishing import JetStreamPublisher, Publisher
from seedline_platform.replay import last_seq
from seedline_platform.sealing import sealer_for
from seedline_platform.logging import get_logger
from seedline_platform.settings import Settings
from seedline_platform.watermark import Watermark

from .api import GatewayApi
from .launch_outcomes import LaunchOutcomes
from .launching import Launcher
from .machine_calls import Machines, NatsMachines
from .notify import NatsNotifier, Notifier
from .postgres_state import PostgresGatewayState
from .presence import KvPresence
from .reaper import Reaper
from .reconcile import Reconciler
from .repo_turns import LocalRepoTurns, PostgresRepoTurns
from .resume_lost import ResumeLostRecorder
from .routes import routes
from .state import GatewayState
from .stopping import Stopper
from .turns import TimelineFollower

log = get_logger(__name__)

NAME = "runner-gateway"
CATCH_UP_SECONDS = 5.0


class GatewayApp(ServiceApp):
    name = NAME
    description = "The one funnel to machines: presence, launches, turns, stops, wakes."
    route_table = staticmethod(routes)
    # Launches on many repos at once each hold a connection for their repo's turn
    # (repo_turns): room for 8 of them and their own queries.
    pool_size = 16

    def __init__(
        self, settings: Settings, *, state: GatewayState | None = None,
        machines: Machines | None = None, publisher: Publisher | None = None,
        notifier: Notifier | None = None,
    ) -> None:
        self._ports = {"state": state, "machines": machines, "publisher": publisher,
                       "notifier": notifier}
        super().__init__(settings)
        self.opens_total = self.metrics.counter(
            "seedline_opens_total", "Launches, by reason_code and outcome (or error code).",
            ["reason_code", "outcome"],
        )

    async def setup(self) -> None:
        p, s = self._ports, self.settings
        await natsio.ensure_runners_bucket(self.js, replicas=s.stream_replicas)
        state = p["state"]
        repo_turns = LocalRepoTurns()
        if state is None:
            state = PostgresGatewayState(self.pool)
            await state.setup()
            repo_turns = PostgresRepoTurns(self.pool)  # shared by every copy
        self.state = state
        self.folded = Watermark(state.applied)
        publisher = p["publisher"] or JetStreamPublisher(self.js)
        machines = p["machines"] or NatsMachines(self.nc, s.launch_timeout_seconds)
        notifier = p["notifier"] or NatsNotifier(self.nc)
        stopper = Stopper(publisher, machines, notifier)
        reconciler = Reconciler(state, stopper, self.caught_up)
        self.presence = KvPresence(self.js, state, reconciler)
        await self.presence.start()
        sealer = sealer_for(self.js, s)
        outcomes = LaunchOutcomes(
            state=state, machines=machines, publisher=publisher, stopper=stopper,
            notifier=notifier, caught_up=self.caught_up,
            count_outcome=lambda reason, outcome: self.opens_total.labels(reason, outcome).inc(),
        )
        self.launcher = Launcher(
            state=state, presence=self.presence, machines=machines, publisher=publisher,
            stopper=stopper, reconciler=reconciler, outcomes=outcomes, caught_up=self.caught_up,
            sealer=sealer, repo_turns=repo_turns,
        )
        self.follower = TimelineFollower(
            state=state, presence=self.presence, machines=machines, publisher=publisher,
            stopper=stopper, notifier=notifier, caught_up=self.caught_up, sealer=sealer,
            folded=self.folded,
        )
        resume_lost = ResumeLostRecorder(publisher, notifier, self._recorded_reply)
        self.api = GatewayApi(state, stopper, publisher, self.caught_up, resume_lost,
                              folded=self.folded)
        self.reaper = Reaper(state, stopper, s.idle_stop, s.idle_sweep_seconds, self.caught_up)
        if p["state"] is None:  # its own tables: a forgotten instance's rows go (Erasure, 1.2)
            self.loops.append(erasure.follower(self.js, erasure.dropping(self.pool, (
                "DELETE FROM gateway_conversations WHERE instance_id = %s",
                "DELETE FROM last_opens WHERE instance_id = %s",
                "DELETE FROM not_woken_told WHERE instance_id = %s",
            ), sealer), s.stream_replicas))

    async def apply_sessions(self, batch: Batch[SessionEvent]) -> None:
        await self.state.apply_lifecycle(lifecycle_steps(batch.items), batch.last_seq)
        await self.folded.advance(batch.last_seq)

    async def caught_up(self, upto: int | None = None) -> None:
        """Wait until the fold holds every event up to `upto` (default: recorded so far)."""
        target = upto if upto is not None else await last_seq(self.js, subjects.SESSIONS_STREAM)
        if not await self.folded.reached(target, CATCH_UP_SECONDS):
            log.warning("fold_behind", target=target, applied=self.folded.seq)

    async def _recorded_reply(self, session_id: str) -> OpenReply | None:
        """The reply its `opened` event recorded (a direct get of the subject's last message)."""
        try:
            msg = await self.js.get_last_msg(
                subjects.SESSIONS_STREAM, subjects.session_event_subject(session_id, "opened"))
            return decode(msg.data, Opened).reply
        except (NotFoundError, msgspec.MsgspecError):
            return None


def create_app(settings: Settings, **ports) -> GatewayApp:
    return GatewayApp(settings, **ports)
