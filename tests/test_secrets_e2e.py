"""Secrets stay where they were printed (CONTRACT.md 5, 1.2): an agent printed an .env, and
the next open on another engine gets a brief without them, on replay too."""

from __future__ import annotations

import asyncio
import json

import psycopg
import pytest

from seedline_contracts import subjects
from seedline_platform.sealing import sealer_for
from seedline_contracts.codec import decode, encode
from seedline_contracts.events import ContinuityDecided, SeedComposed
from seedline_contracts.times import now_text
from seedline_seed_composer.brief_of_decision import recompose
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
    assert await sealer_for(system.composer.js, system.composer.settings).open("bd43f4de", composed.text) == text
    assert composed.brief.redacted == 3
    assert composed.redaction is not None

    # The timeline keeps what was written, for its own instance.
    rows = await system.request(subjects.API_TIMELINE_READ, {
        "instance_id": "bd43f4de", "repo": "apps/chess-academy"})
    assert ENV_PRINTED in [row["content"] for row in rows["entries"]]

    # Replayed after a rebuild of the timeline projection: the same bytes and count.
    result = await rebuild_timeline(system.settings, None)
    assert result.before_digest == result.after_digest
    decided = await recorded(system, "continuity_decided", ContinuityDecided)
    replayed = await recompose(decided, composed, system.composer.parts.composer.reader)
    assert replayed is not None
    assert replayed.sha256 == reply["brief"]["sha256"] and replayed.redacted == 3


# What one agent printed in the forms a brief once carried to another engine verbatim.
AWS_FILE_SECRET = "q8Vd0Zb7fWnR2xT5yL3kP9sM1cJ6hG4eA0uB7iN2"
GITHUB_PAT = "github_pat_11ABCDEFG0" + "aBcDeFgHiJkLmN_" + "Qw3rTy7UiOp2AsDfGhJkL9zXcVbNm1Qw3rTy7UiOp2AsDfGhJkL9zXcVbNm1"
PG_PASSWORD = "Tr0ub4dor-3x"
YAML_PASSWORD = "c0rrect-h0rse-Battery"
REDIS_PASSWORD = "r3d1s-Pw-7741"
OPENAI_KEY = "sk-proj-" + "Ab3_" * 39
AZURE_KEY = "Zm9vYmFyYmF6cXV4" * 5 + "Zm9vYmE="
PRINTED = (
    "$ cat ~/.aws/credentials\n[default]\naws_access_key_id = AKIAQWERTYUIOPASDF23\n"
    f"aws_secret_access_key = {AWS_FILE_SECRET}\n"
    f"$ gh auth login --with-token <<< {GITHUB_PAT}\n"
    f"$ PGPASSWORD={PG_PASSWORD}; psql -h db -U app\n"
    f"database:\n  user: app\n  password: {YAML_PASSWORD}\n"
    f"REDIS_URL=redis://:{REDIS_PASSWORD}@cache:6379/0\n"
    f'client = OpenAI(api_key="{OPENAI_KEY}")\n'
    f"AccountName=chess;AccountKey={AZURE_KEY};EndpointSuffix=core.windows.net\n"
)
EVERY_FORM = (AWS_FILE_SECRET, GITHUB_PAT, PG_PASSWORD, YAML_PASSWORD, REDIS_PASSWORD,
              OPENAI_KEY, AZURE_KEY)


async def test_every_form_an_agent_prints_is_left_out_of_the_brief_another_engine_gets(system):
    engine = await system.start_runner()
    at = now_text()
    for n, (kind, content) in enumerate([("chat_user", "Why does the deploy fail?"),
                                         ("command", "cat config files"),
                                         ("terminal", PRINTED)]):
        await system.append(n, session_id="csess_codex", kind=kind, content=content, at=at,
                            engine=None if kind == "chat_user" else "codex")
    reply = await system.open(instruction="Carry on.")
    assert reply["ok"] and reply["continuity"]["reason_code"] == "engine_changed", reply

    await system.wait_for(lambda: _prompts(engine))
    prompt = engine.prompts[0][1]
    for secret in EVERY_FORM:
        assert secret not in prompt and secret[:10] not in prompt and secret[-10:] not in prompt
    # Only the secrets went: the command still reads as it was written.
    assert "aws_secret_access_key = [secret left out: " in prompt
    assert "]; psql -h db -U app\n" in prompt
    assert "REDIS_URL=redis://:[secret left out: password in a URL]@cache:6379/0" in prompt
    assert "[secret left out: azure storage key];EndpointSuffix=core.windows.net" in prompt
    assert reply["brief"]["redacted"] >= len(EVERY_FORM)


async def _prompts(engine):
    return engine.prompts


MARK = "zebra-crossing"


async def test_no_entry_content_or_brief_text_is_stored_in_plain_text(system, nats_server,
                                                                        tmp_path):
    """A load of two instances, then a scan of the raw bytes of the timeline and the
    session events (through JetStream and, when the server runs here, its files) and of
    the Postgres projections that hold content."""
    await system.start_runner()
    js = system.nc.jetstream(publish_async_max_pending=500)
    acks = []
    for n in range(300):
        body = {"entry_id": f"load-{n}", "instance_id": ("bd43f4de", "c0ffee42")[n % 2],
                "repo": "apps/chess-academy", "session_id": "csess_load",
                "kind": ("chat_user", "terminal", "chat_assistant")[n % 3],
                "content": f"{MARK} {n} " + "y" * (n % 50), "at": now_text(), "engine": "claude"}
        acks.append(await js.publish_async(subjects.INGEST_TIMELINE, json.dumps(body).encode(),
                                           headers={"Nats-Msg-Id": body["entry_id"]}))
    await asyncio.gather(*acks)

    async def all_read():
        reply = await system.request(subjects.API_TIMELINE_READ, {
            "instance_id": "c0ffee42", "repo": "apps/chess-academy", "limit": 1000})
        return len(reply["entries"]) == 150 and reply
    read = await system.wait_for(all_read, timeout=30)
    assert all(row["content"].startswith(MARK) for row in read["entries"])
    reply = await system.open(instruction="Carry on.")
    assert reply["ok"] and reply["brief"]["rows"] > 0
    brief = await system.request(subjects.API_BRIEFS_GET, {"session_id": reply["session_id"]})
    assert MARK in brief["text"]

    for stream in (subjects.TIMELINE_STREAM, subjects.SESSIONS_STREAM):
        info = await js.stream_info(stream)
        for seq in range(1, info.state.last_seq + 1):
            msg = await js.get_msg(stream, seq)
            assert MARK.encode() not in msg.data, f"{stream} seq {seq} holds content in plain text"
    if nats_server.process is not None:  # the server's own files, where they are on this disk
        store = tmp_path / "nats"
        files = [p for name in (subjects.TIMELINE_STREAM, subjects.SESSIONS_STREAM)
                 for p in store.rglob(f"*{name}*/**/*") if p.is_file()]
        assert files
        assert not [p for p in files if MARK.encode() in _bytes_now(p)]
        # The scan finds plain text where it is: producers publish ingest in plain text,
        # kept there for its retention (README, Erasure).
        ingest = [p for p in store.rglob(f"*{subjects.INGEST_STREAM}*/**/*") if p.is_file()]
        assert any(MARK.encode() in _bytes_now(p) for p in ingest)
    async with await psycopg.AsyncConnection.connect(system.settings.database_url) as conn:
        for table, column in (("timeline_entries", "content"), ("briefs", "text")):
            cur = await conn.execute(
                f"SELECT count(*) FROM {table} WHERE {column} LIKE %s", (f"%{MARK}%",))
            assert (await cur.fetchone())[0] == 0, f"{table} holds content in plain text"


def _bytes_now(path) -> bytes:
    """A file of the running server's store as it is now; nothing when the server removed it
    since it was listed (an atomic batch's staging files go once the batch lands: a full run
    once read one as it went)."""
    try:
        return path.read_bytes()
    except FileNotFoundError:
        return b""
