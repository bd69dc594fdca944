"""A service's NATS connection survives what nats.py alone does not."""

import asyncio
from dataclasses import dataclass

import msgspec
import pytest

from seedline_contracts.channels import Api
from seedline_platform import natsio
from seedline_platform.app_base import ServiceApp
from seedline_platform.routing import Kind, Route
from seedline_platform.settings import Settings

pytestmark = pytest.mark.servers


async def test_a_flush_cancelled_before_its_pong_leaves_the_connection_reading(nats_server):
    nc = await natsio.connect([nats_server.url], "test")
    try:
        abandoned = asyncio.create_task(nc.flush())
        await asyncio.sleep(0)  # its PING is written; the PONG is on its way
        abandoned.cancel()
        await asyncio.sleep(0.1)  # the PONG arrives for a waiter nobody has

        async def echo(msg):
            await msg.respond(b"pong")

        sub = await nc.subscribe("test.echo", cb=echo)
        assert (await nc.request("test.echo", b"ping", timeout=2)).data == b"pong"
        await nc.flush(timeout=2)
        await sub.unsubscribe()
    finally:
        await nc.close()


def _settings(nats_server, home) -> Settings:
    return Settings.from_env({"SEEDLINE_NATS_URL": nats_server.url,
                              "SEEDLINE_NATS_MONITOR_URL": nats_server.monitor_url,
                              "SEEDLINE_HOME": str(home), "SEEDLINE_HTTP_PORT": "0"})


class Ping(msgspec.Struct):
    pass


class Pong(msgspec.Struct):
    text: str = "pong"


ECHO = Api("echo", "test.echo", (Ping,), "answers pong", reply=Pong, title="echo")


class Echoes:
    async def echo(self, request: Ping) -> Pong:
        return Pong()


@dataclass
class EchoParts:
    echoes: Echoes


class Echo(ServiceApp):
    name = "echo"
    uses_database = False
    route_table = staticmethod(lambda settings: (Route.request(ECHO, Echoes.echo),))

    async def build(self) -> EchoParts:
        return EchoParts(Echoes())


async def test_a_service_answers_once_started_and_survives_a_cancelled_flush(
        nats_server, tmp_path):
    """The services connect through FastStream, not natsio.connect: the same guard holds."""
    client = await natsio.connect([nats_server.url], "client")
    app = Echo(_settings(nats_server, tmp_path))
    await app.start()
    try:
        # Started means answered: the server holds the subscription already.
        assert (await client.request("test.echo", b"{}", timeout=2)).data == b'{"text":"pong"}'
        abandoned = asyncio.create_task(app.nc.flush())
        await asyncio.sleep(0)
        abandoned.cancel()
        await asyncio.sleep(0.1)
        assert (await client.request("test.echo", b"{}", timeout=2)).data == b'{"text":"pong"}'
    finally:
        await app.stop()
        await client.close()


class Word(msgspec.Struct):
    text: str


class Listener:
    def __init__(self) -> None:
        self.heard: list[str] = []
        self.released = asyncio.Event()

    async def hear(self, word: Word, msg) -> None:
        """`wait` is handled once `go` has been: one at a time, it would wait for ever."""
        if word.text == "wait":
            await self.released.wait()
        else:
            self.released.set()
        self.heard.append(word.text)


@dataclass
class ListenerParts:
    listener: Listener


def _listening(workers: int) -> type[ServiceApp]:
    class Listening(ServiceApp):
        name = "listening"
        uses_database = False
        route_table = staticmethod(lambda settings: (Route(
            Kind.MESSAGE, "test.words", Listener.hear, "words", message=Word,
            workers=workers),))

        async def build(self) -> ListenerParts:
            return ListenerParts(Listener())

    return Listening


@pytest.mark.parametrize("workers", [1, 4])
async def test_a_message_route_with_workers_handles_the_next_while_one_waits(
        nats_server, tmp_path, workers):
    client = await natsio.connect([nats_server.url], "client")
    app = _listening(workers)(_settings(nats_server, tmp_path))
    await app.start()
    try:
        listener = app.handlers[Listener.hear].__self__
        for text in ("wait", "go"):
            await client.publish("test.words", msgspec.json.encode(Word(text)))
        await client.flush()
        handled = await _until(lambda: len(listener.heard) == 2, 2 if workers == 1 else 10)
        if workers == 1:  # in arrival order: `go` waits behind `wait`, which waits for it
            assert not handled and listener.heard == []
        else:
            assert handled and listener.heard == ["go", "wait"]
    finally:
        listener.released.set()
        await app.stop()
        await client.close()


async def _until(condition, seconds: float) -> bool:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + seconds
    while not condition() and loop.time() < deadline:
        await asyncio.sleep(0.05)
    return condition()
