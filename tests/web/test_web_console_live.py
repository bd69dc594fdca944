"""A console page's live stream over plain HTTP: it sends what happens to the page's
conversation, each item once with its place, and a browser that reconnects with
`Last-Event-ID` gets everything after that event and nothing before it."""

from __future__ import annotations

import asyncio
import json

import httpx
import pytest

from .conftest import INSTANCE, REPO, console_login

pytestmark = pytest.mark.servers


async def _events(browser: httpx.AsyncClient, url: str, until, headers=None) -> list[dict]:
    """The stream's events ({id, event, data}) until `until(events)` holds."""
    found: list[dict] = []
    current: dict = {}

    async def read() -> None:
        async with browser.stream("GET", url, headers=headers or {}) as reply:
            assert reply.status_code == 200, await reply.aread()
            async for line in reply.aiter_lines():
                if not line:
                    if "event" in current:
                        found.append(dict(current))
                        if until(found):
                            return
                    current.clear()
                elif line.startswith(("id:", "event:", "data:")):
                    key, _, value = line.partition(": ")
                    current[key.rstrip(":")] = json.loads(value) if key == "data" else value

    await asyncio.wait_for(read(), 30)
    return found


def _items(events: list[dict]) -> list[dict]:
    return [e for e in events if e["event"] == "item"]


async def test_the_live_stream_resumes_after_the_last_event_id_and_repeats_nothing(system, web):
    await system.start_runner()
    async with web.client(web.token) as client:
        opened = (await client.post(f"/v1/instances/{INSTANCE}/conversations", json={
            "repo": REPO, "engine": "scripted", "node_id": "mac-mini-1",
            "instruction": "Add castling."})).json()
    sid = opened["session_id"]
    async with httpx.AsyncClient(base_url=web.url, timeout=30) as browser:
        assert (await browser.get(f"/console/live?conversation={sid}&after=0.0.0")
                ).status_code == 401
        await console_login(browser, web.token)
        url = f"/console/live?conversation={sid}&after=0.0.0"
        # From the start: its events (decided, composed, opened, ...) and its entries, the
        # engine's reply (the second) among them: the streams are followed side by side, so
        # a reply written after this read could come first after the reconnect below.
        first = await _events(browser, url, lambda found: any(
            e["event"] == "item" and e["data"]["id"] == "en-2" for e in found)
            and any(e["event"] == "state" and e["data"]["state"] == "live" for e in found))
        items = _items(first)
        ids = [e["data"]["id"] for e in items]
        positions = [tuple(map(int, e["id"].split("."))) for e in items]
        assert positions == sorted(positions)
        # An item sent again is the same item, shown again in its place: a brief's receipt
        # once the machine answered (so the page never shows one twice).
        assert {"ev-1", "en-1"} <= set(ids) and len(ids) <= len(set(ids)) + 2
        assert "seedline-sealed" not in json.dumps(first)
        # A reconnect after the second item: what came after it, not it or the first.
        resume_at = items[1]["id"]
        again = await _events(browser, url, lambda found: len(_items(found)) >= 1,
                              headers={"Last-Event-ID": resume_at})
        resent = [e["data"]["id"] for e in _items(again)]
        assert ids[0] not in resent and ids[1] not in resent
        assert resent[0] in ids[2:]
        # Nobody else's conversation, and a position that is no position, are refused.
        other = await browser.get("/console/live?conversation=csess_nope&after=0.0.0")
        bad = await browser.get(f"/console/live?conversation={sid}&after=x")
    assert other.status_code == 404 and "No conversation csess_nope" in other.text
    assert bad.status_code == 400
