"""Deliver a launch for every seed_composed and record what the machine confirmed."""

from __future__ import annotations

import asyncio
import json
from typing import Sequence

import nats.errors
from nats.aio.client import Client
from nats.aio.msg import Msg
from nats.js import JetStreamContext

from seedline_contracts import subjects
from seedline_contracts.codec import decode, encode
from seedline_contracts.errors import ErrorBody
from seedline_contracts.events import OpenFailed, Opened, Relocated, SeedComposed, Stopped
from seedline_contracts.runner import LaunchReply, LaunchRequest, LaunchResume, Seed
from seedline_contracts.sessions import NoticeBody, OpenReply
from seedline_core.notices import error_message, offline_text, open_notice
from seedline_core.outcome import decide_outcome
from seedline_platform.clock import format_utc, utc_now
from seedline_platform.logging import get_logger
from seedline_platform.natsio import publish_window

from .machine_calls import stop_on_machine
from .presence import Presence
from .state import GatewayState, Live

log = get_logger(__name__)


class LaunchFailed(Exception):
    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


def event_message(event) -> tuple[str, bytes, dict]:
    tag = event.__struct_config__.tag
    return subjects.session_event_subject(event.session_id, tag), encode(event), None


class Launcher:
    def __init__(
        self, nc: Client, js: JetStreamContext, state: GatewayState, presence: Presence,
        launch_timeout: float,
    ) -> None:
        self._nc = nc
        self._js = js
        self._state = state
        self._presence = presence
        self._launch_timeout = launch_timeout

    async def handle(self, msgs: Sequence[Msg]) -> None:
        """Launches to different machines go out together; each records its own result."""
        composed = [decode(m.data, SeedComposed) for m in msgs]
        events = await asyncio.gather(*(self._launch(c) for c in composed))
        await publish_window(self._js, [event_message(e) for group in events for e in group])

    async def _launch(self, composed: SeedComposed) -> list:
        plan = composed.plan
        now = format_utc(utc_now())
        try:
            reply, launch = await self._deliver(composed)
        except LaunchFailed as failure:
            log.info("open_failed", session_id=composed.session_id, code=failure.code)
            return [OpenFailed(session_id=composed.session_id, at=now,
                               error=ErrorBody(failure.code, failure.message), plan=plan)]
        events: list = []
        previous = await self._state.live_for_repo(plan.instance_id, plan.repo)
        if previous and previous.session_id != composed.session_id:
            await stop_on_machine(self._nc, previous.node_id, previous.session_id, "superseded",
                                  self._launch_timeout)
            events.append(Stopped(session_id=previous.session_id, at=now, reason="superseded",
                                  node_id=previous.node_id))
        # Where the conversation runs now is the gateway's own record; the resolver's
        # view (plan.relocation_from) may not have caught up with a very recent open.
        running_on = previous.node_id if previous and previous.session_id == composed.session_id else None
        moved_from = running_on or plan.relocation_from
        if moved_from and moved_from != plan.node_id:
            await stop_on_machine(self._nc, moved_from, composed.session_id, "relocated",
                                  self._launch_timeout)
            events.append(Relocated(session_id=composed.session_id, at=now,
                                    from_node_id=moved_from, to_node_id=plan.node_id))
        moment = utc_now()
        await self._state.mark_live(Live(composed.session_id, plan.instance_id, plan.repo,
                                         plan.node_id, plan.engine, moment, moment))
        events.append(Opened(session_id=composed.session_id, at=now, reply=reply, plan=plan,
                             engine_session_id=launch.engine_session_id))
        log.info("opened", session_id=composed.session_id, outcome=reply.outcome)
        return events

    async def _deliver(self, composed: SeedComposed) -> tuple[OpenReply, LaunchReply]:
        plan = composed.plan
        presence = await self._presence.get(plan.node_id)
        if presence is None:
            label = await self._state.label(plan.node_id)
            raise LaunchFailed("runner_offline", offline_text(label, plan.node_id))
        seed = await self._seed(composed) if composed.brief is not None else None
        resume = (
            LaunchResume(plan.resume_key)
            if plan.continuity.mode == "resume" and plan.resume_key
            else None
        )
        request = LaunchRequest(
            session_id=composed.session_id, instance_id=plan.instance_id, repo=plan.repo,
            engine=plan.engine, resume=resume, seed=seed, instruction=plan.instruction,
        )
        try:
            msg = await self._nc.request(
                subjects.runner_subject(plan.node_id, "launch"), encode(request),
                timeout=self._launch_timeout,
            )
            launch = decode(msg.data, LaunchReply)
        except (nats.errors.TimeoutError, nats.errors.NoRespondersError, asyncio.TimeoutError):
            raise LaunchFailed("runner_unreachable", error_message(
                "runner_unreachable", label=presence.label, node_id=plan.node_id)) from None
        except Exception:
            raise LaunchFailed("runner_unreachable", error_message(
                "runner_unreachable", label=presence.label, node_id=plan.node_id)) from None
        if not launch.accepted:
            raise LaunchFailed("launch_refused", error_message(
                "launch_refused", label=presence.label, node_id=plan.node_id,
                reason=launch.reason or "no reason given"))
        outcome, resumed, seeded = decide_outcome(
            launch.resumed_conversation, launch.seeded, seed is not None, plan.continuity.mode
        )
        notice = open_notice(outcome, plan.continuity.reason)
        return OpenReply(
            session_id=composed.session_id, node_id=plan.node_id, resumed=resumed, seeded=seeded,
            outcome=outcome.value, continuity=plan.continuity,
            brief=composed.brief if seed is not None else None,
            notice=NoticeBody(**notice.to_wire()),
        ), launch

    async def _seed(self, composed: SeedComposed) -> Seed | None:
        msg = await self._nc.request(
            subjects.API_BRIEFS_GET, encode({"session_id": composed.session_id}), timeout=5
        )
        body = json.loads(msg.data)
        if not body.get("ok") or body.get("sha256") != composed.brief.sha256:
            # A newer decision replaced this brief; launching with the other text would
            # make the reply's brief stats lie about what the machine was given.
            log.warning("brief_unavailable", session_id=composed.session_id)
            return None
        return Seed(text=body["text"], sha256=body["sha256"])
