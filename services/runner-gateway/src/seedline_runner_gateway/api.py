"""seedline.api.sessions.stop and .list, and runner events: thin handlers."""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

import msgspec
from nats.aio.msg import Msg

from seedline_contracts import channels
from seedline_contracts.codec import decode
from seedline_contracts.errors import ErrorReply, error_reply
from seedline_contracts.events import BriefGiven, EngineBound
from seedline_contracts.runner import MachineRemoveReply, MachineRemoveRequest, RunnerEvent
from seedline_contracts.sessions import (
    LiveConversation,
    MachineRemovedNotification,
    SessionsListReply,
    SessionsListRequest,
    StopReply,
    StopRequest,
)
from seedline_contracts.times import format_utc
from seedline_contracts.tokens import TokenError, name_problem
from seedline_core import lifecycle as lc
from seedline_core.notices import error_message, machine_removed_text
from seedline_platform.logging import get_logger
from seedline_platform.publishing import event_message

from .activity import with_newest_activity
from .fold import LifecycleFold
from .resume_lost import ResumeLostRecorder
from .state import Held
from .stopping import Stopper

if TYPE_CHECKING:
    from .bootstrap import Ports

log = get_logger(__name__)

MAX_REASON_CHARS = 200
MAX_ENGINE_SESSION_CHARS = 256
SETTLE_SECONDS = 2.0
# A stop's wait for the fold and an open in flight, within a caller's 10 s request timeout.
STOP_WAIT_SECONDS = 8.0


def read_list(body: bytes) -> SessionsListRequest | ErrorReply:
    """A list request; an empty body asks for every instance."""
    try:
        return decode(body or b"{}", SessionsListRequest)
    except msgspec.MsgspecError as exc:
        return error_reply("invalid_request", f"The list request is not valid: {exc}.")


def _settled_on(held: Held | None, node_id: str) -> bool:
    """Whether a machine's report on a launch can be taken: the conversation is live on that
    machine, or its open failed."""
    return held is not None and (held.state is lc.State.FAILED or (
        held.state is lc.State.LIVE and held.node_id == node_id))


class GatewayApi:
    def __init__(self, ports: Ports, stopper: Stopper, resume_lost: ResumeLostRecorder,
                 fold: LifecycleFold) -> None:
        self._state = ports.state
        self._publisher = ports.publisher
        self._clock = ports.clock
        self._newest_entries = ports.newest_entries
        self._stopper = stopper
        self._resume_lost = resume_lost
        # Answers reflect every event recorded before the request (read your own writes).
        self._caught_up = fold.caught_up
        # A wait for a launch to be folded wakes when that conversation's events are.
        self._fold = fold
        self._settling: dict[tuple[str, str], asyncio.Future] = {}

    async def stop(self, request: StopRequest) -> StopReply | ErrorReply:
        if name_problem(request.session_id):
            return error_reply(
                "invalid_request", error_message("invalid_request", field="session_id"))
        deadline = asyncio.get_running_loop().time() + STOP_WAIT_SECONDS
        caught_up = await self._caught_up()
        # A stop asked as the open's reply arrives (the reply follows `opened` into the
        # stream, and this copy's fold may not hold it yet) stops what that open started:
        # its open in flight is waited for, and a conversation not folded here yet is read
        # again (a sibling copy may have folded it).
        held = await self._fold.until(
            request.session_id, lambda held: (
                caught_up if held is None else held.state is not lc.State.OPENING), deadline)
        if held is None and caught_up:
            return error_reply("not_found", error_message("not_found", what="conversation"))
        if held is None or held.state is lc.State.OPENING:
            # Never a stale `stopped: false`: the caller would take the conversation for
            # ended while it runs on.
            return error_reply("unavailable", error_message(
                "unavailable", still_opening=held is not None))
        if held.state is not lc.State.LIVE:
            return StopReply(stopped=False)
        await self._stopper.end(held, request.reason[:MAX_REASON_CHARS] or "requested")
        return StopReply(stopped=True)

    async def remove_machine(
        self, request: MachineRemoveRequest,
    ) -> MachineRemoveReply | ErrorReply:
        """An operator takes a machine away: each conversation live on it is stopped (the
        machine asked first, so it saves the checkout) and its people told why."""
        node_id = request.node_id
        if name_problem(node_id):
            return error_reply(
                "invalid_request", error_message("invalid_request", field="node_id"))
        await self._caught_up()
        label = await self._state.label(node_id)
        text = machine_removed_text(label, node_id)
        stopped = []
        for held in await self._state.live_on(node_id):
            await self._stopper.end(held, "machine_removed", lambda at, held=held: (
                MachineRemovedNotification(session_id=held.session_id, node_id=node_id,
                                           text=text, at=at)))
            stopped.append(held.session_id)
        log.info("machine_removed", node_id=node_id, stopped=len(stopped), by=request.by)
        return MachineRemoveReply(stopped=stopped)

    async def list_live(self, request: SessionsListRequest) -> SessionsListReply | ErrorReply:
        if request.instance_id is not None and name_problem(request.instance_id):
            return error_reply(
                "invalid_request", error_message("invalid_request", field="instance_id"))
        await self._caught_up()
        rows = await with_newest_activity(await self._state.all_live(request.instance_id),
                                          self._newest_entries)
        return SessionsListReply(conversations=[
            LiveConversation(
                h.session_id, h.conversation.instance_id, h.conversation.repo, h.node_id or "",
                h.conversation.engine or "", h.conversation.confirmed_at or "",
                format_utc(h.last_activity) if h.last_activity else "",
                outcome=h.conversation.outcome,
            )
            for h in rows
        ])

    async def _settled(self, session_id: str, node_id: str):
        """`_settle`, shared by the reports a machine makes together on one launch
        (engine_bound and brief_given): one read and one wait for them all."""
        key = (session_id, node_id)
        settling = self._settling.get(key)
        if settling is None:
            settling = self._settling[key] = asyncio.ensure_future(
                self._settle(session_id, node_id))
            settling.add_done_callback(lambda _: self._settling.pop(key, None))
        return await asyncio.shield(settling)  # one report's handler ending ends no other's

    async def _settle(self, session_id: str, node_id: str):
        """The conversation once the launch the machine reports on is folded in.

        A machine reports right after its launch reply, before the gateway has recorded
        `opened` or `relocated`: a conversation still opening, or moving to that machine
        from another (live elsewhere or stopped), is waited for, up to two seconds: each
        look follows the next fold, which hands over what it wrote; then, when the fold was
        behind, until it holds what is recorded.
        """
        deadline = asyncio.get_running_loop().time() + SETTLE_SECONDS
        # The report most often comes before the fold holds the launch's outcome: the first
        # look is that fold, handed over, not a read (one statement fewer per launch).
        held = await self._fold.until(
            session_id, lambda held: _settled_on(held, node_id), deadline, read_first=False)
        if not _settled_on(held, node_id) and await self._caught_up():
            # A fold further behind than that may not hold the launch yet (the report would
            # be lost: for an engine whose id comes after its launch reply, the only record
            # of it): one more look once it holds what is recorded now.
            held = await self._state.held(session_id)
        return held

    async def on_runner_event(self, event: RunnerEvent, msg: Msg) -> None:
        """engine_bound, resume_lost and brief_given from the machine a conversation is live
        on become recorded facts."""
        try:
            node_id = channels.RUNNER_EVENTS.values(msg.subject)["node"]
        except (TokenError, ValueError):
            log.warning("runner_event_unreadable", subject=msg.subject)
            return
        if event.type == "exited" and event.worktree is not None:
            # What the machine saved as the conversation stopped, however it stopped (its
            # stop reply told it too when the platform asked: recorded once).
            held = await self._state.held(event.session_id)
            if held is not None and held.node_id == node_id:
                await self._stopper.saved(held.conversation, node_id, event.worktree)
            return
        if event.type == "resume_lost":
            held = await self._settled(event.session_id, node_id)
            await self._resume_lost.record(held, node_id, event.session_id, event.reason)
            return
        if event.type == "brief_given" and event.brief_sha256:
            held = await self._settled(event.session_id, node_id)
            if held is None or held.node_id != node_id:
                log.warning("brief_given_ignored", session_id=event.session_id, node_id=node_id)
                return
            await self._publisher.publish([event_message(BriefGiven(
                session_id=event.session_id, at=self._clock(), node_id=node_id,
                sha256=event.brief_sha256[:64]))])
            return
        if event.type != "engine_bound" or not event.engine_session_id:
            return
        held = await self._settled(event.session_id, node_id)
        if held is None or held.state is not lc.State.LIVE or held.node_id != node_id:
            log.warning("engine_bound_ignored", session_id=event.session_id, node_id=node_id)
            return
        bound = event.engine_session_id[:MAX_ENGINE_SESSION_CHARS]
        if (held.conversation.resume_key, held.conversation.resume_node_id) == (bound, node_id):
            return  # `opened` already records it (CONTRACT.md 6, 1.3): one event fewer
        await self._publisher.publish([event_message(EngineBound(
            session_id=event.session_id, at=self._clock(), node_id=node_id,
            engine_session_id=bound))])
