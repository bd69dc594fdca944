"""seedline.api.sessions.stop and .list, runner events: thin handlers."""

from __future__ import annotations

import msgspec
from nats.aio.client import Client
from nats.aio.msg import Msg
from nats.js import JetStreamContext

from seedline_contracts.codec import decode, encode
from seedline_contracts.errors import error_reply
from seedline_contracts.events import EngineBound, Stopped
from seedline_contracts.runner import RunnerEvent
from seedline_contracts.sessions import (
    LiveConversation,
    SessionsListReply,
    SessionsListRequest,
    StopReply,
    StopRequest,
)
from seedline_contracts.tokens import TokenError, unescape_token
from seedline_core.notices import error_message
from seedline_platform.clock import format_utc, now_text
from seedline_platform.logging import get_logger
from seedline_platform.natsio import publish_window

from .launching import event_message
from .machine_calls import stop_on_machine
from .state import GatewayState

log = get_logger(__name__)

MAX_REASON_CHARS = 200


class GatewayApi:
    def __init__(self, nc: Client, js: JetStreamContext, state: GatewayState, timeout: float) -> None:
        self._nc = nc
        self._js = js
        self._state = state
        self._timeout = timeout

    async def stop(self, msg: Msg) -> bytes:
        try:
            request = decode(msg.data, StopRequest)
        except (msgspec.ValidationError, msgspec.DecodeError) as exc:
            return encode(error_reply("invalid_request", f"The stop request is not valid: {exc}."))
        live = await self._state.live(request.session_id)
        if live is None:
            return encode(error_reply("not_found", error_message("not_found", what="running conversation")))
        reason = request.reason[:MAX_REASON_CHARS]
        await stop_on_machine(self._nc, live.node_id, live.session_id, reason, self._timeout)
        await publish_window(self._js, [event_message(Stopped(
            session_id=live.session_id, at=now_text(), reason=reason, node_id=live.node_id))])
        await self._state.end(live.session_id)
        return encode(StopReply(stopped=True))

    async def list_live(self, msg: Msg) -> bytes:
        try:
            request = decode(msg.data or b"{}", SessionsListRequest)
        except (msgspec.ValidationError, msgspec.DecodeError) as exc:
            return encode(error_reply("invalid_request", f"The list request is not valid: {exc}."))
        rows = await self._state.all_live(request.instance_id)
        return encode(SessionsListReply(conversations=[
            LiveConversation(r.session_id, r.instance_id, r.repo, r.node_id, r.engine,
                             format_utc(r.opened_at), format_utc(r.last_activity))
            for r in rows
        ]))

    async def on_runner_event(self, msg: Msg) -> None:
        """engine_bound becomes a SEEDLINE_SESSIONS event: the platform keeps the resume key."""
        try:
            node_id = unescape_token(msg.subject.split(".")[2])
            event = decode(msg.data, RunnerEvent)
        except (TokenError, IndexError, msgspec.MsgspecError):
            log.warning("runner_event_unreadable", subject=msg.subject)
            return
        if event.type == "engine_bound" and event.engine_session_id:
            await publish_window(self._js, [event_message(EngineBound(
                session_id=event.session_id, at=now_text(), node_id=node_id,
                engine_session_id=event.engine_session_id[:256]))])
