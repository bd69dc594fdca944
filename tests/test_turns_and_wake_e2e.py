"""Turns, idle stops and waking on a person's message, end to end."""

from __future__ import annotations

import asyncio
import json
from datetime import timedelta

import pytest

from seedline_contracts import subjects
from seedline_core.notices import wording_violations
from seedline_contracts.times import now_text, utc_now
from seedline_runner.engines.scripted import ScriptedEngine

pytestmark = pytest.mark.servers


async def say(system, n: int, text: str, session_id: str = "csess_person", at: str | None = None) -> None:
    body = {"entry_id": f"user-{n}", "instance_id": "bd43f4de", "repo": "apps/chess-academy",
            "session_id": session_id, "kind": "chat_user", "content": text, "at": at or now_text()}
    await system.nc.jetstream().publish(subjects.INGEST_TIMELINE, json.dumps(body).encode(),
                                        headers={"Nats-Msg-Id": body["entry_id"]})


async def test_turns_reach_the_live_conversation_in_order_once_each(system):
    engine = await system.start_runner()
    opened = await system.open()
    assert opened["ok"], opened
    for n in range(1, 11):
        await say(system, n, f"turn {n}")
    await say(system, 5, "turn 5 again, same entry id")  # a duplicate entry is no new turn

    async def all_turns():
        return len(engine.prompts) >= 10 and engine.prompts

    prompts = await system.wait_for(all_turns)
    await asyncio.sleep(0.5)
    assert [p for _, p in engine.prompts] == [f"turn {n}" for n in range(1, 11)]
    assert {c for c, _ in prompts} == {opened["session_id"]}


async def test_reap_then_a_new_message_wakes_a_briefed_conversation(system):
    # An engine that never resumes: the woken conversation must then be briefed.
    engine = await system.start_runner(engine=ScriptedEngine(resumable=False))
    await system.append(1)
    opened = await system.open()
    assert opened["ok"], opened
    notices = []

    async def on_notice(msg):
        notices.append(json.loads(msg.data))

    await system.nc.subscribe(subjects.notify_subject("bd43f4de"), cb=on_notice)
    await system.gateway.parts.reaper.stop_idle(now=utc_now() + timedelta(hours=7))
    await system.wait_for(lambda: _truthy(notices))
    notice = notices[0]
    assert notice["kind"] == "stopped_idle" and notice["session_id"] == opened["session_id"]
    assert "next message" in notice["text"] and not wording_violations(notice["text"])
    assert len(await system.session_events("reaped")) == 1
    assert (await system.request(subjects.API_SESSIONS_LIST, {}))["conversations"] == []

    await say(system, 1, "Where were we with castling?")
    woken = await system.wait_for(lambda: _woken(system, opened["session_id"]))
    reply = woken["reply"]
    assert reply["outcome"] in ("briefed", "resume_unconfirmed_briefed")
    assert reply["seeded"] is True and reply["resumed"] is False
    assert woken["plan"]["instruction"] == "Where were we with castling?"
    brief = await system.request(subjects.API_BRIEFS_GET, {"session_id": reply["session_id"]})
    assert "Where were we with castling?" not in brief["text"]  # the brief ends before it

    async def engine_answered():
        rows = await system.request(subjects.API_TIMELINE_READ, {
            "instance_id": "bd43f4de", "repo": "apps/chess-academy",
            "session_id": reply["session_id"]})
        return [r for r in rows["entries"] if r["kind"] == "chat_assistant"]

    answers = await system.wait_for(engine_answered)
    assert reply["brief"]["sha256"] in answers[0]["content"]
    # The message reached the machine once, as the launch's instruction, not again as a turn.
    await asyncio.sleep(0.5)
    assert sum("Where were we with castling?" in p for _, p in engine.prompts) == 1


async def test_a_backfilled_message_wakes_nothing(system):
    await system.start_runner()
    opened = await system.open()
    await system.gateway.parts.reaper.stop_idle(now=utc_now() + timedelta(hours=7))
    await say(system, 1, "old history", at="2026-01-01T00:00:00Z")
    await say(system, 2, "a marker written now", session_id="csess_marker")
    await asyncio.sleep(2)
    opens = await system.session_events("opened")
    assert len(opens) == 2  # the first open, and the wake by the marker only
    assert opens[1]["plan"]["instruction"] == "a marker written now"
    assert opened["ok"]


async def _truthy(value):
    return value


async def _woken(system, old_session_id):
    for event in await system.session_events("opened"):
        if event["session_id"] != old_session_id and event["plan"]["wake_seq"]:
            return event
    return None


async def test_turns_are_delivered_in_order_once_across_a_gateway_restart(system):
    engine = await system.start_runner()
    opened = await system.open()
    assert opened["ok"], opened
    for n in range(1, 6):
        await say(system, n, f"turn {n}")
    await system.wait_for(lambda: _at_least(engine, 5))

    async def while_down():
        for n in range(6, 11):
            await say(system, n, f"turn {n}")

    await system.restart_gateway(while_down)
    for n in range(11, 14):
        await say(system, n, f"turn {n}")
    await system.wait_for(lambda: _at_least(engine, 13))
    await asyncio.sleep(0.5)
    assert [p for _, p in engine.prompts] == [f"turn {n}" for n in range(1, 14)]


async def _at_least(engine, n):
    return len(engine.prompts) >= n


async def test_a_machine_that_vanishes_with_a_live_conversation_is_reported_by_its_label(system):
    await system.start_runner("mac-mini-1", "Mac mini")
    opened = await system.open()
    assert opened["ok"], opened
    notices = []

    async def on_notice(msg):
        notices.append(json.loads(msg.data))

    await system.nc.subscribe(subjects.notify_subject("bd43f4de"), cb=on_notice)
    await system.stop_runner("mac-mini-1")  # its presence key is deleted: seen on the watch
    await system.wait_for(lambda: _truthy(notices))
    (notice,) = notices
    assert notice["kind"] == "runner_offline" and notice["node_id"] == "mac-mini-1"
    assert notice["session_id"] == opened["session_id"]
    assert notice["text"].startswith("Your Mac mini is offline.")
    assert not wording_violations(notice["text"])
    assert (await system.request(subjects.API_SESSIONS_LIST, {}))["conversations"] == []
    stopped = await system.session_events("stopped")
    assert [e["reason"] for e in stopped] == ["runner_offline"]
