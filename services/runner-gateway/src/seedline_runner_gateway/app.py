"""Composition root of the runner-gateway."""

from __future__ import annotations

from seedline_contracts import subjects
from seedline_platform import natsio
from seedline_platform.app_base import ServiceApp
from seedline_platform.natsio import Responder
from seedline_platform.settings import Settings

from .api import GatewayApi
from .launching import Launcher
from .presence import Presence
from .reaper import Reaper
from .state import GatewayState
from .turns import TimelineFollower

NAME = "runner-gateway"


class GatewayApp(ServiceApp):
    name = NAME

    async def setup(self) -> None:
        s = self.settings
        await natsio.ensure_runners_bucket(self.js, replicas=s.stream_replicas)
        state = GatewayState(self.pool)
        await state.setup()
        self.presence = Presence(self.js, state)
        self.reaper = Reaper(self.nc, self.js, state, self.presence, s)
        launcher = Launcher(self.nc, self.js, state, self.presence, s.launch_timeout_seconds)
        follower = TimelineFollower(self.nc, state, self.presence, s.launch_timeout_seconds,
                                    s.open_timeout_seconds)
        self.consume(stream=subjects.SESSIONS_STREAM, durable="runner-gateway-launch",
                     filter_subjects=[subjects.session_event_filter("seed_composed")],
                     handle=launcher.handle, park=self.parker(subjects.REJECTED_SESSIONS),
                     batch_size=min(s.batch_size, 32), ack_wait=s.launch_timeout_seconds * 3 + 30)
        self.consume(stream=subjects.TIMELINE_STREAM, durable="runner-gateway-timeline",
                     filter_subjects=[subjects.TIMELINE_ALL], handle=follower.handle,
                     park=self.parker(subjects.REJECTED_TIMELINE),
                     ack_wait=s.open_timeout_seconds * 2 + 30)
        self.loops += [self.reaper.run, self.presence.watch]
        self.api = GatewayApi(self.nc, self.js, state, s.launch_timeout_seconds)
        await self.nc.subscribe("seedline.runner.*.events", queue=NAME, cb=self.api.on_runner_event)

    async def serve(self, responder: Responder) -> None:
        await responder.serve(subjects.API_SESSIONS_STOP, self.api.stop)
        await responder.serve(subjects.API_SESSIONS_LIST, self.api.list_live)


def create_app(settings: Settings) -> GatewayApp:
    return GatewayApp(settings)
