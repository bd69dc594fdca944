"""Secrets stay where they were printed (CONTRACT.md 5, 1.2): an agent printed an .env, and
the next open on another engine gets a brief without them, on replay too."""

from __future__ import annotations

import pytest

from seedline_contracts import subjects
from seedline_contracts.codec import decode, encode
from seedline_contracts.events import ContinuityDecided, SeedComposed
from seedline_contracts.times import now_text
from seedline_seed_composer.composing import recompose
from seedline_timeline_writer.rebuild import rebuild_timeline

pytestmark = pytest.mark.servers

AWS_SECRET = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYzEXAMPLEKEY"
GITHUB_TOKEN = "ghp_" + "aB3dE5gH7jK9mN1pQ3sT5vW7yZ9bC1dE3fG5"
PASSWORD = "hunter2"
ENV_PRINTED = (
    "NODE_ENV=production\n"
    f"AWS_SECRET_ACCESS_KEY={AWS_SECRET}\n"
    f"GITHUB_TOKEN={GITHUB_TOKEN}\n"
    f"DATABASE_URL=postgres://admin:{PASSWORD}@db.internal:5432/app\n"
)
CONVERSATION = [
    ("chat_user", "The app cannot reach the database; find out why."),
    ("chat_assistant", "I will look at the environment the app starts with."),
    ("command", "cat .env"),
    ("terminal", ENV_PRINTED),
    ("chat_assistant", "DATABASE_URL points at db.internal, which does not resolve here."),
]


async def claude_conversation(system) -> None:
    """What a Claude Code conversation on this repo published, moments ago."""
    at = now_text()
    for n, (kind, content) in enumerate(CONVERSATION):
        await system.append(n, session_id="csess_claude", kind=kind, content=content, at=at,
                            engine=None if kind == "chat_user" else "claude")


async def recorded(system, event_type: str, cls):
    (body,) = await system.session_events(event_type)
    return decode(encode(body), cls)


async def test_an_open_on_another_engine_gets_no_secret_and_the_rest_intact(system):
    engine = await system.start_runner()
    await claude_conversation(system)
    # The scripted engine: not the one that printed the .env.
    reply = await system.open(instruction="Carry on.")
    assert reply["ok"], reply
    assert reply["continuity"]["reason_code"] == "engine_changed"
    assert reply["brief"]["redacted"] == 3

    brief = await system.request(subjects.API_BRIEFS_GET, {"session_id": reply["session_id"]})
    text = brief["text"]
    for secret in (AWS_SECRET, GITHUB_TOKEN, PASSWORD):
        assert secret not in text
    for kept in ("NODE_ENV=production\n", "AWS_SECRET_ACCESS_KEY=[secret left out: ",
                 "GITHUB_TOKEN=[secret left out: github token]",
                 "postgres://admin:[secret left out: password in a URL]@db.internal:5432/app",
                 "cat .env", CONVERSATION[-1][1], CONVERSATION[0][1]):
        assert kept in text
    await system.wait_for(lambda: _prompts(engine))
    prompt = engine.prompts[0][1]
    assert text in prompt and not any(s in prompt for s in (AWS_SECRET, GITHUB_TOKEN, PASSWORD))

    # The stream records what was sent and the detectors that made it.
    composed = await recorded(system, "seed_composed", SeedComposed)
    assert composed.text == text and composed.brief.redacted == 3
    assert composed.redaction is not None

    # The timeline keeps what was written, for its own instance.
    rows = await system.request(subjects.API_TIMELINE_READ, {
        "instance_id": "bd43f4de", "repo": "apps/chess-academy"})
    assert ENV_PRINTED in [row["content"] for row in rows["entries"]]

    # Replayed after a rebuild of the timeline projection: the same bytes and count.
    result = await rebuild_timeline(system.settings, None)
    assert result.before_digest == result.after_digest
    decided = await recorded(system, "continuity_decided", ContinuityDecided)
    replayed = await recompose(decided, composed, system.composer.composer.reader)
    assert replayed is not None
    assert replayed.sha256 == reply["brief"]["sha256"] and replayed.redacted == 3


async def _prompts(engine):
    return engine.prompts
