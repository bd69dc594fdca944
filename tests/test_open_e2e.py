"""Opening conversations through all four services and a scripted runner."""

from __future__ import annotations

import hashlib
import json

import pytest

from seedline_contracts import subjects
from seedline_core.notices import wording_violations

pytestmark = pytest.mark.servers


async def test_open_with_no_history_is_fresh_without_a_brief(system):
    await system.start_runner()
    reply = await system.open(request_id="r-1")
    assert reply["ok"], reply
    assert reply["outcome"] == "fresh" and reply["brief"] is None
    assert reply["continuity"]["reason_code"] == "no_previous"
    assert reply["resumed"] is False and reply["seeded"] is False
    assert reply["notice"]["tone"] == "warning"
    for text in reply["notice"].values():
        assert not wording_violations(text)


async def test_open_on_a_repo_with_history_is_briefed_and_the_engine_got_that_brief(system):
    engine = await system.start_runner()
    seqs = [await system.append(n) for n in range(1, 6)]
    reply = await system.open(instruction="What were we doing?")
    assert reply["ok"], reply
    assert reply["outcome"] == "briefed"
    assert reply["brief"]["until_seq"] == seqs[-1] and reply["brief"]["rows"] == 5
    brief = await system.request(subjects.API_BRIEFS_GET, {"session_id": reply["session_id"]})
    assert hashlib.sha256(brief["text"].encode()).hexdigest() == reply["brief"]["sha256"]
    assert "was given a brief" in reply["notice"]["chat"]
    # The instruction is in the timeline of the new conversation, after the brief's end
    # (it goes through ingest like any entry, so it is readable a moment after the reply).
    async def conversation_rows():
        rows = await system.request(subjects.API_TIMELINE_READ, {
            "instance_id": "bd43f4de", "repo": "apps/chess-academy",
            "session_id": reply["session_id"]})
        return rows if rows["entries"] else None

    rows = await system.wait_for(conversation_rows)
    assert [r["content"] for r in rows["entries"]][:1] == ["What were we doing?"]
    assert rows["entries"][0]["seq"] > reply["brief"]["until_seq"]
    # The engine received the brief before the instruction, exactly once.
    await system.wait_for(lambda: _has_prompt(engine))
    prompts = [p for _, p in engine.prompts]
    assert len(prompts) == 1 and brief["text"] in prompts[0]
    assert prompts[0].index(brief["text"]) < prompts[0].index("What were we doing?")


async def _has_prompt(engine):
    return engine.prompts


async def test_same_request_id_twice_opens_once(system):
    await system.start_runner()
    first = await system.open(request_id="same")
    second = await system.open(request_id="same", engine="something-else")
    assert first == second
    assert len(await system.session_events("open_requested")) == 1


async def test_resume_lands_on_a_runner_that_resumes_and_the_brief_is_unread(system):
    engine = await system.start_runner()
    await system.append(1)
    # The engine's own store must hold the conversation for a resume to count (1.2).
    first = await system.open(instruction="add castling")
    assert first["ok"], first
    await system.wait_for(lambda: _has_prompt(engine))
    await system.append(2, session_id=first["session_id"], at=None, kind="command")
    second = await system.open()
    assert second["ok"], second
    assert second["continuity"]["mode"] == "resume"
    assert second["continuity"]["resume_from"] == first["session_id"]
    assert second["outcome"] == "resumed" and second["resumed"] is True and second["seeded"] is False
    assert second["notice"]["tone"] == "info"
    assert not any(
        engine_prompt_has_brief(p) for sid, p in engine.prompts if sid == second["session_id"]
    )


def engine_prompt_has_brief(prompt: str) -> bool:
    return "entry number" in prompt


async def test_clean_slate_offers_no_brief_and_reads_no_timeline(system):
    await system.start_runner()
    await system.append(1)
    reads = []
    # Every copy of the composer (SEEDLINE_TEST_COPIES): any of them may take the decision.
    for app in [system.composer, *system.copies]:
        composer = getattr(app.parts, "composer", None)
        if composer is None:
            continue
        reader = composer.reader
        original = reader.newest_first

        async def counting(*args, original=original, **kwargs):
            reads.append(args)
            return await original(*args, **kwargs)

        reader.newest_first = counting
    reply = await system.open(clean_slate=True)
    assert reply["ok"] and reply["brief"] is None and reply["outcome"] == "fresh"
    assert reads == []
    await system.open()
    assert len(reads) == 1


async def test_open_to_an_offline_machine_names_it_by_its_label(system):
    await system.start_runner()
    await system.stop_runner("mac-mini-1")
    reply = await system.open()
    assert reply == {"ok": False, "error": {"code": "runner_offline", "message": "Your Mac mini is offline."}}
    never_seen = await system.open(node_id="build-box-7")
    assert never_seen["error"]["code"] == "runner_offline"
    assert "build-box-7" in never_seen["error"]["message"]


async def test_a_runner_that_omits_seeded_gets_unbriefed(system):
    await system.append(1)
    nc = system.nc
    js = nc.jetstream()
    kv = await js.key_value(subjects.RUNNERS_BUCKET)
    await kv.put(subjects.presence_key("old-runner"), json.dumps(
        {"node_id": "old-runner", "label": "Old box", "engines": ["scripted"], "protocol": 1}).encode())

    async def answer(msg):
        await msg.respond(b'{"accepted": true, "resumed_conversation": false}')

    await nc.subscribe(subjects.runner_subject("old-runner", "launch"), cb=answer)
    reply = await system.open(node_id="old-runner")
    assert reply["ok"], reply
    assert reply["seeded"] is False and reply["outcome"] == "unbriefed"


async def test_relocation_carries_a_brief_to_the_new_machine(system):
    await system.start_runner("mac-mini-1", "Mac mini")
    await system.start_runner("linux-2", "Linux box")
    await system.append(1)
    opened = await system.open()
    await system.append(2, session_id=opened["session_id"])
    moved = await system.request(subjects.API_SESSIONS_RELOCATE,
                                 {"session_id": opened["session_id"], "node_id": "linux-2"}, timeout=20)
    assert moved["ok"], moved
    assert moved["session_id"] == opened["session_id"] and moved["node_id"] == "linux-2"
    assert moved["continuity"]["mode"] == "fresh"
    assert moved["continuity"]["reason_code"] == "other_machine"
    assert moved["resumed"] is False and moved["brief"]["rows"] >= 2
    assert moved["outcome"] == "briefed"
    live = await system.request(subjects.API_SESSIONS_LIST, {})
    assert [(c["session_id"], c["node_id"]) for c in live["conversations"]] == [
        (opened["session_id"], "linux-2")]
    unknown = await system.request(subjects.API_SESSIONS_RELOCATE,
                                   {"session_id": "csess_nope", "node_id": "linux-2"})
    assert unknown["error"]["code"] == "not_found"


async def test_opening_another_conversation_stops_the_live_one(system):
    await system.start_runner()
    first = await system.open()
    second = await system.open(force_fresh=True)
    assert second["ok"] and second["continuity"]["reason_code"] == "force_fresh"
    assert second["brief"] is None
    stopped = await system.session_events("stopped")
    assert [(e["session_id"], e["reason"]) for e in stopped] == [(first["session_id"], "superseded")]
    runner, _ = system.runners["mac-mini-1"]
    assert runner.live_conversations == [second["session_id"]]
    stop = await system.request(subjects.API_SESSIONS_STOP, {"session_id": second["session_id"],
                                                            "reason": "done for today"})
    assert stop == {"ok": True, "stopped": True}
    assert runner.live_conversations == []
    again = await system.request(subjects.API_SESSIONS_STOP, {"session_id": second["session_id"]})
    assert again == {"ok": True, "stopped": False}
    never = await system.request(subjects.API_SESSIONS_STOP, {"session_id": "csess_nobody"})
    assert never["error"]["code"] == "not_found"


async def test_relocating_right_after_an_open_stops_the_first_machine(system):
    await system.start_runner("mac-mini-1", "Mac mini")
    await system.start_runner("linux-2", "Linux box")
    opened = await system.open()
    moved = await system.request(subjects.API_SESSIONS_RELOCATE,
                                 {"session_id": opened["session_id"], "node_id": "linux-2"}, timeout=20)
    assert moved["ok"], moved
    first, _ = system.runners["mac-mini-1"]
    second, _ = system.runners["linux-2"]
    assert first.live_conversations == [] and second.live_conversations == [opened["session_id"]]
    relocated = await system.session_events("relocated")
    assert [(e["from_node_id"], e["to_node_id"]) for e in relocated] == [("mac-mini-1", "linux-2")]


async def test_a_brief_held_for_the_first_message_is_given_only_when_the_engine_answers_it(
        system):
    from seedline_core import notices
    from seedline_platform.lifecycle_events import conversation_record
    from seedline_platform.session_reads import conversation_events

    engine = await system.start_runner()
    for n in range(1, 4):
        await system.append(n)
    js = system.nc.jetstream()

    async def receipt(session_id: str, sha256: str) -> str | None:
        events = await conversation_events(js, session_id, None)
        return conversation_record(events).brief_receipt(sha256)

    # Opened with no message: the brief waits for the first one, and every read says so.
    reply = await system.open()
    assert reply["ok"] and reply["outcome"] == "briefed" and reply["seeded"] is True, reply
    sid, sha = reply["session_id"], reply["brief"]["sha256"]
    assert reply["brief"]["spent"] is False
    assert "with your first message" in reply["notice"]["chat"]
    assert "was given a brief" not in reply["notice"]["chat"]
    assert not any(wording_violations(text) for text in reply["notice"].values())
    assert engine.prompts == []
    assert await receipt(sid, sha) == notices.BRIEF_NOT_YET_GIVEN

    # The first message: the engine reads the brief in front of it, and only then is it given.
    await system.append(10, kind="chat_user", session_id=sid, content="Carry on, please.")

    async def given():
        return await receipt(sid, sha) == notices.BRIEF_GIVEN
    await system.wait_for(given)
    brief = await system.request(subjects.API_BRIEFS_GET, {"session_id": sid})
    assert [s for s, _ in engine.prompts] == [sid]
    assert brief["text"] in engine.prompts[0][1] and "Carry on, please." in engine.prompts[0][1]

    # Another repo opened with no message and stopped before one came: never given.
    for n in range(20, 23):
        await system.append(n, repo="apps/other", session_id="csess_other")
    again = await system.open(repo="apps/other")
    assert again["ok"] and again["outcome"] == "briefed", again
    assert again["brief"]["spent"] is False
    stopped = await system.request(subjects.API_SESSIONS_STOP, {"session_id": again["session_id"]})
    assert stopped["ok"] and stopped["stopped"], stopped

    async def never():
        return await receipt(again["session_id"], again["brief"]["sha256"]) == \
            notices.BRIEF_NEVER_GIVEN
    await system.wait_for(never)
    assert len(engine.prompts) == 1  # the engine of the second open was never given a turn
