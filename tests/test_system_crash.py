"""Every service killed with SIGKILL in turn under load, then restarted.

A load generator publishes 20,000 uniquely numbered entries and keeps opening
conversations while timeline-writer, continuity-resolver, seed-composer and
runner-gateway are each killed and restarted. Afterwards every acknowledged
entry is in the stream and the projection exactly once and in publish order,
every open got an answer (a reply or an error), and a rebuild of the
projection gives the same digest.
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
import nats.errors
import psycopg
import pytest

from seedline_contracts import subjects
from seedline_contracts.errors import ErrorCode
from seedline_devtools.processes import stop_processes
from seedline_platform import natsio
from seedline_platform.replay import last_seq, replay
from seedline_runner.engines.scripted import ScriptedEngine
from seedline_runner.runner import Runner
from seedline_timeline_writer.rebuild import rebuild_timeline

pytestmark = [pytest.mark.servers, pytest.mark.slow]

SERVICES = ("timeline-writer", "continuity-resolver", "seed-composer", "runner-gateway")
BIN = Path(sys.executable).parent
ENTRIES = 20_000
ERROR_CODES = set(ErrorCode.__args__)


def numbered(n: int) -> bytes:
    return json.dumps({
        "entry_id": f"load-{n:05d}", "instance_id": "bd43f4de", "repo": f"apps/repo-{n % 3}",
        "session_id": f"csess_load_{n % 7}", "kind": "chat_assistant", "content": f"entry {n}",
        "at": "2026-08-17T10:00:00Z", "engine": "scripted",
    }).encode()


class Services:
    def __init__(self, settings, logs: Path) -> None:
        self.env = dict(os.environ, SEEDLINE_NATS_URL=settings.nats_url,
                        SEEDLINE_NATS_MONITOR_URL=settings.nats_monitor_url,
                        SEEDLINE_DATABASE_URL=settings.database_url,
                        SEEDLINE_STRICT_DURABILITY="1", SEEDLINE_OPEN_TIMEOUT_SECONDS="10",
                        SEEDLINE_LAUNCH_TIMEOUT_SECONDS="3", SEEDLINE_HTTP_PORT="0")
        self.logs = logs
        self.procs: dict[str, subprocess.Popen] = {}

    def start(self, name: str) -> None:
        log = open(self.logs / f"{name}.log", "ab")
        self.procs[name] = subprocess.Popen([str(BIN / name)], env=self.env, stdout=log,
                                            stderr=subprocess.STDOUT)

    def kill(self, name: str) -> None:
        proc = self.procs[name]
        proc.send_signal(signal.SIGKILL)
        proc.wait()

    def stop_all(self) -> None:
        stop_processes(self.procs.values())


async def publish_all(js, acked: list[int]) -> None:
    """Publish every entry, retrying with the same Nats-Msg-Id until acknowledged."""
    window = 500
    for start in range(1, ENTRIES + 1, window):
        batch = list(range(start, min(start + window, ENTRIES + 1)))
        while batch:
            futures = [await js.publish_async(subjects.INGEST_TIMELINE, numbered(n),
                                              headers={"Nats-Msg-Id": f"load-{n:05d}"}) for n in batch]
            results = await asyncio.gather(*(asyncio.wait_for(f, 10) for f in futures),
                                           return_exceptions=True)
            failed = [n for n, r in zip(batch, results) if isinstance(r, BaseException)]
            acked.extend(n for n, r in zip(batch, results) if not isinstance(r, BaseException))
            batch = failed


async def keep_opening(nc, answers: list[dict], stop: asyncio.Event) -> None:
    """Opens with request ids; a request nobody answered is sent again with the same id."""
    n = 0
    while not stop.is_set():
        n += 1
        body = json.dumps({"request_id": f"load-open-{n}", "instance_id": "bd43f4de",
                           "repo": f"apps/repo-{n % 3}", "engine": "scripted",
                           "node_id": "mac-mini-1"}).encode()
        deadline = asyncio.get_running_loop().time() + 60
        while True:
            try:
                msg = await nc.request(subjects.API_SESSIONS_OPEN, body, timeout=15)
                answers.append(json.loads(msg.data))
                break
            except (nats.errors.TimeoutError, nats.errors.NoRespondersError) as exc:
                if asyncio.get_running_loop().time() > deadline:
                    answers.append({"unanswered": n, "last_error": type(exc).__name__})
                    break
                await asyncio.sleep(0.5)
        await asyncio.sleep(0.2)


async def test_each_service_killed_under_load_loses_nothing(settings, tmp_path):
    nc = await nats.connect(settings.nats_url)
    js = nc.jetstream(publish_async_max_pending=2000)
    await natsio.ensure_streams(js)
    services = Services(settings, tmp_path)
    runner = runner_nc = None
    try:
        for name in SERVICES:
            services.start(name)
            await asyncio.sleep(0.3)  # the first start creates the schema
        runner_nc = await nats.connect(settings.nats_url)
        runner = Runner(runner_nc, "mac-mini-1", "Mac mini", {"scripted": ScriptedEngine()},
                        presence_interval=1.0)
        await runner.start()
        await _until(lambda: _answers_opens(nc), 30)

        acked: list[int] = []
        answers: list[dict] = []
        stop_opening = asyncio.Event()
        publishing = asyncio.create_task(publish_all(js, acked))
        opening = asyncio.create_task(keep_opening(nc, answers, stop_opening))
        for name in SERVICES:
            await asyncio.sleep(1.5)
            services.kill(name)
            await asyncio.sleep(0.5)
            services.start(name)
        await publishing
        stop_opening.set()
        await opening

        assert sorted(acked) == list(range(1, ENTRIES + 1))
        await _until(lambda: _projected_at_least(settings.database_url, ENTRIES), 120)

        in_stream = await _stream_numbers(js)
        assert Counter(in_stream).most_common(1)[0][1] == 1, "an entry is in the stream twice"
        assert in_stream == sorted(in_stream), "ingest order was not kept"
        assert set(in_stream) == set(range(1, ENTRIES + 1))
        with psycopg.connect(settings.database_url) as conn:
            rows, distinct = conn.execute(
                "SELECT count(*), count(DISTINCT entry_id) FROM timeline_entries"
                " WHERE entry_id LIKE 'load-%'").fetchone()
        assert rows == distinct == ENTRIES

        assert answers and not [a for a in answers if "unanswered" in a]
        assert all(a.get("ok") is True or a["error"]["code"] in ERROR_CODES for a in answers)
        assert any(a.get("ok") for a in answers)

        result = await rebuild_timeline(settings, None)
        assert result.before_digest == result.after_digest
        for name in SERVICES:
            assert services.procs[name].poll() is None, (tmp_path / f"{name}.log").read_text()[-3000:]
    finally:
        if runner is not None:
            await runner.stop()
            await runner_nc.close()
        services.stop_all()
        await nc.close()


async def _answers_opens(nc) -> bool:
    try:
        msg = await nc.request(subjects.API_SESSIONS_OPEN, json.dumps({
            "instance_id": "bd43f4de", "repo": "apps/warmup", "engine": "scripted",
            "node_id": "mac-mini-1"}).encode(), timeout=5)
    except Exception:
        return False
    return json.loads(msg.data).get("ok") is True


async def _projected_at_least(url: str, count: int) -> bool:
    async with await psycopg.AsyncConnection.connect(url) as conn:
        cur = await conn.execute("SELECT count(*) FROM timeline_entries WHERE entry_id LIKE 'load-%'")
        return (await cur.fetchone())[0] >= count


async def _stream_numbers(js) -> list[int]:
    numbers: list[int] = []
    end = await last_seq(js, subjects.TIMELINE_STREAM)
    async for msgs in replay(js, subjects.TIMELINE_STREAM, subjects.TIMELINE_ALL, 1, end):
        for m in msgs:
            entry_id = json.loads(m.data)["entry_id"]
            if entry_id.startswith("load-"):
                numbers.append(int(entry_id[5:]))
    return numbers


async def _until(probe, timeout: float) -> None:
    deadline = asyncio.get_running_loop().time() + timeout
    while not await probe():
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError("condition not met in time")
        await asyncio.sleep(0.2)
