"""The notices stream over HTTP delivers the gateway's own stopped_idle notice: the
real idle sweep, with an idle time of seconds (SEEDLINE_IDLE_STOP_MINUTES counts in
minutes; the sweep compares times, so seconds test the same path)."""

from __future__ import annotations

import asyncio
import dataclasses
import json
from datetime import timedelta

import pytest

from seedline_core.notices import wording_violations

from .conftest import INSTANCE, REPO

pytestmark = [pytest.mark.servers, pytest.mark.slow]


@pytest.fixture
def settings(settings):
    return dataclasses.replace(settings, idle_stop=timedelta(seconds=3), idle_sweep_seconds=1.0)


async def test_the_notices_stream_delivers_a_stopped_idle_notice(system, web):
    await system.start_runner()
    events: list[tuple[str, dict]] = []
    ready = asyncio.Event()
    async with web.client(web.token) as client:

        async def listen():
            async with client.stream("GET", f"/v1/instances/{INSTANCE}/notifications",
                                     timeout=None) as resp:
                assert resp.status_code == 200
                assert resp.headers["content-type"].startswith("text/event-stream")
                kind = None
                async for line in resp.aiter_lines():
                    if line == ": ready":
                        ready.set()
                    elif line.startswith("event: "):
                        kind = line[len("event: "):]
                    elif line.startswith("data: "):
                        events.append((kind, json.loads(line[len("data: "):])))
                        return

        listener = asyncio.create_task(listen())
        await asyncio.wait_for(ready.wait(), 10)
        opened = await client.post(f"/v1/instances/{INSTANCE}/conversations", json={
            "repo": REPO, "engine": "scripted", "node_id": "mac-mini-1"})
        assert opened.status_code == 200, opened.text
        await asyncio.wait_for(listener, 120)
        live = await client.get(f"/v1/instances/{INSTANCE}/conversations")
    ((kind, notice),) = events
    assert kind == "stopped_idle"
    assert notice["session_id"] == opened.json()["session_id"]
    assert "after 3 seconds without activity" in notice["text"]
    assert "next message" in notice["text"] and not wording_violations(notice["text"])
    assert live.json()["conversations"] == []
