"""Stop conversations nobody has used for a while, and tell the person what their next
message will do (CONTRACT.md 4)."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from datetime import datetime, timedelta

from seedline_contracts.sessions import StoppedIdleNotification
from seedline_contracts.times import utc_now
from seedline_core.notices import stopped_idle_text
from seedline_platform.logging import get_logger

from .activity import NewestEntries, with_newest_activity
from .state import GatewayState
from .stopping import Stopper

log = get_logger(__name__)


class Reaper:
    def __init__(
        self, state: GatewayState, stopper: Stopper, idle_stop: timedelta, sweep_seconds: float,
        caught_up: Callable[[], Awaitable[None]], newest_entries: NewestEntries,
        clock: Callable[[], datetime] = utc_now,
    ) -> None:
        self._caught_up = caught_up
        self._newest_entries = newest_entries
        self._state = state
        self._stopper = stopper
        self._idle_stop = idle_stop
        self._sweep_seconds = sweep_seconds
        self._clock = clock

    async def run(self) -> None:
        while True:
            await asyncio.sleep(self._sweep_seconds)
            try:
                await self.stop_idle()
            except Exception:
                log.exception("idle_sweep_failed")

    async def stop_idle(self, now: datetime | None = None) -> None:
        now = now or self._clock()
        cutoff = now - self._idle_stop
        await self._caught_up()
        quiet = await self._state.idle_since(cutoff)
        for held in await with_newest_activity(quiet, self._newest_entries):
            if held.last_activity >= cutoff:
                continue  # its engine wrote to the timeline since
            idle = now - held.last_activity
            label = await self._state.label(held.node_id) if held.node_id else None
            await self._stopper.end(
                held, "idle", idle_seconds=int(idle.total_seconds()),
                notice=lambda at, h=held, i=idle: StoppedIdleNotification(
                    session_id=h.session_id, text=stopped_idle_text(i, label), at=at),
            )
            log.info("reaped", session_id=held.session_id, idle_seconds=int(idle.total_seconds()))
