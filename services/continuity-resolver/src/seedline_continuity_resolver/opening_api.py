"""seedline.api.sessions.open and .relocate, and the wake, at the edge: each request checked
beyond its type, or refused with `invalid_request`; the work is the Opener's."""

from __future__ import annotations

import msgspec
from nats.aio.msg import Msg

from seedline_contracts.codec import decode
from seedline_contracts.errors import ErrorReply, error_reply
from seedline_contracts.events import WakeRequested
from seedline_contracts.sessions import OpenAnswerRequest, OpenRequest, RelocateRequest
from seedline_contracts.timeline import MAX_ENTRY_ID_CHARS
from seedline_contracts.tokens import name_problem
from seedline_core.notices import error_message

from .answers import Answer
from .opening import Opener, validate_open


def _invalid(field: str) -> ErrorReply:
    return error_reply("invalid_request", error_message("invalid_request", field=field))


def read_open(data: bytes) -> OpenRequest | OpenAnswerRequest | ErrorReply:
    """An open request, or a body naming only an instance and a request_id (`seedline open
    --request-id`: the answer of an open asked again)."""
    try:
        return decode(data, OpenRequest)
    except msgspec.ValidationError as exc:
        again = _answer_request(data)
        return again if again is not None else error_reply(
            "invalid_request", f"The open request is not valid: {exc}.")
    except msgspec.DecodeError:
        return error_reply("not_json", error_message("not_json"))


def _answer_request(data: bytes) -> OpenAnswerRequest | None:
    try:
        again = decode(data, OpenAnswerRequest)  # the guarded decode: deep nesting is invalid
    except msgspec.MsgspecError:
        return None
    if name_problem(again.instance_id) or not 1 <= len(again.request_id) <= MAX_ENTRY_ID_CHARS:
        return None
    return again


class OpeningApi:
    def __init__(self, opener: Opener) -> None:
        self._opener = opener

    async def open(self, request: OpenRequest | OpenAnswerRequest) -> Answer:
        if isinstance(request, OpenAnswerRequest):
            return await self._opener.answer_again(request)
        bad = validate_open(request)
        if bad:
            return _invalid(bad)
        return await self._opener.open(request)

    async def relocate(self, request: RelocateRequest) -> Answer:
        for name in ("session_id", "node_id"):
            if name_problem(getattr(request, name)):
                return _invalid(name)
        return await self._opener.relocate(request)

    async def wake(self, event: WakeRequested, msg: Msg) -> None:
        """A person's message woke a conversation: opened with nobody waiting. Its place in
        SEEDLINE_SESSIONS says how far the decision needs the streams."""
        await self._opener.wake(event, msg.metadata.sequence.stream)
