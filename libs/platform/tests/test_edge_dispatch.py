"""A service's FastStream edge hands each handler its message as it came: no dependency
injection runs per message (a sixth of the seed-composer's CPU in a storm of wakes), and an
event route's pull subscription takes a queued message with no task of nats.py's."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

import fast_depends.core.model
import msgspec
import pytest

from seedline_contracts import subjects
from seedline_contracts.channels import Api
from seedline_contracts.codec import encode
from seedline_contracts.events import Stopped
from seedline_devtools.testing_load import wait_until
from seedline_platform import natsio
from seedline_platform.app_base import ServiceApp
from seedline_platform.routing import Kind, Route
from seedline_platform.settings import Settings

pytestmark = pytest.mark.servers


class Ask(msgspec.Struct):
    text: str


class Answer(msgspec.Struct):
    text: str


ASK = Api("ask", "test.edge.ask", (Ask,), "answers the text back", reply=Answer, title="ask")


class Desk:
    def __init__(self) -> None:
        self.heard: list[tuple[str, str]] = []
        self.stopped: list[str] = []

    async def answer(self, request: Ask) -> Answer:
        return Answer(request.text.upper())

    async def hear(self, word: Ask, msg) -> None:
        self.heard.append((word.text, msg.subject))

    async def on_stopped(self, event: Stopped, msg) -> None:
        self.stopped.append(event.session_id)


@dataclass
class DeskParts:
    desk: Desk


class Edge(ServiceApp):
    name = "edge"
    uses_database = False
    route_table = staticmethod(lambda settings: (
        Route.request(ASK, Desk.answer),
        Route(Kind.MESSAGE, "test.edge.words", Desk.hear, "words", message=Ask),
        Route.event(Stopped, Desk.on_stopped, durable="edge-stopped", description="stops"),
        Route(Kind.BROADCAST, "test.edge.heard", Desk.hear, "heard by every copy", message=Ask),
    ))

    async def build(self) -> DeskParts:
        return DeskParts(Desk())


@pytest.fixture
def injections(monkeypatch):
    """Every handler call fast_depends resolves."""
    calls = []
    upstream = fast_depends.core.model.CallModel.asolve

    async def counting(self, *args, **kwargs):
        calls.append(self.call_name)
        return await upstream(self, *args, **kwargs)

    monkeypatch.setattr(fast_depends.core.model.CallModel, "asolve", counting)
    return calls


async def _now(value):
    """`value`, as the awaitable wait_until's probe gives."""
    return value


@pytest.fixture
async def edge(nats_server, tmp_path):
    """The Edge service started, and a client connection beside it."""
    settings = Settings.from_env({"SEEDLINE_NATS_URL": nats_server.url,
                                  "SEEDLINE_NATS_MONITOR_URL": nats_server.monitor_url,
                                  "SEEDLINE_HOME": str(tmp_path), "SEEDLINE_HTTP_PORT": "0"})
    client = await natsio.connect([nats_server.url], "client")
    app = Edge(settings)
    await app.start()
    try:
        yield app, client
    finally:
        await app.stop()
        await client.close()


async def test_requests_messages_and_events_reach_their_handlers_with_no_injection(
        edge, injections):
    app, client = edge
    reply = await client.request("test.edge.ask", b'{"text":"hello"}', timeout=2)
    assert msgspec.json.decode(reply.data) == {"text": "HELLO"}
    # Malformed input is still the contract's error, from the edge's own decoding.
    refused = msgspec.json.decode(
        (await client.request("test.edge.ask", b"[" * 3000, timeout=2)).data)
    assert refused["error"]["code"] == "invalid_request"
    await client.publish("test.edge.words", b'{"text":"word"}')
    await client.flush()
    desk = app.handlers[Desk.hear].__self__
    await wait_until(lambda: _now(desk.heard), 2, "the message reaching its handler")
    assert desk.heard == [("word", "test.edge.words")]
    for n in range(3):
        await client.jetstream().publish(
            subjects.session_event_subject(f"s{n}", "stopped"),
            encode(Stopped(session_id=f"s{n}", at="2026-12-06T10:00:00Z", reason="idle")))
    await wait_until(lambda: _now(len(desk.stopped) == 3), 2, "the events reaching their handler")
    assert sorted(desk.stopped) == ["s0", "s1", "s2"]
    assert injections == []
    (pull,) = [s.subscription for s in app.broker.subscribers
               if s.subscription.__class__.__name__ == "PullSubscription"]
    assert "fetch_queued_without_a_task" in pull._sub.next_msg.__qualname__


async def test_a_message_heard_is_never_answered(edge):
    """A message or broadcast route answers nothing: an event heard on a stream's subject
    carries its publisher's reply subject, where the stream's acknowledgement is awaited."""
    app, client = edge
    answers = await client.subscribe(client.new_inbox())
    for subject in ("test.edge.words", "test.edge.heard"):
        await client.publish(subject, b'{"text":"word"}', reply=answers.subject)
    await client.flush()
    desk = app.handlers[Desk.hear].__self__
    await wait_until(lambda: _now(len(desk.heard) == 2), 2, "both messages reaching their handler")
    assert sorted(desk.heard) == [("word", "test.edge.heard"), ("word", "test.edge.words")]
    await asyncio.sleep(0.3)
    assert answers.pending_msgs == 0
