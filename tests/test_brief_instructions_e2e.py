"""A long agent run, opened cold: the brief keeps the person's instruction (CONTRACT.md 5, 1.1)."""

from __future__ import annotations

import dataclasses
import hashlib
import json

import pytest

from seedline_contracts import subjects
from seedline_platform.sealing import sealer_for
from seedline_contracts.codec import decode, encode
from seedline_contracts.events import ContinuityDecided, SeedComposed
from seedline_core.brief import Budget
from seedline_seed_composer.brief_of_decision import compose_for, recompose

pytestmark = pytest.mark.servers

TASK = "Add castling to the move generator, with tests for both sides."
TOOL_ROWS = 300
# The scripted engine gets a budget of its own here, as SEEDLINE_BRIEF_BUDGETS would give it.
BUDGET = Budget(120, 40_000)


@pytest.fixture
def settings(settings):
    return dataclasses.replace(settings, brief_budgets=(("scripted", BUDGET),))


def entry(n: int, kind: str, content: str) -> dict:
    return {"entry_id": f"run-{n}", "instance_id": "bd43f4de", "repo": "apps/chess-academy",
            "session_id": "csess_old", "kind": kind, "content": content,
            "at": "2026-08-17T10:00:00Z", "engine": None if kind == "chat_user" else "scripted"}


async def long_agent_run(system) -> int:
    """One instruction from the person, then hundreds of tool rows from the agent,
    published as producers do; returns the seq of the newest once the timeline has it."""
    js = system.nc.jetstream()
    entries = [entry(0, "chat_user", TASK)]
    for n in range(1, TOOL_ROWS + 1):
        kind = "command" if n % 2 else "terminal"
        entries.append(entry(n, kind, f"{kind} {n}: " + "x" * 400))
    for body in entries:
        await js.publish(subjects.INGEST_TIMELINE, json.dumps(body).encode(),
                         headers={"Nats-Msg-Id": body["entry_id"]})

    async def stored():
        reply = await system.request(subjects.API_TIMELINE_READ, {
            "instance_id": "bd43f4de", "repo": "apps/chess-academy", "limit": 1000})
        rows = reply.get("entries", [])
        return rows[-1]["seq"] if len(rows) == len(entries) else None

    return await system.wait_for(stored, timeout=30)


async def recorded(system, event_type: str, cls):
    (body,) = [e for e in await system.session_events(event_type)]
    return decode(encode(body), cls)


async def test_an_open_after_a_long_run_gives_a_brief_holding_the_instruction(system):
    engine = await system.start_runner()
    last_seq = await long_agent_run(system)
    reply = await system.open(instruction="Carry on.")
    assert reply["ok"], reply
    assert reply["outcome"] == "briefed"
    receipt = reply["brief"]
    assert receipt["until_seq"] == last_seq
    assert receipt["omitted_rows"] == TOOL_ROWS + 1 - receipt["rows"]

    brief = await system.request(subjects.API_BRIEFS_GET, {"session_id": reply["session_id"]})
    assert brief["ok"], brief
    text = brief["text"]
    assert hashlib.sha256(text.encode("utf-8")).hexdigest() == receipt["sha256"] == brief["sha256"]
    before, rest = text.split("\n== the person's instructions, newest last ==\n", 1)
    part, record = rest.split("\n== end of the instructions ==\n", 1)
    assert TASK in part and TASK not in record
    assert f"terminal {TOOL_ROWS}: " in record
    assert {k: brief[k] for k in ("rows", "chars", "omitted_rows", "until_seq")} == {
        k: receipt[k] for k in ("rows", "chars", "omitted_rows", "until_seq")}

    # The receipt says what the engine was given: its text, and the budget it was made with.
    composed = await recorded(system, "seed_composed", SeedComposed)
    # Recorded sealed with the instance's key (CONTRACT.md Erasure, 1.2).
    assert await sealer_for(system.composer.js, system.composer.settings).open("bd43f4de", composed.text) == text
    assert (composed.brief.budget.rows, composed.brief.budget.chars) == (120, 40_000)
    assert 60 < receipt["rows"] <= 120 and 12_000 < receipt["chars"] <= 40_000
    await system.wait_for(lambda: _prompts(engine))
    assert text in engine.prompts[0][1]


async def test_a_replay_keeps_the_bytes_after_the_budget_setting_changes(system):
    await system.start_runner()
    await long_agent_run(system)
    reply = await system.open()
    assert reply["ok"], reply
    decided = await recorded(system, "continuity_decided", ContinuityDecided)
    composed = await recorded(system, "seed_composed", SeedComposed)
    reader = system.composer.parts.composer.reader
    # Composing the same decision with another budget (the setting changed back to the
    # default) gives other bytes; replaying the recorded seed_composed gives the receipt's.
    changed = await compose_for(decided, reader, Budget())
    replayed = await recompose(decided, composed, reader)
    assert changed is not None and changed.sha256 != reply["brief"]["sha256"]
    assert replayed is not None and replayed.sha256 == reply["brief"]["sha256"]
    assert replayed.text == await sealer_for(system.composer.js, system.composer.settings).open("bd43f4de", composed.text)


async def _prompts(engine):
    return engine.prompts
