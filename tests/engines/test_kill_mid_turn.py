"""A runner killed in the middle of a turn: what its engine said before is kept, once.

The runner runs as its own process (`seedline runner --engine claude`) with the real
Claude Code CLI; the stand-in model asks for one Bash call per step and holds the
request for the third step, so the CLI is mid-turn, waiting on the model, when the
runner gets SIGKILL. The platform's services run in the test's event loop.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys
from pathlib import Path

import pytest

from seedline_contracts import subjects
from seedline_runner.engines.claude_stream import command_text, tool_result_text

pytestmark = pytest.mark.servers

NODE = "mac-mini-kill"
INSTANCE = "bd43f4de"
REPO = "apps/chess-academy"
STEPS = ["echo step-1", "echo step-2", "echo step-3"]


async def start_runner_process(system, claude, checkouts: Path, log: Path):
    env = claude.env | {
        "SEEDLINE_NATS_URL": system.settings.nats_url,
        "SEEDLINE_HOME": str(log.parent / "seedline-home"),
        "PYTHONUNBUFFERED": "1",
    }
    if "PYTHONPATH" in os.environ:  # the same code as the test's own process
        env["PYTHONPATH"] = os.environ["PYTHONPATH"]
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "seedline_cli", "runner",
        "--node-id", NODE, "--label", "Mac mini", "--engine", "claude",
        "--claude-bin", str(claude.executable),
        "--claude-arg=--allowedTools", "--claude-arg=Bash",
        "--repos-dir", str(checkouts),
        env=env, stdout=log.open("wb"), stderr=asyncio.subprocess.STDOUT,
    )
    kv = await system.nc.jetstream().key_value(subjects.RUNNERS_BUCKET)

    async def present():
        try:
            return (await kv.get(subjects.presence_key(NODE))).value
        except Exception:
            return None

    await system.wait_for(present, timeout=30)
    return process


def processes_using(config_dir: Path) -> list[int]:
    """The ids of processes whose environment names this CLAUDE_CONFIG_DIR."""
    needle = f"CLAUDE_CONFIG_DIR={config_dir}".encode()
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            if needle in (entry / "environ").read_bytes().split(b"\0"):
                found.append(int(entry.name))
        except OSError:
            continue
    return found


def done_before_the_kill(held_request: dict) -> list[tuple[str, str]]:
    """What the CLI had said and done in this turn: all of it went to the model."""
    said = []
    for message in held_request["messages"]:
        for block in message["content"] if isinstance(message["content"], list) else []:
            if block.get("type") == "text" and message["role"] == "assistant":
                said.append(("chat_assistant", block["text"]))
            elif block.get("type") == "tool_use":
                said.append(("command", command_text(block["name"], block["input"])))
            elif block.get("type") == "tool_result":
                said.append(("terminal", tool_result_text(block["content"])))
    return said


async def runner_entries(system, session_id: str) -> list[dict]:
    reply = await system.request(subjects.API_TIMELINE_READ, {
        "instance_id": INSTANCE, "repo": REPO, "session_id": session_id, "limit": 1000})
    assert reply["ok"], reply
    return [e for e in reply["entries"] if e["kind"] != "chat_user"]


async def test_everything_emitted_before_the_kill_is_in_the_timeline_exactly_once(
    system, claude, checkouts, tmp_path
):
    if not Path("/proc/self/environ").exists():
        pytest.skip("needs /proc to find the engine's processes")
    claude.standin.tool_commands = STEPS
    claude.standin.hold_at_step = 2
    runner = await start_runner_process(system, claude, checkouts, tmp_path / "runner.log")
    try:
        opened = await system.open(engine="claude", node_id=NODE,
                                   instruction="Run the three steps")
        assert opened["ok"], opened
        session_id = opened["session_id"]
        # The CLI ran two steps and now waits on the model for the third.
        assert await asyncio.to_thread(claude.standin.holding.wait, 60)

        async def both_steps_published():
            entries = await runner_entries(system, session_id)
            return entries if len(entries) >= 6 else None

        before = await system.wait_for(both_steps_published, timeout=30)
        # Claude Code writes its transcript a moment after its output: the kill comes once
        # the file holds both steps too (the person's line and six records), so the ids
        # compared below are the engine's own, not what a kill happened to leave.
        async def transcript_holds_both_steps():
            return len(claude.transcript_ids()) >= 7

        await system.wait_for(transcript_holds_both_steps, timeout=30)
        runner.send_signal(signal.SIGKILL)
        await runner.wait()
    finally:
        if runner.returncode is None:
            runner.kill()
            await runner.wait()

    # The engine died with its runner, in the middle of its turn.
    async def engine_gone():
        return not processes_using(claude.home)

    await system.wait_for(engine_gone, timeout=15)
    after = await runner_entries(system, session_id)
    said = done_before_the_kill(claude.standin.conversation_requests()[-1])

    assert [(e["kind"], e["content"]) for e in after] == said == [
        ("chat_assistant", "step 1: running echo step-1"),
        ("command", "Bash: echo step-1"),
        ("terminal", "step-1"),
        ("chat_assistant", "step 2: running echo step-2"),
        ("command", "Bash: echo step-2"),
        ("terminal", "step-2"),
    ]
    assert after == before
    # Published under the ids the engine's own transcript gives the same records, so an
    # import of this machine's Claude Code folder adds none of them again.
    assert [e["entry_id"] for e in after] == claude.transcript_ids()[1:7]
    assert runner.returncode == -signal.SIGKILL


async def test_a_runner_started_again_after_the_kill_gets_the_lost_conversation_stopped(
    system, claude, checkouts, tmp_path
):
    claude.standin.tool_commands = STEPS
    claude.standin.hold_at_step = 1
    notices: list[dict] = []

    async def on_notice(msg):
        notices.append(json.loads(msg.data))

    await system.nc.subscribe(subjects.notify_subject(INSTANCE), cb=on_notice)
    runner = await start_runner_process(system, claude, checkouts, tmp_path / "first.log")
    opened = await system.open(engine="claude", node_id=NODE, instruction="Run the steps")
    assert opened["ok"], opened
    assert await asyncio.to_thread(claude.standin.holding.wait, 60)
    runner.send_signal(signal.SIGKILL)
    await runner.wait()

    # The machine comes back: its presence lists no conversation, so the platform stops
    # the one it lost instead of showing it as live.
    again = await start_runner_process(system, claude, checkouts, tmp_path / "again.log")
    try:
        async def told():
            return [n for n in notices if n.get("kind") == "runner_restarted"]

        [notice] = await system.wait_for(told, timeout=40)
    finally:
        again.terminate()
        await again.wait()

    assert notice["session_id"] == opened["session_id"] and notice["node_id"] == NODE
    stopped = await system.session_events("stopped")
    assert [(e["session_id"], e["reason"]) for e in stopped] == [
        (opened["session_id"], "runner_restarted")
    ]
