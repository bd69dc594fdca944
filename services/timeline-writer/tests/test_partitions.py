"""Ingest partitioned by instance over several writers (CONTRACT.md 2.2, 1.1).

nats-server maps each ingest subject that names an instance to one of k partitions;
writer i takes partition i and appends to the one SEEDLINE_TIMELINE. Entries of one
instance keep their order; entries of different instances may interleave. Killing
one partition's writer with SIGKILL under load loses and reorders nothing.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
from collections import Counter
from contextlib import AsyncExitStack
from pathlib import Path

import nats
import pytest

from seedline_contracts import subjects
from seedline_devtools.embedded import start_nats
from seedline_devtools.processes import stop_processes
from seedline_devtools.testing import request, running
from seedline_devtools.testing_load import (
    Producer,
    ingest_taken,
    out_of_ingest_order,
    projected_ids,
    stream_order,
    wait_until,
)
from seedline_platform.settings import Settings
from seedline_timeline_writer.app import create_app

pytestmark = pytest.mark.servers

PARTITIONS = 2
INSTANCES = 8
DURABLES = tuple(f"timeline-writer-p{i}" for i in range(PARTITIONS))


@pytest.fixture
def partitioned(tmp_path, database_url):
    nats_proc = start_nats(tmp_path / "nats", ingest_partitions=PARTITIONS)
    env = {
        "SEEDLINE_NATS_URL": nats_proc.url, "SEEDLINE_NATS_MONITOR_URL": nats_proc.monitor_url,
        "SEEDLINE_DATABASE_URL": database_url, "SEEDLINE_HOME": str(tmp_path / "home"),
        "SEEDLINE_STRICT_DURABILITY": "1", "SEEDLINE_HTTP_PORT": "0",
        "SEEDLINE_INGEST_PARTITIONS": str(PARTITIONS),
    }
    try:
        yield env
    finally:
        nats_proc.stop()


def settings_of(env: dict, partition: int) -> Settings:
    return Settings.from_env({**env, "SEEDLINE_INGEST_PARTITION": str(partition)})


async def test_each_writer_takes_its_instances_and_the_append_api_reaches_the_right_one(partitioned):
    async with AsyncExitStack() as stack:
        apps = [await stack.enter_async_context(running(create_app(settings_of(partitioned, i))))
                for i in range(PARTITIONS)]
        nc = await nats.connect(partitioned["SEEDLINE_NATS_URL"])
        stack.push_async_callback(nc.close)
        js = nc.jetstream()
        for n in range(40):
            instance = f"inst-{n % INSTANCES}"
            body = {"entry_id": f"e-{n}", "instance_id": instance, "repo": "r",
                    "session_id": "s", "kind": "terminal", "content": f"{n}"}
            if n % 4 == 0:  # the synchronous append goes through ingest too
                assert (await request(nc, subjects.API_TIMELINE_APPEND, body))["ok"]
            else:
                await js.publish(subjects.ingest_timeline_subject(instance),
                                 json.dumps(body).encode(), headers={"Nats-Msg-Id": f"e-{n}"})
        await wait_until(lambda: ingest_taken(js, DURABLES), 30, "both writers taking ingest")
        for instance in (f"inst-{i}" for i in range(INSTANCES)):
            expected = [f"e-{n}" for n in range(40) if n % INSTANCES == int(instance[-1])]
            assert await stream_order(js, instance) == expected
            read = await request(nc, subjects.API_TIMELINE_READ, {"instance_id": instance,
                                                                  "repo": "r"})
            assert [e["entry_id"] for e in read["entries"]] == expected
        # Both writers did take some: the server spread the instances.
        for durable in DURABLES:
            info = await js.consumer_info(subjects.INGEST_STREAM, durable)
            assert info.delivered.stream_seq > 0, durable
        assert all(app.ready for app in apps)
        # An entry on another instance's subject would land in the wrong partition.
        wrong = {"entry_id": "x-1", "instance_id": "inst-1", "repo": "r", "session_id": "s",
                 "kind": "terminal", "content": "misplaced"}
        await js.publish(subjects.ingest_timeline_subject("inst-2"), json.dumps(wrong).encode())
        await wait_until(lambda: ingest_taken(js, DURABLES), 30, "the refusal")
        assert "x-1" not in await stream_order(js)


@pytest.mark.slow
async def test_sigkill_of_one_partitions_writer_loses_and_reorders_nothing(partitioned, tmp_path):
    env = dict(os.environ, **partitioned)
    binary = str(Path(sys.executable).parent / "timeline-writer")
    logs = tmp_path / "logs"
    logs.mkdir()

    def start(partition: int) -> subprocess.Popen:
        log = open(logs / f"writer-{partition}.log", "ab")
        return subprocess.Popen([binary], stdout=log, stderr=subprocess.STDOUT,
                                env={**env, "SEEDLINE_INGEST_PARTITION": str(partition)})

    writers = {i: start(i) for i in range(PARTITIONS)}
    nc = await nats.connect(partitioned["SEEDLINE_NATS_URL"])
    try:
        js = nc.jetstream()
        await wait_until(lambda: _consumers_exist(js), 60, "the writers starting")
        producer = Producer(js, "part", window=64, instances=INSTANCES)
        producing = asyncio.create_task(producer.run())
        await wait_until(lambda: _acked(producer, 1500), 120, "1,500 acknowledged entries")
        writers[1].send_signal(signal.SIGKILL)  # mid-batch, under load
        writers[1].wait()
        await asyncio.sleep(1.0)
        writers[1] = start(1)
        await wait_until(lambda: _acked(producer, 4000), 180, "4,000 acknowledged entries")
        producer.stopping.set()
        await producing
        acked = producer.acked
        await wait_until(lambda: ingest_taken(js, DURABLES), 120, "both writers draining ingest")
        stored = Counter(await stream_order(js))
        assert {i for i in acked if stored[i] != 1} == set(), "an acknowledged entry is missing or twice"
        projected = await projected_ids(partitioned["SEEDLINE_DATABASE_URL"])
        assert {i for i in acked if projected[i] != 1} == set()
        for instance in (f"inst-{i}" for i in range(INSTANCES)):
            order = await stream_order(js, instance)
            assert out_of_ingest_order(order, producer.ingest_seq) == [], instance
    finally:
        await nc.close()
        stop_processes(writers.values())


async def _consumers_exist(js) -> bool:
    try:
        for durable in DURABLES:
            await js.consumer_info(subjects.INGEST_STREAM, durable)
    except Exception:
        return False
    return True


async def _acked(producer: Producer, n: int) -> bool:
    return len(producer.ingest_seq) >= n
