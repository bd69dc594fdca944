"""Fault tests: kill -9 mid-load, a poison message, Postgres away.

Nothing acknowledged is lost, nothing is applied twice, entries keep their
ingest order, and a message that keeps failing is parked instead of blocking
everything behind it.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
from collections import Counter
from pathlib import Path

import nats
import psycopg
import pytest

from seedline_contracts import subjects
from seedline_platform import natsio, pg
from seedline_platform.outage import DatabaseUnavailable
from seedline_platform.consumer import ACK_WAIT_SECONDS, BatchConsumer, Consumption
from seedline_platform.replay import last_seq, replay
from seedline_devtools.testing import request, running
from seedline_devtools.testing_load import ingest_taken
from seedline_timeline_writer.app import create_app
from seedline_platform.publishing import JetStreamPublisher
from seedline_platform.settings import Settings
from seedline_timeline_writer.bootstrap import Ports, bootstrap
from seedline_timeline_writer.ingest import IngestHandler
from seedline_timeline_writer.store import PostgresTimelineStore
from seedline_timeline_writer.stream import JetStreamTimeline


def ingest_for(js, store) -> IngestHandler:
    """The writer's ingest path as its app wires it, on this test's store."""
    return bootstrap(Settings(), Ports(store=store, stream=JetStreamTimeline(js),
                                       publisher=JetStreamPublisher(js))).ingest


async def park_rejected(js, msg, reason: str) -> None:
    await natsio.park_message(js, msg, reason, subjects.REJECTED_TIMELINE)

pytestmark = [pytest.mark.servers, pytest.mark.slow]

WRITER = Path(sys.executable).with_name("timeline-writer")


def entry(n: int) -> dict:
    return {
        "entry_id": f"n-{n:05d}",
        "instance_id": "bd43f4de",
        "repo": f"apps/repo-{n % 4}",
        "session_id": "csess_1",
        "kind": "terminal",
        "content": f"entry {n}",
        "at": "2026-08-17T10:00:00Z",
    }


async def publish_numbered(js, first: int, last: int, window: int = 1000) -> list[int]:
    """Publish entries first..last with a window of pending acks; returns their ingest seqs."""
    seqs: list[int] = []
    for start in range(first, last + 1, window):
        futures = [
            await js.publish_async(
                subjects.INGEST_TIMELINE, json.dumps(entry(n)).encode(),
                headers={"Nats-Msg-Id": f"n-{n:05d}"},
            )
            for n in range(start, min(start + window, last + 1))
        ]
        seqs += [ack.seq for ack in await asyncio.gather(*futures)]
    return seqs


async def projected_count(url: str) -> int:
    try:
        async with await psycopg.AsyncConnection.connect(url) as conn:
            cur = await conn.execute("SELECT count(*) FROM timeline_entries")
            return (await cur.fetchone())[0]
    except (psycopg.errors.UndefinedTable, psycopg.OperationalError):
        return 0


async def wait_until(predicate, timeout: float, what: str):
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while True:
        value = await predicate()
        if value:
            return value
        if loop.time() > deadline:
            raise AssertionError(f"{what} did not happen within {timeout:.0f} s")
        await asyncio.sleep(0.05)


async def stream_entry_ids(js) -> list[str]:
    """Every entry_id in SEEDLINE_TIMELINE, in seq order."""
    ids: list[str] = []
    end = await last_seq(js, subjects.TIMELINE_STREAM)
    async for msgs in replay(js, subjects.TIMELINE_STREAM, subjects.TIMELINE_ALL, 1, end):
        ids += [json.loads(m.data)["entry_id"] for m in msgs]
    return ids


async def projected_entry_ids(url: str) -> tuple[list[str], int, int]:
    """entry_ids in seq order, with count(*) and count(DISTINCT entry_id)."""
    async with await psycopg.AsyncConnection.connect(url) as conn:
        cur = await conn.execute("SELECT count(*), count(DISTINCT entry_id) FROM timeline_entries")
        total, distinct = await cur.fetchone()
        cur = await conn.execute("SELECT entry_id FROM timeline_entries ORDER BY seq")
        return [r[0] for r in await cur.fetchall()], total, distinct


async def stream_messages(js, stream: str) -> int:
    return (await js.stream_info(stream)).state.messages


def expected_ids(count: int) -> list[str]:
    return [f"n-{n:05d}" for n in range(1, count + 1)]


class IngestOrderBroken(AssertionError):
    """Every entry is there once, but not in the order it reached SEEDLINE_INGEST."""


async def assert_each_entry_once_in_order(js, database_url: str, count: int) -> None:
    in_stream = await stream_entry_ids(js)
    assert sorted(in_stream) == expected_ids(count)
    ids, total, distinct = await projected_entry_ids(database_url)
    assert total == distinct == count
    assert ids == in_stream
    # A single producer: ingest order is entry number order.
    if in_stream != expected_ids(count):
        at = next(i for i, (a, b) in enumerate(zip(in_stream, expected_ids(count))) if a != b)
        raise IngestOrderBroken(f"seq {at + 1} holds {in_stream[at]}, expected n-{at + 1:05d}")


def start_writer(settings, log_path: Path) -> subprocess.Popen:
    env = dict(os.environ)
    env.update(
        SEEDLINE_NATS_URL=settings.nats_url,
        SEEDLINE_NATS_MONITOR_URL=settings.nats_monitor_url,
        SEEDLINE_DATABASE_URL=settings.database_url,
        SEEDLINE_HOME=str(settings.home),
        SEEDLINE_STRICT_DURABILITY="1",
    )
    with open(log_path, "ab") as log:
        return subprocess.Popen([str(WRITER)], env=env, stdout=log, stderr=subprocess.STDOUT)


async def test_sigkill_mid_load_loses_nothing_and_applies_nothing_twice(settings, tmp_path):
    count = 20_000
    nc = await nats.connect(settings.nats_url)
    js = nc.jetstream(publish_async_max_pending=1000)
    await natsio.ensure_streams(js)
    log = tmp_path / "writer.log"
    writers: list[subprocess.Popen] = [start_writer(settings, log)]
    try:
        publishing = asyncio.create_task(publish_numbered(js, 1, count))
        at_kill = await wait_until(
            lambda: _count_if_at_least(settings.database_url, 2000), 60, "a first projected batch"
        )
        writers[0].send_signal(signal.SIGKILL)
        writers[0].wait()
        assert at_kill < count, "the writer finished before it could be killed mid-load"

        writers.append(start_writer(settings, log))
        await publishing
        await wait_until(
            lambda: _all_applied(js, settings.database_url, count), 120, "projecting every entry"
        )
        assert writers[1].poll() is None, log.read_text()[-2000:]

        await assert_each_entry_once_in_order(js, settings.database_url, count)
        assert await stream_messages(js, subjects.REJECTED_STREAM) == 0
    finally:
        await _stop_all(writers)
        await nc.close()


async def test_a_writer_killed_holding_a_partial_batch_keeps_ingest_order(settings, tmp_path):
    nc = await nats.connect(settings.nats_url)
    js = nc.jetstream(publish_async_max_pending=1000)
    await natsio.ensure_streams(js)
    log = tmp_path / "writer.log"
    writers: list[subprocess.Popen] = [start_writer(settings, log)]
    try:
        await publish_numbered(js, 1, 300)
        await wait_until(lambda: _all_applied(js, settings.database_url, 300), 30, "first 300")
        # The lock stops the writer between fetching a batch and appending it.
        async with await psycopg.AsyncConnection.connect(settings.database_url) as lock:
            await lock.execute("LOCK TABLE timeline_entries IN ACCESS EXCLUSIVE MODE")
            await publish_numbered(js, 301, 350)
            await wait_until(lambda: _writer_holds(js), 30, "the writer fetching a batch")
            writers[0].send_signal(signal.SIGKILL)
            writers[0].wait()
            await lock.rollback()
        await publish_numbered(js, 351, 600)
        writers.append(start_writer(settings, log))
        await wait_until(lambda: _all_applied(js, settings.database_url, 600), 75, "all 600")

        await assert_each_entry_once_in_order(js, settings.database_url, 600)
    finally:
        await _stop_all(writers)
        await nc.close()


async def _writer_holds(js) -> bool:
    info = await js.consumer_info(subjects.INGEST_STREAM, "timeline-writer")
    return info.num_ack_pending > 0


async def _stop_all(writers: list[subprocess.Popen]) -> None:
    for proc in writers:
        if proc.poll() is None:
            proc.terminate()
            await asyncio.to_thread(proc.wait, 15)


async def _count_if_at_least(url: str, minimum: int) -> int | None:
    n = await projected_count(url)
    return n if n >= minimum else None


async def _all_applied(js, url: str, count: int) -> bool:
    if await projected_count(url) < count:
        return False
    return await ingest_taken(js)


async def test_a_message_that_keeps_failing_is_parked_as_poison_and_the_rest_flow(settings):
    nc = await natsio.connect(settings.nats_servers, "poison-test")
    js = nc.jetstream()
    await natsio.ensure_streams(js)
    pool = await pg.open_pool(settings.database_url, "poison-test")
    store = PostgresTimelineStore(pool)
    await store.setup()
    ingest = ingest_for(js, store)
    poison = json.dumps(entry(3)).encode()
    attempts = Counter()

    async def handle(msgs):
        for msg in msgs:
            if msg.data == poison:
                attempts["poison"] += 1
                raise ValueError("this entry breaks the handler")
        await ingest.handle(msgs)

    max_deliver = 3
    consumer = BatchConsumer(
        js, Consumption(subjects.INGEST_STREAM, "poison-test", (subjects.INGEST_TIMELINE,),
                        batch_size=16, max_deliver=max_deliver),
        handle=handle, park=lambda msg, reason: park_rejected(js, msg, reason),
    )
    await consumer.start()
    task = asyncio.create_task(consumer.run())
    try:
        ingest_seqs = await publish_numbered(js, 1, 6)
        await wait_until(
            lambda: _count_if_at_least(settings.database_url, 5), 30, "projecting the healthy ones"
        )
        records = await wait_until(lambda: _rejected(js), 30, "parking the poison message")

        assert len(records) == 1
        record = records[0]
        assert record["reason_code"] == "poison"
        assert record["ingest_seq"] == ingest_seqs[2]
        assert record["raw"] == poison.decode() and record["raw_encoding"] == "utf-8"
        assert "ValueError" in record["message"]
        assert 1 < attempts["poison"] <= max_deliver
        ids, _, _ = await projected_entry_ids(settings.database_url)
        assert ids == ["n-00001", "n-00002", "n-00004", "n-00005", "n-00006"]
        assert await stream_entry_ids(js) == ids
        await wait_until(lambda: ingest_taken(js), 10, "acknowledging every ingest message")
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        await nc.close()
        await pool.close()


async def _rejected(js) -> list[dict]:
    info = await js.stream_info(subjects.REJECTED_STREAM)
    if not info.state.messages:
        return []
    return [
        json.loads((await js.get_msg(subjects.REJECTED_STREAM, seq)).data)
        for seq in range(info.state.first_seq, info.state.last_seq + 1)
    ]


# Away for two of the consumer's ack waits: only the lease the writer keeps extending
# stops the batch being redelivered meanwhile.
POSTGRES_AWAY_SECONDS = 2 * ACK_WAIT_SECONDS


async def test_postgres_away_waits_answers_unavailable_and_applies_everything_once(
    settings, postgres_server
):
    if postgres_server.process is None:
        pytest.skip("needs the embedded Postgres, which this run can stop and start")
    count = 3000
    async with running(create_app(settings)):
        nc = await nats.connect(settings.nats_url)
        js = nc.jetstream(publish_async_max_pending=1000)
        await publish_numbered(js, 1, 500, window=100)
        await wait_until(lambda: _count_if_at_least(settings.database_url, 500), 30, "first 500")
        publishing = asyncio.create_task(_publish_slowly(js, 501, 2500))
        stopped = False
        loop = asyncio.get_running_loop()
        try:
            await asyncio.to_thread(postgres_server.process.stop)
            stopped = True
            away_since = loop.time()
            reply = await request(nc, subjects.API_TIMELINE_READ, {
                "instance_id": "bd43f4de", "repo": "apps/repo-1"}, timeout=15)
            assert reply["ok"] is False and reply["error"]["code"] == "unavailable", reply
            assert reply["error"]["message"]
            await publishing
            await publish_numbered(js, 2501, count)
            await asyncio.sleep(max(0.0, POSTGRES_AWAY_SECONDS - (loop.time() - away_since)))
        finally:
            publishing.cancel()
            if stopped:
                await asyncio.to_thread(postgres_server.process.restart)
        await wait_until(
            lambda: _all_applied(js, settings.database_url, count), 60, "projecting every entry"
        )
        await assert_each_entry_once_in_order(js, settings.database_url, count)
        assert await stream_messages(js, subjects.REJECTED_STREAM) == 0
        await nc.close()


async def _publish_slowly(js, first: int, last: int) -> None:
    """Windows of 100 with a pause between, so the outage starts mid-load."""
    for start in range(first, last + 1, 100):
        await publish_numbered(js, start, min(start + 99, last), window=100)
        await asyncio.sleep(0.02)


class StoreThatLosesOneCommit(PostgresTimelineStore):
    """Postgres going away after the batch reached the stream, before its projection."""

    def __init__(self, pool) -> None:
        super().__init__(pool)
        self.failed = False

    async def append(self, stored) -> None:
        if stored and not self.failed:
            self.failed = True
            raise DatabaseUnavailable("the database went away mid-batch")
        await super().append(stored)


async def test_an_outage_between_stream_and_projection_still_projects_the_batch(settings):
    nc = await natsio.connect(settings.nats_servers, "outage-test")
    js = nc.jetstream()
    await natsio.ensure_streams(js)
    pool = await pg.open_pool(settings.database_url, "outage-test")
    store = StoreThatLosesOneCommit(pool)
    await store.setup()
    ingest = ingest_for(js, store)
    consumer = BatchConsumer(
        js, Consumption(subjects.INGEST_STREAM, "outage-test", (subjects.INGEST_TIMELINE,)),
        handle=ingest.handle, park=lambda msg, reason: park_rejected(js, msg, reason),
    )
    await consumer.start()
    task = asyncio.create_task(consumer.run())
    try:
        await publish_numbered(js, 1, 40)
        await wait_until(lambda: _all_applied(js, settings.database_url, 40), 30, "projecting 40")
        assert store.failed
        await publish_numbered(js, 41, 60)
        await wait_until(lambda: _all_applied(js, settings.database_url, 60), 30, "projecting 60")
        await assert_each_entry_once_in_order(js, settings.database_url, 60)
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        await nc.close()
        await pool.close()
