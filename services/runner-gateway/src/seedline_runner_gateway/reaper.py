"""Stop conversations nobody has used for a while, and notice machines that left.

Both tell the person, on seedline.notify.<instance>, what happened and what
their next message will do.
"""

from __future__ import annotations

import asyncio
from datetime import datetime

from nats.aio.client import Client
from nats.js import JetStreamContext

from seedline_contracts import subjects
from seedline_contracts.codec import encode
from seedline_contracts.events import Reaped, Stopped
from seedline_contracts.sessions import RunnerOfflineNotification, StoppedIdleNotification
from seedline_core.notices import runner_offline_notice_text, stopped_idle_text
from seedline_platform.clock import format_utc, utc_now
from seedline_platform.logging import get_logger
from seedline_platform.natsio import publish_window
from seedline_platform.settings import Settings

from .launching import event_message
from .machine_calls import stop_on_machine
from .presence import Presence
from .state import GatewayState

log = get_logger(__name__)


class Reaper:
    def __init__(self, nc: Client, js: JetStreamContext, state: GatewayState, presence: Presence,
                 settings: Settings) -> None:
        self._nc = nc
        self._js = js
        self._state = state
        self._presence = presence
        self._settings = settings

    async def run(self) -> None:
        while True:
            await asyncio.sleep(self._settings.idle_sweep_seconds)
            try:
                await self.sweep()
            except Exception:
                log.exception("sweep_failed")

    async def sweep(self) -> None:
        await self.stop_idle()
        await self.notice_departed_machines()

    async def stop_idle(self, now: datetime | None = None) -> None:
        now = now or utc_now()
        for live in await self._state.idle_since(now - self._settings.idle_stop):
            idle = now - live.last_activity
            await stop_on_machine(self._nc, live.node_id, live.session_id, "idle", self._settings.launch_timeout_seconds)
            label = await self._state.label(live.node_id)
            at = format_utc(now)
            await publish_window(self._js, [event_message(Reaped(
                session_id=live.session_id, at=at, node_id=live.node_id,
                idle_seconds=int(idle.total_seconds())))])
            await self._state.end(live.session_id)
            await self._nc.publish(subjects.notify_subject(live.instance_id), encode(
                StoppedIdleNotification(session_id=live.session_id,
                                        text=stopped_idle_text(idle, label), at=at)))
            log.info("reaped", session_id=live.session_id, idle_seconds=int(idle.total_seconds()))

    async def notice_departed_machines(self) -> None:
        live = await self._state.all_live()
        if not live:
            return
        online = await self._presence.online_nodes()
        for conversation in live:
            if conversation.node_id in online:
                continue
            label = await self._state.label(conversation.node_id)
            at = format_utc(utc_now())
            await publish_window(self._js, [event_message(Stopped(
                session_id=conversation.session_id, at=at, reason="runner_offline",
                node_id=conversation.node_id))])
            await self._state.end(conversation.session_id)
            await self._nc.publish(subjects.notify_subject(conversation.instance_id), encode(
                RunnerOfflineNotification(session_id=conversation.session_id,
                                          node_id=conversation.node_id,
                                          text=runner_offline_notice_text(label, conversation.node_id),
                                          at=at)))
            log.info("runner_offline", session_id=conversation.session_id, node_id=conversation.node_id)
