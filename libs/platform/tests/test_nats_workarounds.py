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
    fetch_queued_without_a_task,
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


async def _queued_reads_that_make_an_id(url: str, *, workaround: bool) -> tuple[list[bytes], int]:
    """Three messages waiting in a pull subscription's queue, read with next_msg: what was
    read, and how many uuid4s (nats.py's name for a next_msg task) the reads made."""
    import nats.aio.subscription as subscription

    nc = await nats.connect(url, allow_reconnect=False)
    made = []
    real_uuid4 = subscription.uuid4
    try:
        js = nc.jetstream()
        await js.add_stream(name="QUEUED", subjects=["queued.>"])
        pull = await js.pull_subscribe("queued.>", stream="QUEUED")
        if workaround:
            fetch_queued_without_a_task(pull)
        sub = pull._sub  # noqa: SLF001
        for n in range(3):
            await nc.publish(sub.subject, f"m{n}".encode())
        await nc.flush()
        while sub.pending_msgs < 3:
            await asyncio.sleep(0.01)
        subscription.uuid4 = lambda: made.append(1) or real_uuid4()
        read = [(await sub.next_msg(timeout=1)).data for _ in range(3)]
        assert sub.pending_msgs == 0 and sub.pending_bytes == 0
        return read, len(made)
    finally:
        subscription.uuid4 = real_uuid4
        await nc.close()


@pytest.mark.xfail(strict=True, reason="nats.py 2.16 makes a uuid4, a task and a timer for "
                   "each message next_msg takes, queued or not: fetch_queued_without_a_task "
                   "takes a queued one at once")
async def test_plain_nats_py_takes_a_queued_message_without_making_a_task(nats_server):
    _, made = await _queued_reads_that_make_an_id(nats_server.url, workaround=False)
    assert made == 0


async def test_with_the_workaround_queued_messages_are_taken_in_order_with_no_task(
        nats_server):
    read, made = await _queued_reads_that_make_an_id(nats_server.url, workaround=True)
    assert read == [b"m0", b"m1", b"m2"] and made == 0


async def test_with_the_workaround_a_fetch_still_waits_for_what_has_not_come(nats_server):
    nc = await nats.connect(nats_server.url, allow_reconnect=False)
    try:
        js = nc.jetstream()
        await js.add_stream(name="LATER", subjects=["later.>"])
        pull = fetch_queued_without_a_task(await js.pull_subscribe("later.>", stream="LATER"))
        with pytest.raises((nats.errors.TimeoutError, TimeoutError)):  # nats.py's, or asyncio's
            await pull.fetch(5, timeout=0.3)
        fetching = asyncio.create_task(pull.fetch(5, timeout=3))
        await asyncio.sleep(0.1)
        for n in range(3):
            await js.publish("later.x", f"m{n}".encode())
        got = await fetching
        while len(got) < 3:  # what came after the fetch returned is queued for the next
            got += await pull.fetch(5, timeout=1)
        assert [m.data for m in got] == [b"m0", b"m1", b"m2"]
    finally:
        await nc.close()
