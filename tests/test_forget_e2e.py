"""Forgetting an instance (CONTRACT.md Conventions, Erasure, 1.2): while another instance
keeps publishing, the forgotten one is gone from reads, briefs, a rebuild and its machine,
and the other loses nothing."""

from __future__ import annotations

import asyncio
import json

import psycopg
import pytest

from seedline_contracts import subjects
from seedline_contracts.times import now_text
from seedline_platform.erasure import erasures
from seedline_platform.sealing import KvKeyStore
from seedline_continuity_resolver.rebuild import rebuild_conversations
from seedline_timeline_writer.rebuild import rebuild_timeline

pytestmark = pytest.mark.servers

GONE, KEPT = "bd43f4de", "c0ffee42"
REPO = "apps/chess-academy"


def entry(instance: str, n: int) -> dict:
    return {"entry_id": f"{instance}-{n}", "instance_id": instance, "repo": REPO,
            "session_id": f"csess_{instance}", "kind": ("chat_user", "chat_assistant")[n % 2],
            "content": f"{instance} says {n}", "at": now_text(), "engine": "scripted"}


async def read_all(system, instance: str) -> list[dict]:
    reply = await system.request(subjects.API_TIMELINE_READ, {
        "instance_id": instance, "repo": REPO, "limit": 1000})
    assert reply["ok"], reply
    return reply["entries"]


async def rows_of(system, sql: str, instance: str) -> int:
    async with await psycopg.AsyncConnection.connect(system.settings.database_url) as conn:
        cur = await conn.execute(sql, (instance,))
        return int((await cur.fetchone())[0])


async def raw_stream(js, stream: str) -> list[bytes]:
    """Every message body a stream holds now, as stored."""
    from seedline_platform.replay import last_seq, replay

    end = await last_seq(js, stream)
    return [m.data for batch in [b async for b in replay(js, stream, ">", 1, end)] for m in batch]


async def test_a_forgotten_instance_is_gone_and_the_other_loses_nothing(system):
    await system.start_runner()
    for n in range(20):
        for instance in (GONE, KEPT):
            await system.append(n, **entry(instance, n))
    # The instruction goes into the launch plan of the session events too: sealed there.
    opened = {i: await system.open(instance_id=i, instruction=f"{i} says carry on")
              for i in (GONE, KEPT)}
    assert all(reply["ok"] and reply["brief"] for reply in opened.values()), opened

    js = system.nc.jetstream()
    published: list[str] = []

    async def keep_publishing() -> None:  # the other instance under load meanwhile
        for n in range(20, 220):
            body = entry(KEPT, n)
            await js.publish(subjects.INGEST_TIMELINE, json.dumps(body).encode(),
                             headers={"Nats-Msg-Id": body["entry_id"]})
            published.append(body["content"])

    # Plain text of it elsewhere: a rejected input (an unknown kind) and a notice.
    bad = {**entry(GONE, 99), "kind": "no_such_kind", "content": f"{GONE} rejected words"}
    await js.publish(subjects.INGEST_TIMELINE, json.dumps(bad).encode())
    await system.nc.publish(subjects.notify_subject(GONE), json.dumps(
        {"kind": "not_woken", "repo": REPO, "text": f"{GONE} notice words", "at": now_text()}
    ).encode())
    await system.nc.publish(subjects.notify_subject(KEPT), json.dumps(
        {"kind": "not_woken", "repo": REPO, "text": f"{KEPT} notice words", "at": now_text()}
    ).encode())

    async def rejected_and_noticed():
        return (GONE.encode() in b"".join(await raw_stream(js, subjects.REJECTED_STREAM))
                and len(await raw_stream(js, subjects.NOTICES_STREAM)) >= 2)
    await system.wait_for(rejected_and_noticed, timeout=30)
    assert any(GONE.encode() in body for body in await raw_stream(js, subjects.INGEST_STREAM))

    live = {i: reply["session_id"] for i, reply in opened.items()}
    assert set(live.values()) <= set(system.hosted()["mac-mini-1"])

    load = asyncio.create_task(keep_publishing())
    await asyncio.sleep(0.2)
    gone_entries = len(await read_all(system, GONE))
    reply = await system.request(subjects.API_INSTANCES_FORGET,
                                 {"instance_id": GONE, "reason": "the team left", "by": "ops"})
    await load
    assert reply == {"ok": True, "entries": gone_entries}
    # Its live conversation was stopped on the machine before the forget answered; the
    # other instance's runs on.
    assert system.hosted()["mac-mini-1"] == [live[KEPT]]

    # Reads and briefs: nothing of the forgotten instance; all of the other.
    assert await read_all(system, GONE) == []
    gone_brief = await system.request(subjects.API_BRIEFS_GET,
                                      {"session_id": opened[GONE]["session_id"]})
    assert gone_brief["ok"] is False and gone_brief["error"]["code"] == "not_found"

    expected = {f"{KEPT} says {n}" for n in range(20)} | set(published)

    async def kept_all_there():
        contents = [row["content"] for row in await read_all(system, KEPT)]
        return expected <= set(contents) and contents
    contents = await system.wait_for(kept_all_there, timeout=30)
    assert not any(GONE in content for content in contents)
    kept_brief = await system.request(subjects.API_BRIEFS_GET,
                                      {"session_id": opened[KEPT]["session_id"]})
    assert kept_brief["ok"] and f"{KEPT} says 19" in kept_brief["text"]

    # The key is destroyed, the erasure recorded, every projection's rows dropped.
    assert await KvKeyStore(js).ring(GONE, create=False) is None
    assert await KvKeyStore(js).ring(KEPT, create=False) is not None
    record = (await erasures(js))[GONE]
    assert (record.entries, record.by, record.reason) == (gone_entries, "ops", "the team left")

    async def projections_empty():
        counts = [
            await rows_of(system, f"SELECT count(*) FROM {table} WHERE instance_id = %s", GONE)
            for table in ("timeline_entries", "runner_launches", "conversations",
                          "open_requests", "gateway_conversations", "last_opens",
                          "not_woken_told")
        ]
        counts.append(await rows_of(
            system, "SELECT count(*) FROM briefs WHERE text LIKE '%%' || %s || ':%%'", GONE))
        return not any(counts)
    await system.wait_for(projections_empty, timeout=30)
    assert await rows_of(system, "SELECT count(*) FROM briefs WHERE text LIKE '%%' || %s || ':%%'",
                         KEPT) == 1

    # Nothing of it is left in plain text in any stream; the other's messages stay.
    for stream in (subjects.INGEST_STREAM, subjects.REJECTED_STREAM, subjects.NOTICES_STREAM,
                   subjects.TIMELINE_STREAM, subjects.SESSIONS_STREAM):
        bodies = await raw_stream(js, stream)
        assert not [b for b in bodies if f"{GONE} says".encode() in b
                    or f"{GONE} rejected".encode() in b or f"{GONE} notice".encode() in b], stream
    notices = b"".join(await raw_stream(js, subjects.NOTICES_STREAM))
    assert f"{KEPT} notice words".encode() in notices
    assert any(f"{KEPT} says".encode() in b for b in await raw_stream(js, subjects.INGEST_STREAM))

    # A rebuild from the stream brings nothing of it back, and changes nothing else.
    result = await rebuild_timeline(system.settings, None)
    assert result.before_digest == result.after_digest
    assert await rows_of(system, "SELECT count(*) FROM timeline_entries WHERE instance_id = %s",
                         GONE) == 0
    after = [row["content"] for row in await read_all(system, KEPT)]
    assert set(contents) <= set(after)

    # The other instance goes on as before.
    again = await system.open(instance_id=KEPT, instruction="And now?")
    assert again["ok"] and again["brief"]["rows"] > 0


async def test_a_forget_that_cannot_stop_the_live_conversations_forgets_nothing_yet(system):
    if system.copies:
        pytest.skip("needs no runner-gateway running: SEEDLINE_TEST_COPIES keeps a copy up")
    await system.start_runner()
    await system.append(0, **entry(GONE, 0))
    opened = await system.open(instance_id=GONE, instruction="carry on")
    assert opened["ok"], opened
    js = system.nc.jetstream()
    forget = {"instance_id": GONE, "reason": "the team left", "by": "ops"}

    async def while_the_gateway_is_down():
        reply = await system.request(subjects.API_INSTANCES_FORGET, forget)
        assert reply["ok"] is False and reply["error"]["code"] == "unavailable", reply
        assert "runner-gateway is not running" in reply["error"]["message"]
        assert "ask again" in reply["error"]["message"]
        assert GONE not in await erasures(js)
        assert await KvKeyStore(js).ring(GONE, create=False) is not None
        assert system.hosted()["mac-mini-1"] == [opened["session_id"]]
    await system.restart_gateway(while_the_gateway_is_down)

    reply = await system.request(subjects.API_INSTANCES_FORGET, forget)
    assert reply["ok"], reply
    assert system.hosted()["mac-mini-1"] == []



async def test_what_a_message_sent_during_the_forget_wakes_does_not_outlive_it(system):
    """A person's message that lands while the instance is being forgotten (inside the
    erasure's `through_seq`) may wake a conversation after the live ones were listed to be
    stopped: that one is stopped too, and no row of it is left to make a rebuild differ."""
    await system.start_runner()
    other_repo = "apps/other"
    live = await system.open(instance_id=GONE, instruction="carry on")
    earlier = await system.open(instance_id=GONE, repo=other_repo, instruction="look")
    assert live["ok"] and earlier["ok"], (live, earlier)
    stopped = await system.request(subjects.API_SESSIONS_STOP,
                                   {"session_id": earlier["session_id"], "reason": "done"})
    assert stopped["ok"], stopped

    # The machine holds the forget's stop of the live conversation until a message to the
    # other repo has woken a conversation there.
    runner = system.runners["mac-mini-1"][0]
    real_end, holding, release = runner._end, asyncio.Event(), asyncio.Event()

    async def held_end(session_id: str):
        if session_id == live["session_id"]:
            holding.set()
            await release.wait()
        return await real_end(session_id)
    runner._end = held_end

    forget = asyncio.create_task(system.request(
        subjects.API_INSTANCES_FORGET,
        {"instance_id": GONE, "reason": "the team left", "by": "ops"}, timeout=60))
    await asyncio.wait_for(holding.wait(), 15)
    await system.nc.jetstream().publish(subjects.INGEST_TIMELINE, json.dumps({
        **entry(GONE, 500), "repo": other_repo, "kind": "chat_user",
        "session_id": earlier["session_id"], "content": f"{GONE} says wake up"}).encode())

    async def woken():
        return [s for s in system.hosted()["mac-mini-1"] if s != live["session_id"]]
    (woke,) = await system.wait_for(woken, timeout=30)
    release.set()
    reply = await forget
    assert reply["ok"], reply
    assert (await erasures(system.nc.jetstream()))[GONE].through_seq >= 1

    async def nothing_runs():
        return system.hosted()["mac-mini-1"] == []
    await system.wait_for(nothing_runs, timeout=30)

    async def no_rows_left():
        return not any([
            *[await rows_of(system, f"SELECT count(*) FROM {table} WHERE instance_id = %s", GONE)
              for table in ("conversations", "open_requests", "gateway_conversations",
                            "last_opens", "runner_launches")],
            await rows_of(system, "SELECT count(*) FROM briefs WHERE text LIKE '%%' || %s"
                          " || ':%%'", GONE)])
    await system.wait_for(no_rows_left, timeout=30)
    stops = [e for e in await system.session_events("stopped") if e["session_id"] == woke]
    assert [e["reason"] for e in stops][:1] == ["forgotten"], stops
    before, after = await rebuild_conversations(system.settings)
    assert before == after
