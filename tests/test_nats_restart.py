"""nats-server killed (SIGKILL) and restarted mid-load, on the same port and store.

The timeline-writer and the continuity-resolver run in this event loop and are
never restarted: they reconnect by themselves. A producer publishes numbered
entries with JetStream publish and retries each one with the same Nats-Msg-Id
until it is acknowledged. Afterwards every acknowledged entry is in
SEEDLINE_TIMELINE and in the projection exactly once (DESIGN.md rules 2, 4, 5).
"""

from __future__ import annotations

import asyncio
import json
import time
from collections import Counter

import psycopg
import pytest

from seedline_contracts import subjects
from seedline_continuity_resolver.app import create_app as create_resolver
from seedline_platform import natsio
from seedline_platform.replay import last_seq, replay
from seedline_platform.testing import running
from seedline_timeline_writer.app import create_app as create_writer

pytestmark = [pytest.mark.servers, pytest.mark.slow, pytest.mark.timeout(120)]


def entry(n: int) -> dict:
    return {
        "entry_id": f"r-{n:06d}",
        "instance_id": "bd43f4de",
        "repo": f"apps/repo-{n % 3}",
        "session_id": f"csess_{n % 5}",
        "kind": "terminal",
        "content": f"line {n}",
        "at": "2026-08-17T10:00:00Z",
    }


class Producer:
    """Publishes numbered entries in windows; an entry counts once the stream acknowledged it.

    A publish that errs or times out is sent again with the same Nats-Msg-Id until it
    is acknowledged or the producer stops, so the stream's duplicate window (and the
    writer's entry_id index) must turn retries into one entry. Each acknowledged
    entry's SEEDLINE_INGEST sequence is kept: the timeline must follow that order.
    """

    def __init__(self, js, window: int = 64, ack_timeout: float = 2.0) -> None:
        self._js = js
        self._window = window
        self._ack_timeout = ack_timeout
        self.ingest_seq: dict[str, int] = {}  # acknowledged entry_id -> its ingest sequence
        self.retries = 0
        self.stopping = asyncio.Event()
        self._next = 1

    @property
    def acked(self) -> set[str]:
        return set(self.ingest_seq)

    async def _send(self, n: int) -> asyncio.Future | None:
        try:
            return await self._js.publish_async(
                subjects.INGEST_TIMELINE, json.dumps(entry(n)).encode(),
                headers={"Nats-Msg-Id": entry(n)["entry_id"]}, wait_stall=self._ack_timeout,
            )
        except Exception:
            return None

    async def _settle(self, n: int, future: asyncio.Future | None) -> bool:
        if future is None:
            return False
        try:
            ack = await asyncio.wait_for(future, self._ack_timeout)
        except Exception:
            return False
        self.ingest_seq[entry(n)["entry_id"]] = ack.seq  # a duplicate's ack names the first copy
        return True

    async def run(self) -> None:
        while not self.stopping.is_set():
            numbers = list(range(self._next, self._next + self._window))
            self._next += self._window
            futures = [await self._send(n) for n in numbers]
            outcomes = await asyncio.gather(*(self._settle(n, f) for n, f in zip(numbers, futures)))
            for n in (n for n, ok in zip(numbers, outcomes) if not ok):
                while True:
                    self.retries += 1
                    if await self._settle(n, await self._send(n)) or self.stopping.is_set():
                        break
                    await asyncio.sleep(0.1)


async def wait_until(probe, timeout: float, what: str):
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while True:
        try:
            value = await probe()
        except Exception:
            value = None  # the server may be away; ask again
        if value:
            return value
        if loop.time() > deadline:
            raise AssertionError(f"{what} did not happen within {timeout:.0f} s")
        await asyncio.sleep(0.1)


async def projected_ids(database_url: str) -> Counter:
    async with await psycopg.AsyncConnection.connect(database_url) as conn:
        cur = await conn.execute("SELECT entry_id FROM timeline_entries")
        return Counter(r[0] for r in await cur.fetchall())


async def stream_order(js) -> list[str]:
    """Every entry_id in SEEDLINE_TIMELINE, in stream order."""
    ids: list[str] = []
    end = await last_seq(js, subjects.TIMELINE_STREAM)
    async for msgs in replay(js, subjects.TIMELINE_STREAM, subjects.TIMELINE_ALL, 1, end):
        ids += [json.loads(m.data)["entry_id"] for m in msgs]
    return ids


async def stream_ids(js) -> Counter:
    return Counter(await stream_order(js))


def out_of_ingest_order(order: list[str], ingest_seq: dict[str, int]) -> list[str]:
    """Acknowledged entries appended after one that reached SEEDLINE_INGEST later."""
    seqs = [(ingest_seq[i], i) for i in order if i in ingest_seq]
    return [b for (sa, _), (sb, b) in zip(seqs, seqs[1:]) if sb < sa]


async def ingest_taken(js) -> bool:
    """SEEDLINE_INGEST is a work queue: a message leaves it when the writer acknowledges it."""
    return (await js.stream_info(subjects.INGEST_STREAM)).state.messages == 0


async def timeline_projected(js, durable: str) -> bool:
    info = await js.consumer_info(subjects.TIMELINE_STREAM, durable)
    end = await last_seq(js, subjects.TIMELINE_STREAM)
    return info.num_ack_pending == 0 and info.ack_floor.stream_seq >= end


# A delivery the restart cut off (sent to the writer, never received) is given
# again only after the consumer's ack_wait (30 s); the writer is drained then.
ACK_WAIT_MARGIN = 45


async def test_nats_server_killed_and_restarted_mid_load_keeps_every_acknowledged_entry_once(
    settings, nats_server
):
    if nats_server.process is None:
        pytest.skip("needs the embedded nats-server, which this test kills and restarts")
    server = nats_server.process
    started = time.monotonic()
    writer, resolver = running(create_writer(settings)), running(create_resolver(settings))
    async with writer, resolver:
        nc = await natsio.connect(settings.nats_servers, "restart-producer")
        js = nc.jetstream(publish_async_max_pending=1024)
        producer = Producer(js)
        producing = asyncio.create_task(producer.run())
        try:
            before_kill = await wait_until(
                lambda: _at_least(settings.database_url, 300), 30, "a first 300 projected entries"
            )
            server.kill()
            acked_before_restart = len(producer.ingest_seq)
            await asyncio.sleep(1.5)
            server.start()
            await wait_until(lambda: _grew(producer, acked_before_restart + 300), 30,
                             "300 more acknowledged entries after the restart")
            producer.stopping.set()
            await producing
        finally:
            producer.stopping.set()
            producing.cancel()
            await asyncio.gather(producing, return_exceptions=True)

        acked = producer.acked
        await wait_until(lambda: _has_all(settings.database_url, acked), ACK_WAIT_MARGIN,
                         "projecting every acknowledged entry")
        await wait_until(lambda: ingest_taken(js), ACK_WAIT_MARGIN,
                         "the writer acknowledging all ingest")
        await wait_until(lambda: timeline_projected(js, "continuity-resolver-timeline"),
                         ACK_WAIT_MARGIN, "the resolver projecting the whole timeline")
        # Neither service was restarted: their run tasks lived through the outage.
        for service in (writer, resolver):
            assert not service._task.done(), f"{type(service.app).__name__} stopped running"

        order = await stream_order(js)
        in_stream = Counter(order)
        in_projection = await projected_ids(settings.database_url)
        twice = sorted(i for i, c in in_stream.items() if c > 1)
        assert not twice, f"{len(twice)} entries appended more than once: {twice[:10]}"
        assert not [i for i, c in in_projection.items() if c > 1]
        lost = sorted(acked - in_stream.keys())
        assert not lost, f"{len(lost)} acknowledged entries lost from the stream: {lost[:10]}"
        assert acked <= in_projection.keys()
        late = out_of_ingest_order(order, producer.ingest_seq)
        assert not late, f"{len(late)} entries appended out of ingest order, first {late[:5]}"
        # Unacknowledged publishes may have landed too, but only once and in both places.
        assert in_projection.keys() == in_stream.keys()
        assert (await js.stream_info(subjects.REJECTED_STREAM)).state.messages == 0
        await nc.close()
    print(f"\nacknowledged {len(acked)} (projected before the kill: {before_kill}), "
          f"{producer.retries} retries, {time.monotonic() - started:.1f} s")


async def _at_least(database_url: str, n: int) -> int | None:
    try:
        count = sum((await projected_ids(database_url)).values())
    except psycopg.Error:
        return None
    return count if count >= n else None


async def _grew(producer: Producer, n: int) -> bool:
    return len(producer.ingest_seq) >= n


async def _has_all(database_url: str, acked: set[str]) -> bool:
    return acked <= (await projected_ids(database_url)).keys()
