"""BucketWatch against a real nats-server: every key's newest value, then each put and
delete; after the server restarts, the watch says it can no longer vouch for what it
delivered instead of waiting on a consumer that went with the server."""

from __future__ import annotations

import asyncio

import nats
import pytest

from seedline_platform.replay import BucketWatch, KvChange, WatchBroken


async def _next(changes, timeout: float = 5.0) -> KvChange:
    return await asyncio.wait_for(anext(changes), timeout)


async def test_a_watch_gives_each_key_s_newest_value_then_every_change(nats_server):
    nc = await nats.connect(nats_server.url)
    try:
        js = nc.jetstream()
        kv = await js.create_key_value(bucket="watched", history=5)
        await kv.put("a", b"old")
        await kv.put("a", b"new")
        await kv.put("b", b"kept")
        await kv.delete("b")
        watch = BucketWatch(js, "watched", tick=0.5)
        await watch.start()
        await kv.put("c", b"after start")  # made before any read: still delivered
        changes = watch.changes()
        seen = [await _next(changes) for _ in range(3)]
        assert [(c.key, c.value, c.operation) for c in seen] == [
            ("a", b"new", "PUT"), ("b", b"", "DEL"), ("c", b"after start", "PUT")]
        assert seen[0].revision == 2  # the entry's revision: its stream sequence
        # Past a few empty ticks, a put is still delivered, once.
        await asyncio.sleep(1.2)
        await kv.put("a", b"newer")
        change = await _next(changes)
        assert (change.key, change.value, change.revision) == ("a", b"newer", 6)
        with pytest.raises(TimeoutError):
            await _next(changes, timeout=1.0)
        await watch.stop()
    finally:
        await nc.close()


async def test_a_watch_whose_server_restarted_raises_for_a_new_one(nats_server):
    if nats_server.process is None:
        pytest.skip("needs a server this test can restart")
    nc = await nats.connect(nats_server.url, max_reconnect_attempts=-1,
                            reconnect_time_wait=0.2)
    try:
        js = nc.jetstream()
        kv = await js.create_key_value(bucket="restarted")
        await kv.put("a", b"1")
        watch = BucketWatch(js, "restarted", tick=1.0)
        changes = watch.changes()
        assert (await _next(changes)).key == "a"
        pending = asyncio.ensure_future(_next(changes, timeout=30))
        await asyncio.sleep(0.3)
        nats_server.process.kill()
        nats_server.process.start()
        with pytest.raises((WatchBroken, nats.errors.Error)):
            await pending
        await watch.stop()
        # A new watch reads every key again, the puts made since included.
        await kv.put("b", b"2")
        fresh = BucketWatch(js, "restarted", tick=1.0)
        again = fresh.changes()
        assert {(await _next(again)).key, (await _next(again)).key} == {"a", "b"}
        await fresh.stop()
    finally:
        await nc.close()
