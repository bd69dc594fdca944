"""Requests the gateway sends to machines (CONTRACT.md 6): a port, NATS, and a fake.

Replies are decoded into the contract's own types, so the gateway never reads a
field the runner protocol does not have.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass, field

import msgspec
import nats.errors
from nats.aio.client import Client

from seedline_contracts import channels, subjects
from seedline_contracts.codec import decode, encode
from seedline_contracts.runner import (
    LaunchReply,
    LaunchRequest,
    RunnerStopReply,
    RunnerStopRequest,
    TurnReply,
    TurnRequest,
)
from seedline_contracts.worktrees import SavedTree
from seedline_platform import natsio
from seedline_platform.logging import get_logger
from seedline_platform.observability import trace_headers
from seedline_platform.sending import check_send

log = get_logger(__name__)


class MachineUnreachable(Exception):
    """The machine did not answer (no responder, or not in time)."""


class NatsAway(MachineUnreachable):
    """No answer because the connection to NATS was lost (a restart of nats-server), not
    because of the machine: it stayed away longer than the gateway waits."""


# How long a request to a machine rides out NATS being away: a restarted nats-server is
# back in a second or three, and the machine reconnects after the gateway does.
NATS_AWAY_SECONDS = 15.0
RECONNECT_POLL_SECONDS = 0.25


class Machines:
    """The port: launch, deliver a turn, stop."""

    async def launch(self, node_id: str, request: LaunchRequest) -> LaunchReply: ...

    async def turn(self, node_id: str, request: TurnRequest) -> TurnReply: ...

    async def stop(self, node_id: str, session_id: str, reason: str) -> RunnerStopReply | None:
        """Ask the machine to stop a conversation: its answer (did it stop one, and what did
        it save of the checkout), or None from a machine that did not answer (logged,
        never fatal)."""
        ...


class NatsMachines(Machines):
    def __init__(self, nc: Client, timeout: float) -> None:
        self._nc = nc
        self._timeout = timeout

    async def _ask(self, node_id: str, verb: str, body: object, reply_type: type):
        """The machine's reply. A request that got none while NATS was away (or had just
        come back, before the machine reconnected) is asked again once NATS is there, for
        up to NATS_AWAY_SECONDS: asking again is safe, as a machine answers a repeated
        launch with its first reply, ignores a turn it has, and a stop is a stop."""
        check_send(subjects.runner_subject(node_id, verb))
        loop = asyncio.get_running_loop()
        give_up = loop.time() + NATS_AWAY_SECONDS
        while True:
            try:
                msg = await self._nc.request(
                    subjects.runner_subject(node_id, verb), encode(body), timeout=self._timeout,
                    headers=trace_headers(),
                )
                break
            except (nats.errors.TimeoutError, nats.errors.NoRespondersError,
                    asyncio.TimeoutError, nats.errors.ConnectionClosedError) as exc:
                if not natsio.away_within(self._nc, self._timeout + RECONNECT_POLL_SECONDS):
                    raise MachineUnreachable(f"{node_id} did not answer {verb}") from exc
                if loop.time() >= give_up or self._nc.is_closed:
                    raise NatsAway(f"NATS was away while asking {node_id} to {verb}") from exc
                log.info("machine_request_again", node_id=node_id, verb=verb,
                         reason="nats_was_away")
                await asyncio.sleep(RECONNECT_POLL_SECONDS)
                while not self._nc.is_connected and loop.time() < give_up:
                    await asyncio.sleep(RECONNECT_POLL_SECONDS)
        try:
            return decode(msg.data, reply_type)
        except msgspec.MsgspecError as exc:
            raise MachineUnreachable(f"{node_id} answered {verb} with {exc}") from exc

    async def launch(self, node_id: str, request: LaunchRequest) -> LaunchReply:
        return await self._ask(node_id, "launch", request, LaunchReply)

    async def turn(self, node_id: str, request: TurnRequest) -> TurnReply:
        return await self._ask(node_id, "turn", request, TurnReply)

    async def stop(self, node_id: str, session_id: str, reason: str) -> RunnerStopReply | None:
        try:
            return await self._ask(
                node_id, "stop", RunnerStopRequest(session_id=session_id, reason=reason),
                RunnerStopReply,
            )
        except MachineUnreachable:
            log.warning("stop_not_delivered", session_id=session_id, node_id=node_id)
            return None


@dataclass
class FakeMachines(Machines):
    """For unit tests: machines that answer as told and remember what they were asked."""

    online: set[str] = field(default_factory=set)
    answer_launch: Callable[[str, LaunchRequest], LaunchReply] = (
        lambda node, request: LaunchReply(accepted=True, resumed_conversation=False,
                                          seeded=request.seed is not None)
    )
    launches: list[tuple[str, LaunchRequest]] = field(default_factory=list)
    turns: list[tuple[str, TurnRequest]] = field(default_factory=list)
    stops: list[tuple[str, str, str]] = field(default_factory=list)
    hosting: dict[str, set[str]] = field(default_factory=dict)
    # What each machine says it saved when it stops a conversation there.
    saves: dict[str, SavedTree] = field(default_factory=dict)

    async def launch(self, node_id: str, request: LaunchRequest) -> LaunchReply:
        check_send(channels.RUNNER_LAUNCH.subject(node=node_id))
        if node_id not in self.online:
            raise MachineUnreachable(node_id)
        self.launches.append((node_id, request))
        reply = self.answer_launch(node_id, request)
        if reply.accepted:
            self.hosting.setdefault(node_id, set()).add(request.session_id)
        return reply

    async def turn(self, node_id: str, request: TurnRequest) -> TurnReply:
        check_send(channels.RUNNER_TURN.subject(node=node_id))
        if node_id not in self.online:
            raise MachineUnreachable(node_id)
        self.turns.append((node_id, request))
        return TurnReply(accepted=request.session_id in self.hosting.get(node_id, set()))

    async def stop(self, node_id: str, session_id: str, reason: str) -> RunnerStopReply | None:
        check_send(channels.RUNNER_STOP.subject(node=node_id))
        self.stops.append((node_id, session_id, reason))
        if node_id not in self.online:
            return None
        hosted = self.hosting.get(node_id, set())
        was = session_id in hosted
        hosted.discard(session_id)
        return RunnerStopReply(stopped=was, worktree=self.saves.get(node_id) if was else None)
