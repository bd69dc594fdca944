"""A service's NATS connection survives what nats.py alone does not."""

import asyncio

import pytest

from seedline_platform import natsio

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
