"""A service's FastStream edge hands each handler its message as it came: no dependency
injection runs per message (a sixth of the seed-composer's CPU in a storm of wakes)."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

import fast_depends.core.model
import msgspec
import pytest

from seedline_contracts.channels import Api
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

    async def answer(self, request: Ask) -> Answer:
        return Answer(request.text.upper())

    async def hear(self, word: Ask, msg) -> None:
        self.heard.append((word.text, msg.subject))


@dataclass
class DeskParts:
    desk: Desk


class Edge(ServiceApp):
    name = "edge"
    uses_database = False
    route_table = staticmethod(lambda settings: (
        Route.request(ASK, Desk.answer),
        Route(Kind.MESSAGE, "test.edge.words", Desk.hear, "words", message=Ask),
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


async def test_requests_and_messages_reach_their_handlers_with_no_injection(
        nats_server, tmp_path, injections):
    settings = Settings.from_env({"SEEDLINE_NATS_URL": nats_server.url,
                                  "SEEDLINE_NATS_MONITOR_URL": nats_server.monitor_url,
                                  "SEEDLINE_HOME": str(tmp_path), "SEEDLINE_HTTP_PORT": "0"})
    client = await natsio.connect([nats_server.url], "client")
    app = Edge(settings)
    await app.start()
    try:
        reply = await client.request("test.edge.ask", b'{"text":"hello"}', timeout=2)
        assert msgspec.json.decode(reply.data) == {"text": "HELLO"}
        # Malformed input is still the contract's error, from the edge's own decoding.
        refused = msgspec.json.decode(
            (await client.request("test.edge.ask", b"[" * 3000, timeout=2)).data)
        assert refused["error"]["code"] == "invalid_request"
        await client.publish("test.edge.words", b'{"text":"word"}')
        await client.flush()
        desk = app.handlers[Desk.hear].__self__
        for _ in range(100):
            if desk.heard:
                break
            await asyncio.sleep(0.02)
        assert desk.heard == [("word", "test.edge.words")]
        assert injections == []
    finally:
        await app.stop()
        await client.close()
