"""`seedline import` of a conversation that ended a minute ago starts nothing (CONTRACT.md 2.1).

The import runs as the real command in its own process. Its entries' times are fresh
(a minute old), so only their `origin: "import"` keeps them from waking the repo or
reaching its live conversation as turns; a person's live message then still does.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from datetime import timedelta
from pathlib import Path

import pytest

from seedline_contracts import subjects
from seedline_contracts.times import format_utc, now_text, utc_now

pytestmark = pytest.mark.servers

DATA = Path(__file__).resolve().parent / "data" / "engine_transcripts" / "claude"
INSTANCE = "bd43f4de"
REPO = "apps/chess-academy"


def ended_a_minute_ago(source: Path, target: Path) -> Path:
    """The real transcript with every time moved to a minute ago."""
    recent = format_utc(utc_now() - timedelta(minutes=1))
    lines = []
    for line in source.read_text().splitlines():
        record = json.loads(line)
        if "timestamp" in record:
            record["timestamp"] = recent
        lines.append(json.dumps(record))
    target.write_text("\n".join(lines) + "\n")
    return target


async def run_import(system, path: Path) -> dict:
    env = {"PATH": os.environ.get("PATH", ""), "SEEDLINE_NATS_URL": system.settings.nats_url,
           "SEEDLINE_HOME": str(system.settings.home)}
    if "PYTHONPATH" in os.environ:
        env["PYTHONPATH"] = os.environ["PYTHONPATH"]
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "seedline_cli", "import", "claude", str(path),
        "--instance", INSTANCE, "--repo", REPO, "--json",
        env=env, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )
    out, errors = await asyncio.wait_for(process.communicate(), 120)
    assert process.returncode == 0, errors.decode()
    return json.loads(out)


async def repo_entries(system) -> list[dict]:
    reply = await system.request(subjects.API_TIMELINE_READ, {
        "instance_id": INSTANCE, "repo": REPO, "limit": 1000})
    return reply["entries"]


async def test_an_import_of_a_conversation_that_ended_a_minute_ago_starts_nothing(
    system, tmp_path
):
    engine = await system.start_runner()
    opened = await system.open(instruction="Add castling")
    assert opened["ok"], opened
    await system.wait_for(lambda: _prompts(engine, 1))

    # While a conversation is live, imported messages are not turns for it.
    first = await run_import(system, ended_a_minute_ago(
        DATA / "spotter-short.jsonl", tmp_path / "short.jsonl"))
    assert first["imported"] > 0 and first["kinds"]["chat_user"] >= 1

    # With nothing live, imported messages wake nothing.
    await system.request(subjects.API_SESSIONS_STOP, {"session_id": opened["session_id"],
                                                     "reason": "done"})
    second = await run_import(system, ended_a_minute_ago(
        DATA / "spotter-tool-heavy.jsonl", tmp_path / "heavy.jsonl"))
    assert second["kinds"]["chat_user"] >= 2
    total = first["imported"] + second["imported"]
    stored = await system.wait_for(
        lambda: _at_least(system, total + 1))  # the open's instruction and both imports
    assert all(entry["at"] > format_utc(utc_now() - timedelta(minutes=3)) for entry in stored)
    # A marker the gateway handles after every imported entry (one stream, in order).
    await _say(system, "marker", "a live message, written now")
    await system.wait_for(lambda: _woken(system))

    await system.wait_for(lambda: _prompts(engine, 2))
    await asyncio.sleep(0.5)
    # The engine was given the open's instruction and the live message, nothing imported.
    prompts = [prompt for _, prompt in engine.prompts]
    assert len(prompts) == 2, prompts
    assert prompts[0] == "Add castling" and prompts[1].endswith("a live message, written now")
    opens = await system.session_events("opened")
    assert len(opens) == 2
    assert opens[1]["plan"]["instruction"] == "a live message, written now"


async def _say(system, entry_id: str, text: str) -> None:
    body = {"entry_id": entry_id, "instance_id": INSTANCE, "repo": REPO,
            "session_id": "csess_person", "kind": "chat_user", "content": text, "at": now_text()}
    await system.nc.jetstream().publish(subjects.INGEST_TIMELINE, json.dumps(body).encode(),
                                        headers={"Nats-Msg-Id": entry_id})


async def _prompts(engine, n):
    return len(engine.prompts) >= n


async def _at_least(system, n):
    entries = await repo_entries(system)
    return entries if len(entries) >= n else None


async def _woken(system):
    return [e for e in await system.session_events("opened") if e["plan"]["wake_seq"]]
