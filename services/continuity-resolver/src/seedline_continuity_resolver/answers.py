"""The answer an open or a relocation gets: what the machine confirmed, the recorded reply of
an open asked again, or a `timeout` that names the request_id that will get it."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable

import msgspec

from seedline_contracts.errors import ErrorReply, error_reply
from seedline_contracts.sessions import OpenRequest
from seedline_core.notices import error_message

from .pending import PendingOpens
from .repository import ConversationRepository


# A reply as the machine confirmed it, recorded byte for byte (an `opened`'s reply, or an
# `open_failed`'s error), or a refusal made here.
Answer = msgspec.Raw | ErrorReply


def refused(code: str, message: str) -> ErrorReply:
    """An error reply, as the request's answer (CONTRACT.md Conventions)."""
    return error_reply(code, message)


def timeout_reply(request_id: str | None = None) -> ErrorReply:
    return refused("timeout", error_message("timeout", request_id=request_id))


class Answers:
    def __init__(self, repo: ConversationRepository, pending: PendingOpens,
                 open_timeout: float) -> None:
        self._repo = repo
        self._pending = pending
        self._open_timeout = open_timeout

    async def after(self, session_id: str, record: Awaitable[None],
                    request: OpenRequest | None = None) -> Answer:
        """The reply once `record` has recorded the decision and the machine confirmed it."""
        future = self._pending.expect(session_id)
        try:
            await record
            try:
                return msgspec.Raw(await asyncio.wait_for(future, self._open_timeout))
            except TimeoutError:
                stored = await self._repo.reply_for_request(session_id)
                return msgspec.Raw(stored) if stored else await self._still_going(
                    session_id, request)
        finally:
            self._pending.forget(session_id)

    async def first(self, session_id: str, request_id: str | None = None) -> Answer:
        """The first request's reply, waiting while it is still in flight."""
        future = self._pending.expect(session_id)
        try:
            loop = asyncio.get_running_loop()
            deadline = loop.time() + self._open_timeout
            while loop.time() < deadline:
                stored = await self._repo.reply_for_request(session_id)
                if stored:
                    return msgspec.Raw(stored)
                try:
                    return msgspec.Raw(await asyncio.wait_for(asyncio.shield(future), 0.2))
                except TimeoutError:
                    continue
            return timeout_reply(request_id)
        finally:
            self._pending.forget(session_id)

    async def _still_going(self, session_id: str, request: OpenRequest | None) -> ErrorReply:
        """The `timeout` of an open that goes on: it names the request_id that gets its
        answer. An open sent without one is given its conversation's id as its request_id."""
        if request is None:
            return timeout_reply()
        request_id = request.request_id
        if request_id is None:
            request_id = session_id
            await self._repo.claim_request(request.instance_id, request_id, session_id)
        return timeout_reply(request_id)
