"""Each workaround of seedline_platform.nats_workarounds, held against nats.py as installed:
the xfail(strict) tests pass, and so fail the suite, once a nats.py release fixes what a
workaround is for. Then the workaround (and its test) can go."""

from __future__ import annotations

import asyncio

import nats
import pytest
from nats.js import JetStreamContext

from seedline_platform.nats_workarounds import (
    connection_of,
    on_reconnect,
    survive_abandoned_flushes,
)

pytestmark = pytest.mark.servers


async def _reads_after_an_abandoned_flush(url: str, *, workaround: bool) -> bool:
    nc = await nats.connect(url, allow_reconnect=False)
    if workaround:
        survive_abandoned_flushes(nc)
    try:
        await _abandon_a_flush(nc)
        await nc.flush(timeout=2)
        return bool((await nc.request("$JS.API.INFO", b"", timeout=2)).data)
    finally:
        await nc.close()


async def _abandon_a_flush(nc) -> None:
    """A flush whose waiter is cancelled before the server's PONG arrives."""
    flushing = asyncio.create_task(nc.flush(timeout=5))
    await asyncio.sleep(0)  # the PING is queued and its waiter registered
    flushing.cancel()
    await asyncio.gather(flushing, return_exceptions=True)


@pytest.mark.xfail(strict=True, reason="nats.py 2.16 fails its read loop on the PONG of an "
                   "abandoned flush (nats-io/nats.py#624): survive_abandoned_flushes is needed")
async def test_plain_nats_py_keeps_reading_after_an_abandoned_flush(nats_server):
    assert await _reads_after_an_abandoned_flush(nats_server.url, workaround=False)


async def test_with_the_workaround_a_connection_keeps_reading_after_an_abandoned_flush(
        nats_server):
    assert await _reads_after_an_abandoned_flush(nats_server.url, workaround=True)


def test_a_jetstream_context_still_has_no_public_accessor_for_its_connection():
    """When nats.py gives one, connection_of should use it instead of js._nc."""
    public = [name for name in dir(JetStreamContext)
              if not name.startswith("_") and name in ("nc", "connection", "client")]
    assert public == []
    assert connection_of(JetStreamContext(object())) is not None  # what it reads is there


def test_a_connection_still_takes_one_reconnect_callback_and_on_reconnect_adds_listeners():
    """When nats.py lets several parties hear of a reconnect, on_reconnect should use it."""
    from nats.aio.client import Client

    assert [name for name in dir(Client) if "reconnect" in name and "listener" in name] == []
    nc = Client()
    heard: list[str] = []

    async def made_with() -> None:
        heard.append("made with")

    nc._reconnected_cb = made_with  # noqa: SLF001 (as nats.connect sets it)
    forget_a = on_reconnect(nc, lambda: heard.append("a"))
    on_reconnect(nc, lambda: heard.append("b"))
    asyncio.run(nc._reconnected_cb())  # noqa: SLF001 (as nats.py calls it)
    forget_a()
    asyncio.run(nc._reconnected_cb())  # noqa: SLF001
    assert heard == ["a", "b", "made with", "b", "made with"]
