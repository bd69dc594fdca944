"""Follow the timeline: keep live conversations' activity fresh, deliver a
person's messages as turns, and wake a conversation when none is live.

Entries are handled in stream order, one at a time, so turns reach a machine in
the order people wrote them. A turn is acknowledged only after the machine
accepted it; the machine ignores a (session_id, seq) it has seen, so a
redelivery after a gateway restart is harmless.
"""

from __future__ import annotations

import json
from datetime import datetime, timedelta
from typing import Sequence

import nats.errors
from nats.aio.client import Client
from nats.aio.msg import Msg

from seedline_contracts import subjects
from seedline_contracts.codec import decode, encode
from seedline_contracts.runner import TurnRequest
from seedline_contracts.sessions import RunnerOfflineNotification
from seedline_contracts.timeline import TimelineEntry
from seedline_core.notices import runner_offline_notice_text
from seedline_platform.clock import format_utc, parse_rfc3339, utc_now
from seedline_platform.consumer import Outage
from seedline_platform.logging import get_logger

from .presence import Presence
from .state import GatewayState, Live

log = get_logger(__name__)

# A chat_user entry wakes a conversation only when written within this long of
# reaching the timeline: backfilled history never starts anything.
WAKE_FRESHNESS = timedelta(minutes=2)


class MachineBusy(Outage):
    """The machine is online but did not take the turn: wait and try again."""


class TimelineFollower:
    def __init__(
        self, nc: Client, state: GatewayState, presence: Presence, turn_timeout: float,
        open_timeout: float,
    ) -> None:
        self._nc = nc
        self._state = state
        self._presence = presence
        self._turn_timeout = turn_timeout
        self._open_timeout = open_timeout

    async def handle(self, msgs: Sequence[Msg]) -> None:
        entries = [(m, decode(m.data, TimelineEntry)) for m in msgs]
        activity: dict[str, datetime] = {}
        for _, entry in entries:
            at = parse_rfc3339(entry.at)
            activity[entry.session_id] = max(at, activity.get(entry.session_id, at))
        await self._state.touch(activity)
        for msg, entry in entries:
            if entry.kind == "chat_user" and entry.entry_id != subjects.instruction_entry_id(entry.session_id):
                await self._on_person_message(msg, entry)

    async def _on_person_message(self, msg: Msg, entry: TimelineEntry) -> None:
        seq = msg.metadata.sequence.stream
        live = await self._state.live_for_repo(entry.instance_id, entry.repo)
        if live is not None:
            if await self._deliver_turn(live, seq, entry.content):
                return
        arrived = msg.metadata.timestamp
        if arrived is None or abs(arrived - parse_rfc3339(entry.at)) > WAKE_FRESHNESS:
            log.info("backfill_not_woken", seq=seq)
            return
        await self._wake(entry, seq)

    async def _deliver_turn(self, live: Live, seq: int, content: str) -> bool:
        """True when the machine took the turn; False when the machine is gone."""
        body = encode(TurnRequest(session_id=live.session_id, seq=seq, content=content))
        try:
            msg = await self._nc.request(
                subjects.runner_subject(live.node_id, "turn"), body, timeout=self._turn_timeout
            )
        except (nats.errors.TimeoutError, nats.errors.NoRespondersError):
            if await self._presence.get(live.node_id) is not None:
                raise MachineBusy(live.node_id) from None
            await self._machine_gone(live)
            return False
        if json.loads(msg.data).get("accepted"):
            return True
        # The machine no longer runs it (it restarted, say): the message wakes a new one.
        await self._state.end(live.session_id)
        return False

    async def _machine_gone(self, live: Live) -> None:
        label = await self._state.label(live.node_id)
        await self._notify(live.instance_id, RunnerOfflineNotification(
            session_id=live.session_id, node_id=live.node_id,
            text=runner_offline_notice_text(label, live.node_id), at=format_utc(utc_now())))
        await self._state.end(live.session_id)

    async def _wake(self, entry: TimelineEntry, seq: int) -> None:
        target = await self._state.last_open(entry.instance_id)
        if target is None:
            log.info("nothing_to_wake_on", instance_id=entry.instance_id, seq=seq)
            return
        node_id, engine = target
        request = {
            "request_id": f"wake:{entry.entry_id}"[:128],
            "instance_id": entry.instance_id, "repo": entry.repo, "engine": engine,
            "node_id": node_id, "wake_seq": seq,
        }
        msg = await self._nc.request(subjects.API_SESSIONS_OPEN, encode(request),
                                     timeout=self._open_timeout + 5)
        reply = json.loads(msg.data)
        log.info("woken", seq=seq, ok=reply.get("ok"), session_id=reply.get("session_id"))
        if not reply.get("ok") and reply.get("error", {}).get("code") == "runner_offline":
            await self._notify(entry.instance_id, RunnerOfflineNotification(
                session_id=entry.session_id, node_id=node_id,
                text=reply["error"]["message"], at=format_utc(utc_now())))

    async def _notify(self, instance_id: str, notification) -> None:
        await self._nc.publish(subjects.notify_subject(instance_id), encode(notification))
