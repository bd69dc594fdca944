"""Notices are kept (SEEDLINE_NOTICES, CONTRACT.md 1, 1.2): the SSE stream's ids are
stream sequences, a client that reconnects with Last-Event-ID misses nothing, even
across a restart of the web process, and past notices can be read over HTTP."""

from __future__ import annotations

import asyncio
import dataclasses
import json

import httpx
import nats
import pytest

from seedline_contracts import subjects
from seedline_contracts.codec import encode
from seedline_contracts.sessions import NotWokenNotification
from seedline_devtools.embedded import free_port
from seedline_devtools.testing import running
from seedline_web.app import create_app

pytestmark = pytest.mark.servers

INSTANCE = "bd43f4de"
OTHER = "someone-else"


def _notice(text: str, at: str = "2026-12-01T10:00:00Z") -> bytes:
    return encode(NotWokenNotification(repo="apps/new", text=text, at=at))


async def _publish(nc, instance: str, *texts: str) -> None:
    # As the gateway sends them: plain publishes, kept by the stream.
    for text in texts:
        await nc.publish(subjects.notify_subject(instance), _notice(text))
    await nc.flush()


async def _wait_stored(nc, count: int) -> None:
    js = nc.jetstream()
    for _ in range(200):
        if (await js.stream_info(subjects.NOTICES_STREAM)).state.messages >= count:
            return
        await asyncio.sleep(0.05)
    raise AssertionError("the notices were not kept")


class Listener:
    """An SSE client as a browser's EventSource is: it keeps the last id it saw."""

    def __init__(self, url: str, token: str, last_id: int | None = None) -> None:
        self.url, self.token, self.last_id = url, token, last_id
        self.events: list[tuple[int, str, dict]] = []
        self.ready = asyncio.Event()
        self.task: asyncio.Task | None = None

    async def _run(self) -> None:
        headers = {"Authorization": f"Bearer {self.token}"}
        if self.last_id is not None:
            headers["Last-Event-ID"] = str(self.last_id)
        async with httpx.AsyncClient(base_url=self.url, timeout=None, headers=headers) as client:
            try:
                async with client.stream("GET", f"/v1/instances/{INSTANCE}/notifications") as r:
                    assert r.status_code == 200
                    event_id = kind = None
                    async for line in r.aiter_lines():
                        if line == ": ready":
                            self.ready.set()
                        elif line.startswith("id: "):
                            event_id = int(line[4:])
                        elif line.startswith("event: "):
                            kind = line[7:]
                        elif line.startswith("data: "):
                            self.events.append((event_id, kind, json.loads(line[6:])))
                            self.last_id = event_id
            except (httpx.RemoteProtocolError, httpx.ReadError):
                pass  # the server went away; a browser would reconnect

    async def start(self) -> None:
        self.task = asyncio.create_task(self._run())
        await asyncio.wait_for(self.ready.wait(), 15)

    async def until(self, count: int) -> None:
        for _ in range(300):
            if len(self.events) >= count:
                return
            await asyncio.sleep(0.05)
        raise AssertionError(f"got {len(self.events)} notices, not {count}")


def _web(settings):
    return running(create_app(dataclasses.replace(settings, web_port=free_port())))


async def test_a_reconnecting_client_misses_nothing_across_a_web_restart(settings):
    nc = await nats.connect(settings.nats_url)
    try:
        async with _web(settings) as first:
            _, token = await first.tokens.create(INSTANCE)
            listener = Listener(first.url, token)
            await listener.start()
            await _publish(nc, INSTANCE, "one")
            await listener.until(1)
        await asyncio.wait_for(listener.task, 15)  # the stream ended with its process
        # Sent while no web process runs, and one for another instance.
        await _publish(nc, INSTANCE, "two", "three")
        await _publish(nc, OTHER, "not yours")
        await _wait_stored(nc, 4)
        async with _web(settings) as second:
            again = Listener(second.url, token, last_id=listener.last_id)
            await again.start()
            await again.until(2)
            await _publish(nc, INSTANCE, "four")
            await again.until(3)
            again.task.cancel()
    finally:
        await nc.close()
    events = listener.events + again.events
    assert [e[2]["text"] for e in events] == ["one", "two", "three", "four"]
    ids = [e[0] for e in events]
    assert ids == sorted(ids) and len(set(ids)) == 4
    assert {e[1] for e in events} == {"not_woken"}


async def test_past_notices_are_read_over_http_after_an_id_or_a_time(settings):
    nc = await nats.connect(settings.nats_url)
    try:
        async with _web(settings) as web:
            _, token = await web.tokens.create(INSTANCE)
            await _publish(nc, INSTANCE, "a", "b")
            await _publish(nc, OTHER, "theirs")
            await _publish(nc, INSTANCE, "c")
            await _wait_stored(nc, 4)
            async with httpx.AsyncClient(base_url=web.url, timeout=30, headers={
                    "Authorization": f"Bearer {token}"}) as client:
                url = f"/v1/instances/{INSTANCE}/notices"
                everything = (await client.get(url)).json()
                first_two = (await client.get(url, params={"limit": 2})).json()
                after = (await client.get(url, params={
                    "after_id": everything["notices"][0]["id"]})).json()
                since = (await client.get(url, params={"since": "2000-01-01T00:00:00Z"})).json()
                future = (await client.get(url, params={"since": "2999-01-01T00:00:00Z"})).json()
                bad = await client.get(url, params={"since": "yesterday"})
                bad_id = await client.get(f"/v1/instances/{INSTANCE}/notifications",
                                          headers={"Last-Event-ID": "x1"})
                theirs = await client.get(f"/v1/instances/{OTHER}/notices")
    finally:
        await nc.close()
    assert [n["notice"]["text"] for n in everything["notices"]] == ["a", "b", "c"]
    assert everything["has_more"] is False
    assert [n["notice"]["text"] for n in first_two["notices"]] == ["a", "b"]
    assert first_two["has_more"] is True
    assert [n["notice"]["text"] for n in after["notices"]] == ["b", "c"]
    assert [n["notice"]["text"] for n in since["notices"]] == ["a", "b", "c"]
    assert future["notices"] == []
    assert bad.status_code == 400 and bad_id.status_code == 400
    assert theirs.status_code == 403
