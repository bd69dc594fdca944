"""An ACP agent's streamed updates reach the timeline through a runner, in order, with the
machine's permission answer recorded (the tiny SDK agent of libs/runner/tests)."""

from __future__ import annotations

import sys
from pathlib import Path

import nats
import pytest

from seedline_contracts import subjects
from seedline_runner.engines.acp import AcpEngine
from seedline_runner.runner import Runner

pytestmark = pytest.mark.servers

TINY_AGENT = Path(__file__).parents[1] / "libs" / "runner" / "tests" / "acp_tiny_agent.py"


async def test_tool_calls_plans_and_permission_answers_are_entries_in_order(system, tmp_path):
    engine = AcpEngine("tiny", [sys.executable, str(TINY_AGENT), str(tmp_path / "store")],
                       workdir=tmp_path, permission_policy="allow")
    nc = await nats.connect(system.settings.nats_url)
    runner = Runner(nc, "mac-mini-1", "Mac mini", {"acp:tiny": engine}, presence_interval=1.0)
    await runner.start()

    async def close():
        await runner.stop()
        await nc.close()

    system.stack.push_async_callback(close)
    reply = await system.open(engine="acp:tiny", instruction="TOOL please")
    assert reply["ok"], reply

    async def entries():
        rows = await system.request(subjects.API_TIMELINE_READ, {
            "instance_id": "bd43f4de", "repo": "apps/chess-academy",
            "session_id": reply["session_id"]})
        done = any(r["kind"] == "chat_assistant" for r in rows["entries"])
        return rows["entries"] if done else None

    rows = await system.wait_for(entries, timeout=30)
    assert [r["kind"] for r in rows] == [
        "chat_user", "outcome", "command", "outcome", "terminal", "chat_assistant"]
    assert all(r["engine"] == "acp:tiny" for r in rows[1:])
    assert "permission policy (allow)" in rows[3]["content"]
    assert "a.txt b.txt" in rows[4]["content"]
    assert rows[5]["content"] == "echo: TOOL please"
