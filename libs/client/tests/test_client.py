"""The typed client against a real nats-server and a scripted responder: the reply in the
contract's type, and each way a request fails as the one error that says so."""

from __future__ import annotations

import asyncio
import json

import nats
import pytest

from seedline_client import (
    ConnectionLost,
    NoAnswer,
    NotRunning,
    Refused,
    SeedlineClient,
    TooLarge,
    UnreadableReply,
)
from seedline_contracts import subjects
from seedline_contracts.sessions import (
    OpenAnswerRequest,
    SessionsListReply,
    SessionsListRequest,
    StopRequest,
)
from seedline_contracts.timeline import TimelineReadRequest

LIVE = {"ok": True, "conversations": [{
    "session_id": "csess_1", "instance_id": "bd43f4de", "repo": "apps/x", "node_id": "mac",
    "engine": "claude", "opened_at": "2026-12-01T10:00:00Z",
    "last_activity_at": "2026-12-01T10:01:00Z", "outcome": "resumed"}]}


@pytest.fixture
async def nc(nats_server):
    connection = await nats.connect(nats_server.url)
    yield connection
    if not connection.is_closed:
        await connection.close()


async def answering(nc, subject: str, reply: bytes | None, seen: list[dict] | None = None):
    """A responder on `subject` that keeps each request's body and sends `reply` (or none)."""

    async def handler(msg):
        if seen is not None:
            seen.append(json.loads(msg.data))
        if reply is not None:
            await msg.respond(reply)

    return await nc.subscribe(subject, cb=handler)


async def test_the_reply_comes_in_the_contracts_type_and_the_request_goes_as_its_json(nc):
    seen: list[dict] = []
    await answering(nc, subjects.API_SESSIONS_LIST, json.dumps(LIVE).encode(), seen)
    reply = await SeedlineClient(nc).live(SessionsListRequest("bd43f4de"))
    assert isinstance(reply, SessionsListReply)
    assert [(c.session_id, c.outcome) for c in reply.conversations] == [("csess_1", "resumed")]
    assert seen == [{"instance_id": "bd43f4de"}]


async def test_an_open_asked_again_sends_only_the_instance_and_its_request_id(nc):
    seen: list[dict] = []
    await answering(nc, subjects.API_SESSIONS_OPEN, b'{"ok": false}', seen)
    with pytest.raises(Refused):
        await SeedlineClient(nc).open(OpenAnswerRequest("bd43f4de", "req-1"), timeout=2)
    assert seen == [{"instance_id": "bd43f4de", "request_id": "req-1"}]


async def test_an_error_reply_is_refused_with_its_code_and_sentence(nc):
    body = {"ok": False, "error": {"code": "not_found", "message": "No such conversation."}}
    await answering(nc, subjects.API_SESSIONS_STOP, json.dumps(body).encode())
    with pytest.raises(Refused) as caught:
        await SeedlineClient(nc).stop(StopRequest("csess_nope"))
    assert (caught.value.code, caught.value.message) == ("not_found", "No such conversation.")
    assert caught.value.service == "runner-gateway"


@pytest.mark.parametrize("reply, why", [
    (b"<html>", "not JSON"),
    (b"[1, 2]", "not a JSON object"),
    (b'{"ok": true, "conversations": "none"}', "Expected `array`"),
])
async def test_a_reply_that_is_not_the_contracts_is_unreadable(nc, reply, why):
    await answering(nc, subjects.API_SESSIONS_LIST, reply)
    with pytest.raises(UnreadableReply) as caught:
        await SeedlineClient(nc).live(SessionsListRequest())
    assert why in caught.value.why and caught.value.data == reply


async def test_nothing_subscribed_is_not_running_and_it_names_the_service(nc):
    with pytest.raises(NotRunning) as caught:
        await SeedlineClient(nc, not_running_retry=0.3).read(
            TimelineReadRequest("bd43f4de", "apps/x"))
    assert (caught.value.service, caught.value.subject) == (
        "timeline-writer", subjects.API_TIMELINE_READ)


async def test_a_responder_that_never_answers_is_no_answer_after_the_timeout(nc):
    await answering(nc, subjects.API_SESSIONS_LIST, None)
    with pytest.raises(NoAnswer) as caught:
        await SeedlineClient(nc, timeout=0.3).live(SessionsListRequest())
    assert caught.value.timeout == 0.3


async def test_a_request_over_the_servers_max_payload_is_not_sent(nc):
    seen: list[dict] = []
    await answering(nc, subjects.API_TIMELINE_READ, json.dumps(LIVE).encode(), seen)
    huge = TimelineReadRequest("bd43f4de", "x" * (nc.max_payload + 1))
    with pytest.raises(TooLarge) as caught:
        await SeedlineClient(nc).read(huge)
    assert caught.value.size > caught.value.limit == nc.max_payload
    await nc.flush()
    assert seen == []


async def test_a_closed_connection_is_connection_lost(nc):
    await nc.close()
    with pytest.raises(ConnectionLost):
        await asyncio.wait_for(SeedlineClient(nc).live(SessionsListRequest()), 5)


async def test_a_service_that_subscribes_again_within_the_retry_is_answered(nc):
    """What a restart looks like on the wire: nobody subscribed for a moment, then the
    service again. The client asks again by itself and gets the answer."""

    async def restarted() -> None:
        await asyncio.sleep(1.0)
        await answering(nc, subjects.API_SESSIONS_LIST, json.dumps(LIVE).encode())

    back = asyncio.create_task(restarted())
    reply = await SeedlineClient(nc, not_running_retry=10).live(SessionsListRequest())
    await back
    assert [c.session_id for c in reply.conversations] == ["csess_1"]
