"""HTTP bodies that are not already contract messages, and the OpenAPI pieces that
describe every body with the msgspec types themselves."""

from __future__ import annotations

import re
from typing import Annotated, Any

import msgspec
from msgspec import Meta

from seedline_contracts.codec import decode
from seedline_contracts.errors import ErrorReply
from seedline_contracts.sessions import (
    BriefGetReply,
    OpenReply,
    SessionsListReply,
    StopReply,
)
from seedline_contracts.timeline import RejectedInput, TimelineReadReply

from . import fields
from .errors import WebError
from .publishing import AppendReceipt, BatchBody, EntryBody, PublishReply

REF = "#/components/schemas/{name}"


class OpenBody(msgspec.Struct):
    """Open a conversation on a repo of the token's instance (CONTRACT.md 3)."""

    repo: fields.Repo
    engine: fields.Engine
    node_id: Annotated[fields.NodeId, Meta(description="The machine (node id) to run it on.")]
    instruction: fields.MaybeInstruction = None
    force_fresh: Annotated[bool, Meta(description=(
        "Start a fresh engine conversation and give it no brief: the engine starts with "
        "nothing of the earlier work (continuity reason force_fresh)."))] = False
    clean_slate: Annotated[bool, Meta(description=(
        "Give no brief on any branch, and read no timeline for one; the engine may still "
        "continue its own earlier conversation when the decision is resume."))] = False
    request_id: fields.MaybeRequestId = None


class RelocateBody(msgspec.Struct):
    """Move a conversation to another machine (CONTRACT.md 4)."""

    node_id: Annotated[fields.NodeId, Meta(description="The machine (node id) to move it to.")]
    request_id: fields.MaybeRequestId = None


class StopBody(msgspec.Struct):
    """Stop a conversation (CONTRACT.md 4)."""

    reason: fields.Reason = "requested"


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
    """An instance's stored notices, oldest first (CONTRACT.md 1)."""

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


ERROR_WORDS = {
    400: "The request is not valid; the message names what to correct",
    401: "No valid bearer token",
    403: "The address names another instance than the token's",
    404: "No such conversation on this instance",
    408: "The body did not arrive in time (SEEDLINE_WEB_BODY_TIMEOUT_SECONDS)",
    409: "The machine is offline or refused, the read is not yet visible, the conversation "
         "is not the one to move now (a newer one on its repo, or one still opening), or an "
         "entry's time lies outside 2000-01-01T00:00:00Z to a day after it arrives (which "
         "depends on when it arrives)",
    413: "The body is over a size limit, which the message names",
    503: "A part of Seedline is not answering now; try again in a moment",
    507: "The disk of Seedline's data is full: the message names it and how much room "
         "new work needs; nothing new is taken until there is room",
    504: "A part of Seedline did not answer in time; an open goes on (retry with its "
         "request_id)",
}


def replies(kind: type | None, status: int = 200, *errors: int, guarded: bool = True
            ) -> dict[int | str, Any]:
    """The route's responses: its reply, and each error it can answer. A guarded route
    (a bearer token) can also answer 400, 401, 403 and 503 (the token table or NATS away)."""
    out: dict[int | str, Any] = {}
    if kind is not None:
        out[status] = {"description": kind.__doc__.strip().splitlines()[0] if kind.__doc__
                       else kind.__name__,
                       "content": {"application/json": {"schema": ref(kind)}}}
    codes = (400, 401, 403, 503, *errors) if guarded else errors
    for code in sorted(set(codes)):
        out[code] = {"description": f"{ERROR_WORDS.get(code, 'An error')}: "
                                    "`{ok: false, error: {code, message}}`",
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
                       f"The request body is not valid: {_readable(str(exc))}; correct it and "
                       "send it again (the API's document at /openapi.json gives every field's "
                       "rules).") from None
    except msgspec.DecodeError:
        raise WebError("not_json", "The request body is not valid JSON; send a UTF-8 JSON "
                       "object instead.") from None


def _readable(problem: str) -> str:
    """msgspec's sentence made plainer: the JSON path without `$.`, and a pattern said in
    words (`entries[0].at must be an RFC 3339 time ...`) instead of as a regex."""
    problem = problem.replace("`$.", "`").replace(" - at `$`", "")
    match = re.fullmatch(r"Expected `str` matching regex '(.*)' - at `(.*)`", problem)
    if match is None:
        return problem
    pattern, where = match.groups()
    if "[Tt ]" in pattern:
        rule = "must be an RFC 3339 time such as 2026-12-01T10:00:00Z"
    elif "\\s" in pattern:
        rule = "must not contain whitespace or control characters"
    else:
        rule = "must not contain control characters"
    return f"{where} {rule}"
