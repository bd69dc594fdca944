"""The HTTP API: every request/reply API of the contract, publishing, machines and
notifications, for the instance of the caller's bearer token. Thin handlers: parse,
ask the Tenant, encode."""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Any

import msgspec
from fastapi import APIRouter, Query, Request
from fastapi.responses import Response, StreamingResponse

from seedline_contracts.codec import encode
from seedline_contracts.sessions import (
    BriefGetReply,
    OpenReply,
    OpenRequest,
    SessionsListReply,
    StopReply,
)
from seedline_contracts.timeline import MAX_READ_LIMIT, TimelineReadReply
from seedline_contracts.times import parse_rfc3339

from . import fields, publishing, wire
from .auth import bearer
from .errors import WebError
from .notifications import notification_stream
from .publishing import AppendReceipt, BatchBody, EntryBody, PublishReply
from .tokens import digest
from .wire import (
    MachineOut,
    MachinesReply,
    NoticeOut,
    NoticesReply,
    OpenBody,
    RejectedOut,
    RejectedReply,
    RelocateBody,
    StopBody,
    parse,
    replies,
    request_body,
)

router = APIRouter(prefix="/v1")
INSTANCE = "/instances/{instance_id}"
CONVERSATION = "/conversations/{session_id}"


def json_response(value: Any, status: int = 200) -> Response:
    return Response(encode(value), status_code=status, media_type="application/json")


def _web(request: Request):
    return request.app.state.web


async def _tenant(request: Request, instance_id: str | None = None):
    return await _web(request).gate.tenant(request, instance_id)


# -- timeline ----------------------------------------------------------------------------


@router.post(INSTANCE + "/entries", status_code=202, response_class=Response,
             openapi_extra=request_body(EntryBody), responses=replies(PublishReply, 202, 408, 409, 413, 507),
             summary="Publish one entry for ingest (seedline.ingest.timeline)")
async def publish_one(instance_id: str, request: Request) -> Response:
    tenant = await _tenant(request, instance_id)
    entry = publishing.to_entry(parse(await request.body(), EntryBody), tenant.instance_id)
    return await _publish(tenant, [entry])


@router.post(INSTANCE + "/entries/batch", status_code=202, response_class=Response,
             openapi_extra=request_body(BatchBody), responses=replies(PublishReply, 202, 408, 409, 413, 507),
             summary="Publish up to 1,000 entries for ingest, in order")
async def publish_batch(instance_id: str, request: Request) -> Response:
    tenant = await _tenant(request, instance_id)
    batch = parse(await request.body(), BatchBody)
    entries = [publishing.to_entry(body, tenant.instance_id, i)
               for i, body in enumerate(batch.entries)]
    return await _publish(tenant, entries)


async def _publish(tenant, entries) -> Response:
    publishing.check_payload(entries, tenant.backend.max_payload)
    acks = await tenant.publish(entries)
    return json_response(PublishReply(publishing.receipts(entries, acks)), 202)


@router.post(INSTANCE + "/timeline/append", response_class=Response,
             openapi_extra=request_body(EntryBody),
             responses=replies(AppendReceipt, 200, 408, 409, 413, 504, 507),
             summary="Append one entry and wait for its seq (seedline.api.timeline.append)")
async def append(instance_id: str, request: Request) -> Response:
    tenant = await _tenant(request, instance_id)
    entry = publishing.to_entry(parse(await request.body(), EntryBody), tenant.instance_id)
    publishing.check_payload([entry], tenant.backend.max_payload)
    reply = await tenant.append(entry)
    chars, cut_to, message = publishing.cut_note(entry.content)
    if reply.duplicate:
        message = "Already in the timeline: the first entry with this entry_id stands."
    return json_response(AppendReceipt(reply.seq, reply.duplicate, chars, cut_to, message))


@router.get(INSTANCE + "/timeline", response_class=Response,
            responses=replies(TimelineReadReply, 200, 409, 504),
            summary="Read a repo's timeline, newest `limit` entries (seedline.api.timeline.read)")
async def read_timeline(
    instance_id: str, request: Request,
    repo: str = Query(..., description="The repo, e.g. apps/chess-academy: no control "
                      "characters, at most 255 bytes once escaped as a subject token",
                      min_length=1, max_length=fields.MAX_NAME_CHARS, pattern=fields.NO_CONTROL),
    session_id: str | None = Query(None, description="Only this conversation",
                                   min_length=1, max_length=fields.MAX_NAME_CHARS,
                                   pattern=fields.NO_CONTROL),
    before_seq: int | None = Query(None, ge=1, le=fields.MAX_SEQ,
                                   description="Only entries with a lower seq"),
    limit: int = Query(100, ge=1, le=MAX_READ_LIMIT, description="How many of the newest "
                       "entries, oldest first"),
    min_seq: int | None = Query(None, ge=1, le=fields.MAX_SEQ,
                                description="Wait up to 5 s until this seq is read"),
) -> Response:
    tenant = await _tenant(request, instance_id)
    return json_response(await tenant.read(repo, session_id, before_seq, limit, min_seq))


# -- conversations -----------------------------------------------------------------------


@router.post(INSTANCE + "/conversations", response_class=Response,
             openapi_extra=request_body(OpenBody),
             responses=replies(OpenReply, 200, 408, 409, 413, 504, 507),
             summary="Open a conversation on a repo (seedline.api.sessions.open)")
async def open_conversation(instance_id: str, request: Request) -> Response:
    tenant = await _tenant(request, instance_id)
    body: OpenBody = parse(await request.body(), OpenBody)
    reply = await tenant.open(OpenRequest(instance_id=tenant.instance_id,
                                          **msgspec.structs.asdict(body)))
    return json_response(reply)


@router.get(INSTANCE + "/conversations", response_class=Response,
            responses=replies(SessionsListReply, 200, 504),
            summary="Live conversations of the instance (seedline.api.sessions.list)")
async def list_conversations(instance_id: str, request: Request) -> Response:
    tenant = await _tenant(request, instance_id)
    return json_response(SessionsListReply(conversations=await tenant.live()))


@router.post(CONVERSATION + "/relocate", response_class=Response,
             openapi_extra=request_body(RelocateBody),
             responses=replies(OpenReply, 200, 404, 408, 409, 413, 504, 507),
             summary="Move a conversation to another machine (seedline.api.sessions.relocate)")
async def relocate(session_id: str, request: Request) -> Response:
    tenant = await _tenant(request)
    body: RelocateBody = parse(await request.body(), RelocateBody)
    return json_response(await tenant.relocate(session_id, body.node_id))


@router.post(CONVERSATION + "/stop", response_class=Response,
             openapi_extra={"requestBody": {"required": False, "content": {
                 "application/json": {"schema": wire.ref(StopBody)}}}},
             responses=replies(StopReply, 200, 404, 408, 413, 504),
             summary="Stop a conversation (seedline.api.sessions.stop)")
async def stop(session_id: str, request: Request) -> Response:
    tenant = await _tenant(request)
    data = await request.body()
    body = parse(data, StopBody) if data.strip() else StopBody()
    return json_response(await tenant.stop(session_id, body.reason))


@router.get(CONVERSATION + "/brief", response_class=Response,
            responses=replies(BriefGetReply, 200, 404, 504),
            summary="The latest brief offered to a conversation, byte for byte "
                    "(seedline.api.briefs.get)")
async def brief(session_id: str, request: Request) -> Response:
    tenant = await _tenant(request)
    return json_response(await tenant.brief(session_id))


# -- machines, notifications, rejected -----------------------------------------------------


@router.get(INSTANCE + "/machines", response_class=Response,
            responses=replies(MachinesReply, 200, 503),
            summary="Machines online that serve the instance, and what they host for it")
async def machines(instance_id: str, request: Request) -> Response:
    tenant = await _tenant(request, instance_id)
    found = [MachineOut(m.node_id, m.label, m.engines, m.live, m.serves_every_instance)
             for m in await tenant.machines()]
    return json_response(MachinesReply(found))


@router.get(INSTANCE + "/notifications", response_class=StreamingResponse,
            responses={200: {"description": "Server-Sent Events: one `event: <kind>` with the "
                             "notification's JSON as `data` and its id (the SEEDLINE_NOTICES "
                             "sequence) as `id:` for each notice to the instance (stopped_idle, "
                             "runner_offline, runner_restarted, not_woken, ...). Send "
                             "`Last-Event-ID` to get every notice after that one first.",
                             "content": {"text/event-stream": {"schema": {"type": "string"}}}},
                       **{k: v for k, v in replies(None, 200).items()}},
            summary="Stream the instance's notifications (seedline.notify.<instance>)")
async def notifications(instance_id: str, request: Request) -> StreamingResponse:
    tenant = await _tenant(request, instance_id)
    gate, token = _web(request).gate, bearer(request)
    stream = await notification_stream(
        _web(request), tenant, request, digest(token or ""),
        lambda: gate.still_allowed(token or "", tenant.instance_id))
    return StreamingResponse(stream, media_type="text/event-stream",
                             headers={"Cache-Control": "no-store", "X-Accel-Buffering": "no"})


@router.get(INSTANCE + "/notices", response_class=Response,
            responses=replies(NoticesReply, 200, 503),
            summary="The instance's stored notices, oldest first (SEEDLINE_NOTICES)")
async def past_notices(
    instance_id: str, request: Request,
    after_id: int | None = Query(None, ge=0, le=fields.MAX_SEQ, description="Only notices "
                                 "after this id (the "
                                 "`id` of a notice, or an SSE event's `id:`)"),
    since: str | None = Query(None, description="Only notices kept at or after this RFC 3339 "
                              "time, e.g. 2026-12-01T10:00:00Z (ignored with after_id)",
                              pattern=fields.RFC3339),
    limit: int = Query(100, ge=1, le=1000, description="At most this many, oldest first"),
) -> Response:
    tenant = await _tenant(request, instance_id)
    since_at = _since(since)
    if after_id is None and since_at is AFTER_EVERYTHING:
        return json_response(NoticesReply([], False))
    found, more = await tenant.notices(after_id, since_at, limit)
    return json_response(NoticesReply([NoticeOut(n.seq, n.notice) for n in found], more))


AFTER_EVERYTHING = datetime.max.replace(tzinfo=timezone.utc)


def _since(text: str | None):
    if text is None:
        return None
    try:
        return parse_rfc3339(text)
    except OverflowError:  # after the year 9999 once in UTC: nothing is kept that late
        return AFTER_EVERYTHING
    except ValueError:
        raise WebError("invalid_request", f"since {text[:40]!r} is not an RFC 3339 time; send "
                       "one like 2026-12-01T10:00:00Z.") from None


@router.get(INSTANCE + "/rejected", response_class=Response,
            responses=replies(RejectedReply, 200, 503),
            summary="Entries of the instance the timeline-writer refused, with the reason")
async def rejected(instance_id: str, request: Request,
                   limit: int = Query(50, ge=1, le=500, description="At most this many, the "
                                      "newest")) -> Response:
    tenant = await _tenant(request, instance_id)
    found = await tenant.rejected(limit)
    return json_response(RejectedReply([RejectedOut(seq, r) for seq, r in found]))
