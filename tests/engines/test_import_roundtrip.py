"""`seedline import`, then open the repo: the brief holds the imported conversation.

The import runs as the real command in its own process; the platform's services and a
runner with the scripted engine run in the test's event loop.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from pathlib import Path

import pytest

from seedline_contracts import subjects

pytestmark = pytest.mark.servers

DATA = Path(__file__).resolve().parents[1] / "data" / "engine_transcripts"
INSTANCE = "bd43f4de"
REPO = "apps/chess-academy"

CASES = {
    "claude": (
        DATA / "claude" / "spotter-tool-heavy.jsonl",
        19,
        # The last exchange: the person's last message, then the end of what followed it.
        ["scrolling back in xterm.js still does not work", "[Request interrupted by user]"],
    ),
    "codex": (
        DATA / "codex" / "rollout-2026-12-01T09-51-42-01a23104-68fe-7733-b08a-841035ff1a5b.jsonl",
        10,
        ["Now add en passant",
         "stand-in heard 2 prompt(s): Add castling to the move generator | Now add en passant"],
    ),
}


async def run_import(system, engine: str, path: Path) -> dict:
    env = {"PATH": os.environ.get("PATH", ""), "SEEDLINE_NATS_URL": system.settings.nats_url,
           "SEEDLINE_HOME": str(system.settings.home)}
    if "PYTHONPATH" in os.environ:
        env["PYTHONPATH"] = os.environ["PYTHONPATH"]
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "seedline_cli", "import", engine, str(path),
        "--instance", INSTANCE, "--repo", REPO, "--json",
        env=env, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )
    out, errors = await asyncio.wait_for(process.communicate(), 120)
    assert process.returncode == 0, errors.decode()
    return json.loads(out)


@pytest.mark.parametrize("engine", sorted(CASES))
async def test_the_brief_of_a_repo_holds_the_imported_conversations_last_exchange(
    system, engine
):
    path, count, last_exchange = CASES[engine]
    summary = await run_import(system, engine, path)

    async def all_stored():
        reply = await system.request(subjects.API_TIMELINE_READ, {
            "instance_id": INSTANCE, "repo": REPO, "limit": 1000})
        return reply["entries"] if len(reply["entries"]) >= count else None

    stored = await system.wait_for(all_stored)
    scripted = await system.start_runner()
    opened = await system.open(instruction="Where were we?")
    brief = await system.request(subjects.API_BRIEFS_GET, {"session_id": opened["session_id"]})

    assert summary["imported"] == count
    assert {entry["engine"] for entry in stored} == {engine}
    assert opened["ok"], opened
    # Imported history is never resumed (another engine, and old): the brief carries it.
    assert opened["outcome"] == "briefed"
    assert opened["continuity"]["reason_code"] in ("engine_changed", "past_window")
    assert brief["ok"] and brief["until_seq"] == max(entry["seq"] for entry in stored)
    for words in last_exchange:
        assert words in brief["text"]
    assert brief["text"] in scripted.prompts[0][1]
