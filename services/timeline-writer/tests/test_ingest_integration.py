"""The timeline-writer against a real nats-server and a real Postgres."""

from __future__ import annotations

import asyncio
import base64
import json

import nats
import pytest

from seedline_contracts import subjects
from seedline_devtools.testing import request, running
from seedline_devtools.testing_load import ingest_taken
from seedline_timeline_writer.app import create_app

pytestmark = pytest.mark.servers


def entry(n: int, **over) -> dict:
    body = {
        "entry_id": f"e-{n}",
        "instance_id": "bd43f4de",
        "repo": "apps/chess-academy",
        "session_id": "csess_1",
        "kind": "chat_user",
        "content": f"message {n}",
        "at": "2026-08-17T10:00:00Z",
    }
    body.update(over)
    return body


async def publish(js, body, msg_id: str | None = None) -> None:
    data = body if isinstance(body, bytes) else json.dumps(body).encode()
    headers = {"Nats-Msg-Id": msg_id} if msg_id else None
    await js.publish(subjects.INGEST_TIMELINE, data, headers=headers)


async def read_all(nc, **query) -> list[dict]:
    out: list[dict] = []
    before = None
    while True:
        reply = await request(nc, subjects.API_TIMELINE_READ, {
            "instance_id": "bd43f4de", "repo": "apps/chess-academy", "before_seq": before,
            "limit": query.pop("limit", 100), **query})
        assert reply["ok"], reply
        out = reply["entries"] + out
        if not reply["has_more"]:
            return out
        before = reply["entries"][0]["seq"]


async def wait_for(predicate, timeout: float = 10.0):
    deadline = asyncio.get_running_loop().time() + timeout
    while True:
        value = await predicate()
        if value:
            return value
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError("condition not met in time")
        await asyncio.sleep(0.05)


async def rejected(js) -> list[dict]:
    try:
        info = await js.stream_info(subjects.REJECTED_STREAM)
    except Exception:
        return []
    out = []
    for seq in range(1, info.state.last_seq + 1):
        msg = await js.get_msg(subjects.REJECTED_STREAM, seq)
        out.append(json.loads(msg.data))
    return out


async def test_published_entry_is_readable_with_its_seq(settings):
    async with running(create_app(settings)):
        nc = await nats.connect(settings.nats_url)
        js = nc.jetstream()
        await publish(js, entry(1), "e-1")
        rows = await wait_for(lambda: read_all(nc))
        assert [r["entry_id"] for r in rows] == ["e-1"]
        stored = await js.get_msg(subjects.TIMELINE_STREAM, rows[0]["seq"])
        assert json.loads(stored.data)["entry_id"] == "e-1"
        assert stored.subject == "seedline.timeline.bd43f4de.apps~2Fchess-academy.csess_1.chat_user"
        assert rows[0]["at"] == "2026-08-17T10:00:00Z" and rows[0]["truncated_from"] is None
        assert (await js.stream_info(subjects.TIMELINE_STREAM)).config.allow_atomic
        await nc.close()


async def test_same_entry_id_is_one_entry_even_after_the_duplicate_window(settings):
    app = create_app(settings)
    async with running(app):
        nc = await nats.connect(settings.nats_url)
        js = nc.jetstream()
        await publish(js, entry(1), "e-1")
        await wait_for(lambda: read_all(nc))
        # No Nats-Msg-Id: JetStream's window cannot catch it, the projection must.
        await publish(js, entry(1, content="a different body"))
        reply = await request(nc, subjects.API_TIMELINE_APPEND, entry(1, content="third"))
        assert reply["ok"] and reply["duplicate"] is True
        await publish(js, entry(2), "e-2")
        rows = await wait_for(lambda: _len_at_least(nc, 2))
        assert [r["entry_id"] for r in rows] == ["e-1", "e-2"]
        assert rows[0]["content"] == "message 1"
        assert reply["seq"] == rows[0]["seq"]
        info = await js.stream_info(subjects.TIMELINE_STREAM)
        assert info.state.messages == 2
        await nc.close()


async def _len_at_least(nc, n):
    rows = await read_all(nc)
    return rows if len(rows) >= n else None


async def test_long_content_is_cut_to_100000_with_truncated_from(settings):
    async with running(create_app(settings)):
        nc = await nats.connect(settings.nats_url)
        reply = await request(nc, subjects.API_TIMELINE_APPEND, entry(1, content="é" * 250_000))
        assert reply["ok"], reply
        rows = (await request(nc, subjects.API_TIMELINE_READ, {
            "instance_id": "bd43f4de", "repo": "apps/chess-academy", "min_seq": reply["seq"]}))["entries"]
        assert len(rows[0]["content"]) == 100_000 and rows[0]["truncated_from"] == 250_000
        await nc.close()


MALFORMED = [
    (b"not json at all", "not_json"),
    (b"\xff\xfe\x00garbage", "not_json"),
    ('{"entry_id": "x", "content": "\xe9"}'.encode("latin-1"), "not_json"),
    (json.dumps(entry(90, content=5)).encode(), "invalid_entry"),
    (json.dumps(entry(91, kind="shout")).encode(), "invalid_entry"),
    (json.dumps(entry(92, entry_id="")).encode(), "invalid_entry"),
    (json.dumps(entry(93, entry_id="x" * 129)).encode(), "invalid_entry"),
    (json.dumps(entry(94, entry_id="has space")).encode(), "invalid_entry"),
    (json.dumps(entry(95, repo="")).encode(), "bad_token"),
    (json.dumps(entry(96, repo="r" * 300)).encode(), "bad_token"),
    (json.dumps(entry(97, at="yesterday")).encode(), "invalid_entry"),
    (json.dumps({k: v for k, v in entry(98).items() if k != "session_id"}).encode(), "invalid_entry"),
    (b"[1, 2, 3]", "invalid_entry"),
]


async def test_malformed_input_is_rejected_with_a_reason_and_valid_entries_around_it_stored(settings):
    async with running(create_app(settings)):
        nc = await nats.connect(settings.nats_url)
        js = nc.jetstream()
        await publish(js, entry(1))
        for raw, _ in MALFORMED:
            await publish(js, raw)
        await publish(js, entry(2))
        rows = await wait_for(lambda: _len_at_least(nc, 2))
        assert [r["entry_id"] for r in rows] == ["e-1", "e-2"]
        records = await wait_for(lambda: _rejected_at_least(js, len(MALFORMED)))
        assert [r["reason_code"] for r in records] == [code for _, code in MALFORMED]
        for record, (raw, _) in zip(records, MALFORMED):
            assert record["message"]
            original = raw.decode() if record["raw_encoding"] == "utf-8" else None
            if original is None:
                assert base64.b64decode(record["raw"]) == raw
            else:
                assert record["raw"] == original
            assert record["ingest_seq"] >= 1
        assert await ingest_taken(js)  # every message acknowledged
        await nc.close()


async def _rejected_at_least(js, n):
    records = await rejected(js)
    return records if len(records) >= n else None


async def test_repo_reads_tag_sessions_and_paging_returns_each_entry_once(settings):
    async with running(create_app(settings)):
        nc = await nats.connect(settings.nats_url)
        js = nc.jetstream()
        for n in range(1, 251):
            await publish(js, entry(n, session_id=f"csess_{n % 3}"))
        await publish(js, entry(999, repo="another/repo"))
        await wait_for(lambda: _len_at_least(nc, 250))
        paged = await read_all(nc, limit=7)
        assert [r["entry_id"] for r in paged] == [f"e-{n}" for n in range(1, 251)]
        assert [r["seq"] for r in paged] == sorted({r["seq"] for r in paged})
        assert {r["session_id"] for r in paged} == {"csess_0", "csess_1", "csess_2"}
        one = await request(nc, subjects.API_TIMELINE_READ, {
            "instance_id": "bd43f4de", "repo": "apps/chess-academy", "session_id": "csess_1", "limit": 2000})
        assert len(one["entries"]) == 84 and not one["has_more"]
        assert all(r["session_id"] == "csess_1" for r in one["entries"])
        unknown = await request(nc, subjects.API_TIMELINE_READ, {"instance_id": "nope", "repo": "x"})
        assert unknown == {"entries": [], "has_more": False, "ok": True}
        bad = await request(nc, subjects.API_TIMELINE_READ, b"{")
        assert bad["ok"] is False and bad["error"]["code"] == "invalid_request"
        late = await request(nc, subjects.API_TIMELINE_READ, {
            "instance_id": "bd43f4de", "repo": "x", "min_seq": 10_000}, timeout=10)
        assert late["error"]["code"] == "not_yet_visible"
        await nc.close()


async def test_a_timeline_stream_without_atomic_batches_is_written_message_by_message(settings):
    import dataclasses

    from seedline_contracts import streams
    from seedline_platform import natsio

    nc = await nats.connect(settings.nats_url)
    js = nc.jetstream()
    await natsio.ensure_streams(js, [dataclasses.replace(streams.TIMELINE, atomic_batches=False)])
    async with running(create_app(settings)):
        for n in range(1, 6):
            await publish(js, entry(n), f"e-{n}")
        rows = await wait_for(lambda: _len_at_least(nc, 5))
        assert [r["entry_id"] for r in rows] == [f"e-{n}" for n in range(1, 6)]
        assert not (await js.stream_info(subjects.TIMELINE_STREAM)).config.allow_atomic
    await nc.close()


async def _record_launch(js, session_id: str, node_id: str, instance_id="bd43f4de",
                         repo="apps/chess-academy") -> None:
    """What the seed-composer records before the gateway launches on `node_id`."""
    from seedline_contracts.codec import encode
    from seedline_contracts.events import LaunchPlan, SeedComposed
    from seedline_contracts.sessions import Continuity

    plan = LaunchPlan(instance_id, repo, "scripted", node_id,
                      Continuity("fresh", None, "no_previous", "there is none"), None, None, False)
    event = SeedComposed(session_id=session_id, at="2026-12-01T10:00:00Z", brief=None, plan=plan)
    await js.publish(subjects.session_event_subject(session_id, "seed_composed"), encode(event))


async def _rejected(js) -> list[dict]:
    info = await js.stream_info(subjects.REJECTED_STREAM)
    return [json.loads((await js.get_msg(subjects.REJECTED_STREAM, s)).data)
            for s in range(1, info.state.last_seq + 1)]


async def test_runner_scoped_ingest_takes_only_the_conversations_launched_on_that_machine(settings):
    async with running(create_app(settings)):
        nc = await nats.connect(settings.nats_url)
        js = nc.jetstream()
        mac = subjects.ingest_runner_subject("mac-mini-1")
        # Recorded a moment before the machine's first output: read before refusing.
        await _record_launch(js, "csess_live", "mac-mini-1")
        await js.publish(mac, json.dumps(entry(1, session_id="csess_live", kind="command")).encode())
        await js.publish(mac, json.dumps(entry(2, session_id="csess_other")).encode())
        await js.publish(mac, json.dumps(entry(3, session_id="csess_live")).encode())  # chat_user
        await js.publish(subjects.ingest_runner_subject("linux-box"),
                         json.dumps(entry(4, session_id="csess_live", kind="terminal")).encode())
        await js.publish(mac, json.dumps(entry(5, session_id="csess_live", instance_id="other",
                                               kind="terminal")).encode())
        await js.publish(subjects.INGEST_TIMELINE, json.dumps(entry(6)).encode())
        rows = await wait_for(lambda: _read_when(nc, 2))
        assert [r["entry_id"] for r in rows] == ["e-1", "e-6"]
        rejected = await wait_for(lambda: _rejected_when(js, 4))
        assert [r["reason_code"] for r in rejected] == ["not_permitted"] * 4
        assert "chat_user" in rejected[1]["message"]
        await nc.close()


async def _read_when(nc, count: int):
    rows = await read_all(nc)
    return rows if len(rows) >= count else None


async def _rejected_when(js, count: int):
    rows = await _rejected(js)
    return rows if len(rows) >= count else None


async def test_an_at_in_year_one_or_a_nul_in_a_read_are_input_errors_not_outages(settings):
    async with running(create_app(settings)):
        nc = await nats.connect(settings.nats_url)
        reply = await request(nc, subjects.API_TIMELINE_APPEND, entry(1, at="0001-01-01T00:00:00Z"))
        assert reply["error"]["code"] == "invalid_entry" and "at" in reply["error"]["message"]
        for field in ("repo", "instance_id", "session_id"):
            query = {"instance_id": "bd43f4de", "repo": "apps/x", field: "a\x00b"}
            reply = await request(nc, subjects.API_TIMELINE_READ, query)
            assert reply["error"]["code"] == "invalid_request", reply
            assert field in reply["error"]["message"]
        await nc.close()


async def test_an_ingest_stream_made_as_a_work_queue_is_still_taken_message_by_message(settings):
    # A platform that ran before ingest kept messages by age has a work-queue stream,
    # whose retention cannot be changed in place: its consumer acknowledges each message
    # (AckPolicy.ALL is refused there), and each acknowledged message leaves the stream.
    from dataclasses import replace

    from seedline_contracts import streams
    from seedline_platform import natsio

    nc = await nats.connect(settings.nats_url)
    js = nc.jetstream()
    await natsio.ensure_streams(js, [replace(streams.INGEST, retention="workqueue", max_age=0.0)])
    async with running(create_app(settings)):
        for n in (1, 2, 3):
            await publish(js, entry(n), f"e-{n}")
        rows = await wait_for(lambda: _len_at_least(nc, 3))
        assert [r["entry_id"] for r in rows] == ["e-1", "e-2", "e-3"]
        await wait_for(lambda: ingest_taken(js))
        info = await js.stream_info(subjects.INGEST_STREAM)
        assert info.config.retention == "workqueue" and info.state.messages == 0
    await nc.close()


async def test_the_launches_consumer_an_earlier_writer_read_is_removed_at_start(settings):
    from nats.js.api import ConsumerConfig
    from nats.js.errors import NotFoundError

    from seedline_platform import natsio

    nc = await nats.connect(settings.nats_url)
    js = nc.jetstream()
    await natsio.ensure_streams(js)
    await js.add_consumer(subjects.SESSIONS_STREAM, ConsumerConfig(
        durable_name="timeline-writer-launches",
        filter_subject=subjects.session_event_filter("seed_composed")))
    async with running(create_app(settings)):
        with pytest.raises(NotFoundError):
            await js.consumer_info(subjects.SESSIONS_STREAM, "timeline-writer-launches")
    await nc.close()
