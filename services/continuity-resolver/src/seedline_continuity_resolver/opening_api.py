"""seedline.api.sessions.open and .relocate at the edge: the body decoded into the contract's
type and checked, or refused with `invalid_request` / `not_json`; the work is the Opener's."""

from __future__ import annotations

import msgspec
from nats.aio.msg import Msg

from seedline_contracts.codec import decode
from seedline_contracts.sessions import OpenAnswerRequest, OpenRequest, RelocateRequest
from seedline_contracts.timeline import MAX_ENTRY_ID_CHARS
from seedline_contracts.tokens import name_problem
from seedline_core.notices import error_message

from .answers import refused
from .opening import Opener, validate_open


def _invalid(field: str) -> bytes:
    return refused("invalid_request", error_message("invalid_request", field=field))


def answer_request(data: bytes) -> OpenAnswerRequest | None:
    """A body naming only an instance and a request_id (`seedline open --request-id`, 1.2)."""
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

    async def open(self, msg: Msg) -> bytes:
        try:
            request = decode(msg.data, OpenRequest)
        except msgspec.ValidationError as exc:
            again = answer_request(msg.data)
            if again is not None:
                return await self._opener.answer_again(again)
            return refused("invalid_request", f"The open request is not valid: {exc}.")
        except msgspec.DecodeError:
            return refused("not_json", error_message("not_json"))
        bad = validate_open(request)
        if bad:
            return _invalid(bad)
        return await self._opener.open(request)

    async def relocate(self, msg: Msg) -> bytes:
        try:
            request = decode(msg.data, RelocateRequest)
        except (msgspec.ValidationError, msgspec.DecodeError) as exc:
            return refused("invalid_request", f"The relocation request is not valid: {exc}.")
        for name in ("session_id", "node_id"):
            if name_problem(getattr(request, name)):
                return _invalid(name)
        return await self._opener.relocate(request)
