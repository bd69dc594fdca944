"""The HTTP API end to end: publish, open, brief, stop, and what it refuses."""

from __future__ import annotations

import httpx
import pytest

from seedline_contracts.timeline import MAX_CONTENT_CHARS
from seedline_core.notices import wording_violations

from .conftest import INSTANCE, REPO

pytestmark = pytest.mark.servers


def entry(n: int, **over) -> dict:
    body = {"entry_id": f"http-{n}", "repo": REPO, "session_id": "csess_earlier",
            "kind": "chat_assistant", "content": f"earlier work number {n}",
            "at": "2026-08-17T10:00:00Z", "engine": "scripted"}
    body.update(over)
    return body


async def read_all(client, min_seq: int | None = None) -> dict:
    params = {"repo": REPO, "limit": 1000}
    if min_seq:
        params["min_seq"] = min_seq
    reply = await client.get(f"/v1/instances/{INSTANCE}/timeline", params=params)
    assert reply.status_code == 200, reply.text
    return reply.json()


async def test_publish_open_brief_and_stop_through_http(system, web):
    await system.start_runner()
    async with web.client(web.token) as client:
        one = await client.post(f"/v1/instances/{INSTANCE}/entries", json=entry(1))
        assert one.status_code == 202, one.text
        assert one.json()["entries"][0]["message"] == "Accepted for ingest."
        long = entry(3, content="x" * (MAX_CONTENT_CHARS + 5000))
        batch = await client.post(f"/v1/instances/{INSTANCE}/entries/batch",
                                  json={"entries": [entry(2), long]})
        assert batch.status_code == 202, batch.text
        receipts = batch.json()["entries"]
        assert [r["entry_id"] for r in receipts] == ["http-2", "http-3"]
        assert receipts[0]["cut_to"] is None
        assert receipts[1]["cut_to"] == MAX_CONTENT_CHARS
        assert "105,000 characters will be cut to its first 100,000" in receipts[1]["message"]

        async def three_entries():
            return len((await read_all(client))["entries"]) == 3

        await system.wait_for(three_entries)
        rows = (await read_all(client))["entries"]
        assert [r["entry_id"] for r in rows] == ["http-1", "http-2", "http-3"]
        assert rows[2]["truncated_from"] == MAX_CONTENT_CHARS + 5000

        opened = await client.post(f"/v1/instances/{INSTANCE}/conversations", json={
            "repo": REPO, "engine": "scripted", "node_id": "mac-mini-1",
            "instruction": "What were we doing?"})
        assert opened.status_code == 200, opened.text
        reply = opened.json()
        assert reply["ok"] and reply["outcome"] == "briefed"
        assert reply["continuity"]["reason_code"] == "past_window"
        assert not wording_violations(reply["notice"]["mcp"])
        session_id = reply["session_id"]

        brief = await client.get(f"/v1/conversations/{session_id}/brief")
        assert brief.status_code == 200, brief.text
        assert brief.json()["sha256"] == reply["brief"]["sha256"]
        assert "earlier work number 1" in brief.json()["text"]
        # The receipt says the engine was given it (1.2), in the reply and in the read.
        assert reply["brief"]["spent"] is True and brief.json()["spent"] is True

        live = await client.get(f"/v1/instances/{INSTANCE}/conversations")
        assert [c["session_id"] for c in live.json()["conversations"]] == [session_id]
        assert live.json()["conversations"][0]["outcome"] == "briefed"

        machines = (await client.get(f"/v1/instances/{INSTANCE}/machines")).json()["machines"]
        assert [(m["node_id"], m["label"], m["live"]) for m in machines] == [
            ("mac-mini-1", "Mac mini", [session_id])]

        stopped = await client.post(f"/v1/conversations/{session_id}/stop", json={})
        assert stopped.status_code == 200, stopped.text
        assert stopped.json() == {"stopped": True, "ok": True}
        live = await client.get(f"/v1/instances/{INSTANCE}/conversations")
        assert live.json()["conversations"] == []

        # A conversation offered no brief: the reply says why, and so does the brief's 404,
        # told apart from an id nobody has.
        fresh = (await client.post(f"/v1/instances/{INSTANCE}/conversations", json={
            "repo": REPO, "engine": "scripted", "node_id": "mac-mini-1",
            "force_fresh": True})).json()
        assert fresh["brief"] is None and fresh["no_brief"] == "force_fresh"
        none = await client.get(f"/v1/conversations/{fresh['session_id']}/brief")
        nobody = await client.get("/v1/conversations/csess_nobody/brief")
        assert none.status_code == 404 and nobody.status_code == 404
        assert none.json()["error"]["message"] == (
            f"No brief was offered to {fresh['session_id']}, because a fresh start was asked "
            "for, and a fresh start has no brief.")
        assert nobody.json()["error"]["message"].startswith(
            "No conversation csess_nobody was opened here; check the id")


async def test_refusals_say_what_to_fix_and_name_the_limits(system):
    import dataclasses

    from seedline_devtools.embedded import free_port
    from seedline_devtools.testing import running
    from seedline_web.app import create_app

    # A body limit above the NATS server's max_payload (4 MiB here), to reach that check.
    settings = dataclasses.replace(system.settings, web_port=free_port(),
                                   web_max_body_bytes=8 * 1024 * 1024)
    async with running(create_app(settings)) as app:
        _, token = await app.tokens.create(INSTANCE)
        async with httpx.AsyncClient(base_url=app.url, timeout=30,
                                     headers={"Authorization": f"Bearer {token}"}) as client:
            url = f"/v1/instances/{INSTANCE}/entries"
            huge = await client.post(url, json=entry(1, content="x" * 5_000_000))
            too_big = await client.post(url, content=b'{"entries": [' + b" " * 9_000_000 + b"]}")
            bad_at = await client.post(url, json=entry(2, at="yesterday"))
            bad_kind = await client.post(f"{url}/batch", json={"entries": [
                entry(3), entry(4, kind="speech")]})
            not_utf8 = await client.post(url, content=b"\xff\xfe{}")
            empty = await client.post(f"{url}/batch", json={"entries": []})
            nothing_published = await read_all(client)
    assert huge.status_code == 413
    assert "max_payload of 4,194,304 bytes" in huge.json()["error"]["message"]
    assert too_big.status_code == 413
    assert "limit of 8,388,608 bytes (SEEDLINE_WEB_MAX_BODY_BYTES)" in too_big.json()["error"][
        "message"]
    # The rules of the API's document are the ones enforced, and the message names the field.
    assert bad_at.status_code == 400 and "at must be an RFC 3339 time" in bad_at.json()[
        "error"]["message"]
    assert bad_kind.status_code == 400
    assert "Invalid enum value 'speech' - at `entries[1].kind`" in bad_kind.json()["error"][
        "message"]
    assert not_utf8.status_code == 400 and not_utf8.json()["error"]["code"] == "not_json"
    assert empty.status_code == 400 and "length >= 1 - at `entries`" in empty.json()["error"][
        "message"]
    # A refused batch publishes none of its entries.
    assert nothing_published["entries"] == []
    for reply in (huge, too_big, bad_at, bad_kind, not_utf8, empty):
        assert not wording_violations(reply.json()["error"]["message"])


async def test_metrics_count_answers_by_route_never_by_id(system, web):
    async with web.client(web.token) as client:
        await client.get("/v1/conversations/csess_secret_id/brief")
        await client.get(f"/v1/instances/{INSTANCE}/timeline", params={"repo": REPO})
        metrics = (await client.get("/metrics")).text
    assert 'route="/v1/conversations/{session_id}/brief",status="404"' in metrics
    assert 'route="/v1/instances/{instance_id}/timeline",status="200"' in metrics
    assert "csess_secret_id" not in metrics and INSTANCE not in metrics
    assert "seedline_web_notification_streams 0.0" in metrics
