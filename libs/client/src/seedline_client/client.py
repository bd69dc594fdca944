"""Request/reply on NATS in the contract's types, with one error for each way it fails."""

from __future__ import annotations

import asyncio
from typing import Any, TypeVar

import msgspec
from nats.aio.client import Client
from nats.errors import Error as NatsError
from nats.errors import NoRespondersError
from nats.errors import TimeoutError as NatsTimeout

from seedline_contracts import channels
from seedline_contracts.channels import Api
from seedline_contracts.codec import decode, encode
from seedline_contracts.instances import ForgetReply, ForgetRequest
from seedline_contracts.sessions import (
    BriefGetReply,
    BriefGetRequest,
    OpenAnswerRequest,
    OpenReply,
    OpenRequest,
    RelocateRequest,
    SessionsListReply,
    SessionsListRequest,
    StopReply,
    StopRequest,
)
from seedline_contracts.timeline import (
    AppendReply,
    TimelineEntryIn,
    TimelineReadReply,
    TimelineReadRequest,
)

from .directory import ANSWERED_BY
from .errors import ConnectionLost, NoAnswer, NotRunning, Refused, TooLarge, UnreadableReply

T = TypeVar("T")

DEFAULT_TIMEOUT = 10.0
_ENVELOPE = msgspec.json.Decoder()


# A service being restarted (by `seedline up`, compose, an orchestrator) has nobody
# subscribed for a few seconds. No responder means nobody received the request, so asking
# again is safe for every API; a client that asks again for this long before saying
# "not running" rides out a restart instead of telling a person to start what is starting.
NOT_RUNNING_RETRY_SECONDS = 4.0
RETRY_PAUSES = (0.1, 0.2, 0.4, 0.8)


class SeedlineClient:
    """The APIs over one NATS connection. `timeout` is for the APIs that answer at once; an
    open, a relocation and a stop wait for a machine, and their callers give the time.
    `not_running_retry` is how long a request with no responder is asked again."""

    def __init__(self, nc: Client, timeout: float = DEFAULT_TIMEOUT,
                 not_running_retry: float = NOT_RUNNING_RETRY_SECONDS) -> None:
        self.nc = nc
        self.timeout = timeout
        self.not_running_retry = not_running_retry

    async def call(self, api: Api, body: Any, timeout: float | None = None) -> Any:
        """Ask `api` (seedline_contracts.channels) and get its reply type."""
        return await self.request(api.address, body, api.reply, timeout)

    async def append(self, entry: TimelineEntryIn) -> AppendReply:
        return await self.call(channels.TIMELINE_APPEND, entry)

    async def read(self, request: TimelineReadRequest) -> TimelineReadReply:
        return await self.call(channels.TIMELINE_READ, request)

    async def open(self, request: OpenRequest | OpenAnswerRequest, timeout: float) -> OpenReply:
        return await self.call(channels.SESSIONS_OPEN, request, timeout)

    async def relocate(self, request: RelocateRequest, timeout: float) -> OpenReply:
        return await self.call(channels.SESSIONS_RELOCATE, request, timeout)

    async def stop(self, request: StopRequest, timeout: float | None = None) -> StopReply:
        return await self.call(channels.SESSIONS_STOP, request, timeout)

    async def live(self, request: SessionsListRequest) -> SessionsListReply:
        return await self.call(channels.SESSIONS_LIST, request)

    async def brief(self, request: BriefGetRequest) -> BriefGetReply:
        return await self.call(channels.BRIEFS_GET, request)

    async def forget(self, request: ForgetRequest, timeout: float | None = None) -> ForgetReply:
        return await self.call(channels.INSTANCES_FORGET, request, timeout)

    async def request(self, subject: str, body: Any, reply_type: type[T],
                      timeout: float | None = None) -> T:
        """The `ok` reply as `reply_type`; every failure is one of errors.py."""
        service = ANSWERED_BY.get(subject, "service")
        timeout = self.timeout if timeout is None else timeout
        payload = encode(body)
        limit = self.nc.max_payload
        if limit and len(payload) > limit:
            raise TooLarge(subject, service, len(payload), limit)
        loop = asyncio.get_running_loop()
        give_up = loop.time() + self.not_running_retry
        pauses = iter(RETRY_PAUSES)
        while True:
            try:
                msg = await self.nc.request(subject, payload, timeout=timeout)
                break
            except NoRespondersError:
                pause = next(pauses, RETRY_PAUSES[-1])
                if loop.time() + pause > give_up:
                    raise NotRunning(subject, service) from None
                await asyncio.sleep(pause)
            except NatsTimeout:
                raise NoAnswer(subject, service, timeout) from None
            except NatsError:  # closed, stale, draining, its buffer full: the connection is away
                raise ConnectionLost(subject, service) from None
        return _reply(subject, service, msg.data, reply_type)


def _reply(subject: str, service: str, data: bytes, reply_type: type[T]) -> T:
    try:
        envelope = _ENVELOPE.decode(data)
    except msgspec.DecodeError:
        raise UnreadableReply(subject, service, data, "not JSON") from None
    if not isinstance(envelope, dict):
        raise UnreadableReply(subject, service, data, "not a JSON object")
    if not envelope.get("ok"):
        error = envelope.get("error")
        error = error if isinstance(error, dict) else {}
        raise Refused(subject, service, str(error.get("code") or ""),
                      str(error.get("message") or ""))
    try:
        return decode(data, reply_type)
    except msgspec.MsgspecError as exc:
        raise UnreadableReply(subject, service, data, str(exc)) from None
