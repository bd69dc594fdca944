"""HTTP bodies that are not already contract messages, and the OpenAPI pieces that
describe every body with the msgspec types themselves."""

from __future__ import annotations

from typing import Any

import msgspec

from seedline_contracts.codec import decode
from seedline_contracts.errors import ErrorReply
from seedline_contracts.sessions import (
    BriefGetReply,
    OpenReply,
    SessionsListReply,
    StopReply,
)
from seedline_contracts.timeline import RejectedInput, TimelineReadReply

from .errors import WebError
from .publishing import AppendReceipt, BatchBody, EntryBody, PublishReply

REF = "#/components/schemas/{name}"


class OpenBody(msgspec.Struct):
    """Open a conversation on a repo of the token's instance (CONTRACT.md 3)."""

    repo: str
    engine: str
    node_id: str
    instruction: str | None = None
    force_fresh: bool = False
    clean_slate: bool = False
    request_id: str | None = None


class RelocateBody(msgspec.Struct):
    node_id: str
    request_id: str | None = None


class StopBody(msgspec.Struct):
    reason: str = "requested"


class MachineOut(msgspec.Struct):
    node_id: str
    label: str
    engines: list[str]
    live: list[str]
    serves_every_instance: bool


class MachinesReply(msgspec.Struct):
    machines: list[MachineOut]
    ok: bool = True


class RejectedOut(msgspec.Struct):
    rejected_seq: int
    record: RejectedInput


class RejectedReply(msgspec.Struct):
    rejected: list[RejectedOut]
    ok: bool = True


class NoticeOut(msgspec.Struct):
    """A stored notice: its id (the SEEDLINE_NOTICES sequence) and the notice as sent."""

    id: int
    notice: dict[str, Any]


class NoticesReply(msgspec.Struct):
    """An instance's stored notices, oldest first (CONTRACT.md 1, 1.2)."""

    notices: list[NoticeOut]
    has_more: bool
    ok: bool = True


class Health(msgspec.Struct):
    ok: bool
    checks: dict[str, str]


DOCUMENTED = (
    EntryBody, BatchBody, PublishReply, AppendReceipt, OpenBody, RelocateBody, StopBody,
    OpenReply, StopReply, SessionsListReply, BriefGetReply, TimelineReadReply, MachinesReply,
    RejectedReply, NoticesReply, Health, ErrorReply,
)


def components() -> dict[str, Any]:
    _, schemas = msgspec.json.schema_components(DOCUMENTED, ref_template=REF)
    return schemas


def ref(kind: type) -> dict[str, str]:
    return {"$ref": REF.format(name=kind.__name__)}


def request_body(kind: type) -> dict[str, Any]:
    return {"requestBody": {"required": True,
                            "content": {"application/json": {"schema": ref(kind)}}}}


def replies(kind: type | None, status: int = 200, *errors: int) -> dict[int | str, Any]:
    out: dict[int | str, Any] = {}
    if kind is not None:
        out[status] = {"description": kind.__doc__.strip().splitlines()[0] if kind.__doc__
                       else kind.__name__,
                       "content": {"application/json": {"schema": ref(kind)}}}
    for code in (400, 401, 403, *errors):
        out[code] = {"description": "An error: `{ok: false, error: {code, message}}`",
                     "content": {"application/json": {"schema": ref(ErrorReply)}}}
    return out


def parse(data: bytes, kind: type[Any]) -> Any:
    """A request body as a msgspec type, or the contract's error naming what is wrong."""
    if not data.strip():
        raise WebError("invalid_request", "The request needs a JSON body; send one and try again.")
    try:
        return decode(data, kind)
    except msgspec.ValidationError as exc:
        raise WebError("invalid_request",
                       f"The request body is not valid: {exc}; correct it and send it again."
                       ) from None
    except msgspec.DecodeError:
        raise WebError("not_json", "The request body is not valid JSON; send a UTF-8 JSON "
                       "object instead.") from None
