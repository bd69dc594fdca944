"""Composition root of the runner-gateway."""

from __future__ import annotations

import asyncio

from seedline_contracts import subjects
from seedline_platform import natsio, pg
from seedline_platform.consumer import BatchConsumer
from seedline_platform.logging import get_logger
from seedline_platform.settings import Settings

from .api import GatewayApi
from .launching import Launcher
from .presence import Presence
from .reaper import Reaper
from .state import GatewayState
from .turns import TimelineFollower

log = get_logger(__name__)
NAME = "runner-gateway"


class GatewayApp:
    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.nc = None
        self.pool = None
        self.consumers: list[BatchConsumer] = []
        self.responder: natsio.Responder | None = None
        self.reaper: Reaper | None = None
        self.presence: Presence | None = None
        self._runner_events = None

    async def start(self) -> None:
        s = self.settings
        self.nc = await natsio.connect(s.nats_servers, NAME)
        js = self.nc.jetstream()
        await natsio.ensure_streams(js, replicas=s.stream_replicas)
        await natsio.ensure_runners_bucket(js, replicas=s.stream_replicas)
        await natsio.enforce_durability(self.nc, js, s.nats_monitor_url, s.strict_durability)
        self.pool = await pg.open_pool(s.database_url, NAME)
        state = GatewayState(self.pool)
        await state.setup()
        presence = self.presence = Presence(js, state)
        launcher = Launcher(self.nc, js, state, presence, s.launch_timeout_seconds)
        follower = TimelineFollower(self.nc, state, presence, s.launch_timeout_seconds,
                                    s.open_timeout_seconds)
        self.reaper = Reaper(self.nc, js, state, presence, s)

        async def park_session_event(msg, reason):
            await natsio.park_message(js, msg, reason, subjects.REJECTED_SESSIONS)

        async def park_timeline_entry(msg, reason):
            await natsio.park_message(js, msg, reason, subjects.REJECTED_TIMELINE)

        self.consumers = [
            BatchConsumer(js, stream=subjects.SESSIONS_STREAM, durable="runner-gateway-launch",
                          filter_subjects=[subjects.session_event_filter("seed_composed")],
                          handle=launcher.handle, park=park_session_event,
                          batch_size=min(s.batch_size, 32), max_deliver=s.max_deliver,
                          ack_wait=s.launch_timeout_seconds * 3 + 30),
            BatchConsumer(js, stream=subjects.TIMELINE_STREAM, durable="runner-gateway-timeline",
                          filter_subjects=[subjects.TIMELINE_ALL], handle=follower.handle,
                          park=park_timeline_entry, batch_size=s.batch_size,
                          max_deliver=s.max_deliver, ack_wait=s.open_timeout_seconds * 2 + 30),
        ]
        for consumer in self.consumers:
            await consumer.start()
        api = GatewayApi(self.nc, js, state, s.launch_timeout_seconds)
        self._runner_events = await self.nc.subscribe("seedline.runner.*.events", queue=NAME,
                                                      cb=api.on_runner_event)
        self.responder = natsio.Responder(self.nc, NAME)
        await self.responder.serve(subjects.API_SESSIONS_STOP, api.stop)
        await self.responder.serve(subjects.API_SESSIONS_LIST, api.list_live)
        log.info("ready")

    async def run(self) -> None:
        assert self.reaper is not None
        await asyncio.gather(self.reaper.run(), self.presence.watch(), *(c.run() for c in self.consumers))

    async def stop(self) -> None:
        if self.responder:
            await self.responder.close()
        if self.nc and not self.nc.is_closed:
            # close, not drain: unacknowledged work is redelivered, and a
            # drain would wait on pull subscriptions whose fetches were cancelled.
            await self.nc.close()
        if self.pool:
            await self.pool.close()


def create_app(settings: Settings) -> GatewayApp:
    return GatewayApp(settings)
