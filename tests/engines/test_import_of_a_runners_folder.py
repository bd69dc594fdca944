"""Importing a runner machine's own engine folder adds nothing the runner published.

A runner hosts the real Claude Code or Codex CLI (against the model stand-ins) for a
conversation with a second turn; then `seedline import` runs, as the real command, over
the folder where that CLI kept its transcripts. The runner published every output live
and the instructions were the person's messages already in the timeline: the import
publishes nothing and says why. (A fresh conversation, so no brief gives the run away:
the runner's mark in the transcript does. Briefs of older runners are recognised too:
libs/cli/tests/test_import_fidelity.py.)
"""

from __future__ import annotations

import asyncio
import json
import os
import sys

import nats
import pytest

from seedline_contracts import subjects
from seedline_contracts.times import now_text
from seedline_runner import Checkouts, Runner
from seedline_runner.engines import ClaudeEngine, CodexEngine

pytestmark = pytest.mark.servers

INSTANCE = "bd43f4de"
REPO = "apps/chess-academy"
NODE = "mac-mini-1"


@pytest.fixture(params=["claude", "codex"])
def cli(request):
    setup = request.getfixturevalue(request.param)
    if request.param == "claude":
        engine = ClaudeEngine(executable=str(setup.executable), env=setup.env,
                              claude_home=setup.home)
        folder = setup.home / "projects"
    else:
        engine = CodexEngine(executable=str(setup.executable), env=setup.env,
                             codex_home=setup.home)
        folder = setup.home / "sessions"
    return request.param, engine, folder


async def repo_entries(system) -> list[dict]:
    reply = await system.request(subjects.API_TIMELINE_READ, {
        "instance_id": INSTANCE, "repo": REPO, "limit": 1000})
    return reply["entries"]


async def settled(system) -> list[dict]:
    """The repo's entries once a second has passed without a new one."""
    entries = await repo_entries(system)
    while True:
        await asyncio.sleep(1)
        again = await repo_entries(system)
        if len(again) == len(entries):
            return again
        entries = again


async def test_importing_the_runners_own_folder_adds_nothing(system, cli, checkouts):
    name, engine, folder = cli
    nc = await nats.connect(system.settings.nats_url)
    runner = Runner(nc, NODE, "Mac mini", {name: engine},
                    checkouts=Checkouts(repos_dir=checkouts))
    await runner.start()
    try:
        opened = await system.open(engine=name, node_id=NODE, instruction="Add castling")
        assert opened["ok"] and not opened["seeded"], opened
        body = {"entry_id": "person-2", "instance_id": INSTANCE, "repo": REPO,
                "session_id": "csess_person", "kind": "chat_user",
                "content": "Now add en passant", "at": now_text()}
        await nc.jetstream().publish(subjects.INGEST_TIMELINE, json.dumps(body).encode(),
                                     headers={"Nats-Msg-Id": "person-2"})

        async def both_turns_answered():
            entries = await repo_entries(system)
            outcomes = [e for e in entries if e["session_id"] == opened["session_id"]
                        and e["kind"] in ("outcome", "chat_assistant")
                        and "en passant" in e["content"]]
            return entries if outcomes else None

        await system.wait_for(both_turns_answered, timeout=90)
        before = await settled(system)
    finally:
        await runner.stop()
        await nc.close()
    env = {"PATH": os.environ.get("PATH", ""), "SEEDLINE_NATS_URL": system.settings.nats_url,
           "SEEDLINE_HOME": str(system.settings.home)}
    if "PYTHONPATH" in os.environ:
        env["PYTHONPATH"] = os.environ["PYTHONPATH"]

    async def seedline_import(*extra: str) -> str:
        process = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "seedline_cli", "import", name, str(folder), "--instance",
            INSTANCE, "--repo", REPO, *extra, env=env,
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
        out, errors = await asyncio.wait_for(process.communicate(), 60)
        assert process.returncode == 0, errors.decode()
        return out.decode()

    dry = " ".join((await seedline_import("--dry-run")).split())
    summary = json.loads(await seedline_import("--json"))
    await asyncio.sleep(1)
    after = await repo_entries(system)

    assert "Would import 0 entries" in dry
    assert "a Seedline runner ran this conversation and published it live" in dry
    assert summary["imported"] == 0 and summary["entries"] == 0
    assert [e["entry_id"] for e in after] == [e["entry_id"] for e in before]
    assert not any(e["content"].startswith("Background from the earlier conversation")
                   for e in after)
