"""Composition root of the runner-gateway: its ports, connected; its parts, bootstrapped.

Its fold of the lifecycle and its follower of a person's messages are ordered ``BatchConsumer``s
(an event's meaning, and a turn's place, depend on what came before); launches, the
APIs and runner events are FastStream subscribers.
"""

from __future__ import annotations

import functools

from seedline_contracts import subjects
from seedline_contracts.events import Opened
from seedline_contracts.sessions import OpenReply
from seedline_platform import erasure, natsio
from seedline_platform.app_base import ServiceApp
from seedline_platform.consumer import consumer_drained
from seedline_platform.publishing import JetStreamPublisher
from seedline_platform.replay import last_seq
from seedline_platform.routing import Route
from seedline_platform.sealing import sealer_for
from seedline_platform.session_reads import newest_event
from seedline_platform.settings import Settings
from seedline_timeline_view import PostgresTimelineView

from .bootstrap import NAME, Parts, Ports, bootstrap
from .machine_calls import NatsMachines
from .notify import NatsNotifier
from .postgres_state import OFFSETS, PROJECTION, PostgresGatewayState
from .fold import FOLD_DURABLE
from .presence import KvPresence
from .repo_turns import PostgresRepoTurns
from .routes import routes
from .saved_objects import ObjectStoreKept

# Its own tables: a forgotten instance's rows go (Erasure). First the fold's offset row is
# written: the fold writes what it read without a lock (pg.Offsets.unmoved_since), and so
# puts back no row of a forgotten instance it read before the erasure.
FORGET_FIRST = (OFFSETS.touch_statement(PROJECTION),)
FORGET_STATEMENTS = (
    "DELETE FROM gateway_conversations WHERE instance_id = %s",
    "DELETE FROM last_opens WHERE instance_id = %s",
    "DELETE FROM not_woken_told WHERE instance_id = %s",
)


class GatewayApp(ServiceApp):
    name = NAME
    description = "The one funnel to machines: presence, launches, turns, stops, wakes."
    route_table = staticmethod(routes)
    # Launches on many repos at once each hold a connection for their repo's turn
    # (repo_turns): room for 8 of them and their own queries.
    pool_size = 16
    keyed_pool_size = 1  # its fold of the lifecycle, one batch at a time

    async def build(self) -> Parts:
        s = self.settings
        await natsio.ensure_runners_bucket(self.js, replicas=s.stream_replicas)
        await natsio.ensure_worktrees_bucket(self.js, replicas=s.stream_replicas)
        state = PostgresGatewayState(self.pool, self.keyed_pool)
        await state.setup()
        sealer = sealer_for(self.js, s)
        parts = bootstrap(s, Ports(
            state=state, machines=NatsMachines(self.nc, s.launch_timeout_seconds),
            publisher=JetStreamPublisher(self.js), notifier=NatsNotifier(self.nc),
            presence=functools.partial(KvPresence, self.js, state),
            stream_end=functools.partial(last_seq, self.js, subjects.SESSIONS_STREAM),
            fold_drained=functools.partial(
                consumer_drained, self.js, subjects.SESSIONS_STREAM, FOLD_DURABLE),
            recorded_reply=self._recorded_reply,
            newest_entries=PostgresTimelineView(self.pool).newest_at,
            # Shared by every copy; a turn reads where the fold's stored offset stands.
            repo_turns=PostgresRepoTurns(self.pool, OFFSETS, PROJECTION),
            saved_objects=ObjectStoreKept(self.js, functools.partial(_repo_of, state)),
            sealer=sealer, metrics=self.metrics, js=self.js,
            drop_forgotten=erasure.dropping(self.pool, FORGET_STATEMENTS, sealer,
                                            first=FORGET_FIRST),
        ))
        await parts.presence.start()
        return parts

    async def batch_options(self, route: Route) -> dict:
        if route.durable == FOLD_DURABLE:  # it stores how far it applied, with its rows
            return {"applied": self.parts.fold.folded.stored}
        return {}

    async def _recorded_reply(self, session_id: str) -> OpenReply | None:
        opened = await newest_event(self.js, session_id, Opened)
        return opened.reply if opened is not None else None


async def _repo_of(state, session_id: str) -> str | None:
    held = await state.held(session_id)
    return held.conversation.repo if held is not None else None


def create_app(settings: Settings) -> GatewayApp:
    return GatewayApp(settings)
