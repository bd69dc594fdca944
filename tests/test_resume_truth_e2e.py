"""CONTRACT.md 1.2 on the running platform: what a resume must prove (resume.expect), the
brief's receipt (brief.spent), a resume lost after the reply (recorded, every read
corrected, the person told), and a failed open that no longer takes the resume away."""

from __future__ import annotations

import asyncio
import json

import pytest

from seedline_cli.timeline_opens import read_marks
from seedline_contracts import subjects
from seedline_core.notices import wording_violations

pytestmark = pytest.mark.servers

INSTANCE, REPO = "bd43f4de", "apps/chess-academy"


async def _launches(system, node_id: str = "mac-mini-1") -> list[dict]:
    """Every launch request the machine is sent (a copy, beside the runner's own)."""
    seen: list[dict] = []

    async def copy(msg):
        seen.append(json.loads(msg.data))

    await system.nc.subscribe(subjects.runner_subject(node_id, "launch"), cb=copy)
    return seen


async def test_a_resume_carries_its_expectation_and_a_resume_lost_corrects_every_read(system):
    await system.start_runner()
    launches = await _launches(system)
    notices: list[dict] = []

    async def notified(msg):
        notices.append(json.loads(msg.data))

    await system.nc.subscribe(subjects.notify_subject(INSTANCE), cb=notified)
    await system.append(1)
    first = await system.open(instruction="Add castling")
    assert first["ok"], first
    # The newest turn is the engine's own reply: its store holds it, so the runner has its
    # proof (CONTRACT.md 3.2, 1.2).
    (answer,) = await system.wait_for(lambda: _replies(system, first["session_id"]))
    second = await system.open(request_id="resume-1")
    assert second["outcome"] == "resumed", second
    assert second["brief"] is not None and second["brief"]["spent"] is False
    await system.wait_for(lambda: _async(len(launches) >= 2))
    assert launches[-1]["resume"]["expect"] == {
        "seq": answer["seq"], "kind": "chat_assistant", "excerpt": answer["content"][:200]}
    assert launches[0]["resume"] is None

    # The engine refuses the resume after the reply: the runner says so.
    sid = second["session_id"]
    await system.nc.publish(subjects.runner_subject("mac-mini-1", "events"), json.dumps({
        "type": "resume_lost", "session_id": sid, "at": "2026-12-02T10:00:00Z",
        "reason": "No conversation found"}).encode())
    (lost,) = await system.wait_for(lambda: system.session_events("resume_lost"))
    assert lost["session_id"] == sid and lost["reply"]["outcome"] == "resume_unconfirmed_briefed"

    async def listed():
        reply = await system.request(subjects.API_SESSIONS_LIST, {"instance_id": INSTANCE})
        return [c for c in reply["conversations"] if c["session_id"] == sid
                and c["outcome"] == "resume_unconfirmed_briefed"]

    await system.wait_for(listed)
    async def retried():
        reply = await system.open(request_id="resume-1")
        return reply if reply["outcome"] == "resume_unconfirmed_briefed" else None

    again = await system.wait_for(retried)
    assert again["session_id"] == sid and again["resumed"] is False and again["seeded"] is True
    assert again["brief"]["spent"] is True and again["notice"]["tone"] == "warning"
    (mark,) = [m for m in await read_marks(system.nc, {sid}) if m.session_id == sid]
    assert mark.outcome == "resume_unconfirmed_briefed"
    (told,) = await system.wait_for(lambda: _async(
        [n for n in notices if n.get("kind") == "resume_lost"]))
    assert told["session_id"] == sid and "could not continue" in told["text"]
    assert wording_violations(told["text"]) == []


async def test_a_failed_open_between_a_stop_and_the_next_open_keeps_the_resume(system):
    await system.start_runner()
    await system.append(1)
    first = await system.open()
    await system.append(2, session_id=first["session_id"], at=None)
    stopped = await system.request(subjects.API_SESSIONS_STOP,
                                   {"session_id": first["session_id"], "reason": "done"})
    assert stopped["ok"], stopped
    await system.stop_runner("mac-mini-1")
    failed = await system.open(instruction="Go on")
    assert failed["error"]["code"] == "runner_offline", failed
    await system.start_runner()
    await asyncio.sleep(0.2)
    again = await system.open()
    assert again["continuity"]["reason_code"] == "resume", again["continuity"]
    assert again["continuity"]["resume_from"] == first["session_id"]


async def _replies(system, session_id: str) -> list[dict]:
    read = await system.request(subjects.API_TIMELINE_READ, {
        "instance_id": INSTANCE, "repo": REPO, "session_id": session_id, "limit": 100})
    return [e for e in read["entries"] if e["kind"] == "chat_assistant"]


async def _async(value):
    return value
