"""An editor on `seedline acp` (the official ACP client SDK, over stdio), all four services,
and a runner hosting the real Claude Code CLI against the stand-in model.

A tool that runs 10 s (far past any quiet time) keeps the editor's turn open: what it
printed and the engine's final answer reach the editor before the turn is answered
`end_turn`. A `session/cancel` while a tool runs answers the turn `cancelled`, and by
then every process of that tool has ended, the one it detached with setsid too.
"""

from __future__ import annotations

import asyncio
import dataclasses
import os
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import nats
import pytest
from acp import PROTOCOL_VERSION, spawn_agent_process, text_block
from acp.schema import AgentMessageChunk, ClientCapabilities, ToolCallProgress, ToolCallStart

from seedline_runner.checkouts import Checkouts
from seedline_runner.engines.claude import ClaudeEngine
from seedline_runner.runner import Runner

from .conftest import REPO

pytestmark = pytest.mark.servers

INSTANCE, NODE = "bd43f4de", "linux-box-1"


@pytest.fixture
def settings(settings):
    return dataclasses.replace(settings, launch_timeout_seconds=60, open_timeout_seconds=90)


@dataclass
class Editor:
    updates: list[Any] = field(default_factory=list)

    async def session_update(self, session_id: str, update: Any, **kwargs: Any) -> None:
        self.updates.append(update)

    async def request_permission(self, *args: Any, **kwargs: Any) -> Any:
        raise AssertionError("Seedline never asks the editor for permission")

    def of(self, kind: type) -> list[Any]:
        return [u for u in self.updates if isinstance(u, kind)]


async def claude_runner(system, claude, checkouts) -> None:
    nc = await nats.connect(system.settings.nats_url)
    engine = ClaudeEngine(executable=str(claude.executable), env=claude.env,
                          claude_home=claude.home)
    runner = Runner(nc, NODE, "Linux box", {"claude": engine}, presence_interval=1.0,
                    checkouts=Checkouts(repos_dir=checkouts))
    await runner.start()

    async def close() -> None:
        await runner.stop()
        await nc.close()

    system.stack.push_async_callback(close)


def editor_process(system, editor: Editor, home: Path):
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(home),
           "SEEDLINE_NATS_URL": system.settings.nats_url,
           "SEEDLINE_HOME": str(home / "seedline")}
    command = [sys.executable, "-m", "seedline_cli", "acp", "--instance", INSTANCE,
               "--repo", REPO, "--node", NODE, "--engine", "claude"]
    return spawn_agent_process(editor, *command, env=env, cwd=str(home))


async def open_editor(conn, home: Path) -> str:
    await conn.initialize(protocol_version=PROTOCOL_VERSION,
                          client_capabilities=ClientCapabilities())
    return (await conn.new_session(cwd=str(home), mcp_servers=[])).session_id


async def test_a_ten_second_tool_and_the_answer_reach_the_editor_before_end_turn(
    system, claude, checkouts, tmp_path
):
    claude.standin.tool_commands = ["sleep 10; echo tool-finished"]
    await claude_runner(system, claude, checkouts)
    editor = Editor()
    async with editor_process(system, editor, tmp_path) as (conn, _):
        session = await open_editor(conn, tmp_path)
        answer = await conn.prompt(session_id=session, prompt=[text_block("run the slow tool")])
        # What the editor holds the moment the turn is answered.
        held = list(editor.updates)

    assert answer.stop_reason == "end_turn"
    [started] = [u for u in held if isinstance(u, ToolCallStart)]
    assert started.raw_input == {"command": "Bash: sleep 10; echo tool-finished"}
    [finished] = [u for u in held if isinstance(u, ToolCallProgress)
                  and u.tool_call_id == started.tool_call_id]
    assert finished.status == "completed"
    assert finished.content[0].content.text.strip() == "tool-finished"
    said = [u.content.text for u in held if isinstance(u, AgentMessageChunk)]
    assert any("stand-in heard 1 prompt(s): run the slow tool" in text for text in said)
    # Started, then finished, then the answer: in the order the engine worked.
    assert held.index(started) < held.index(finished) < max(
        i for i, u in enumerate(held) if isinstance(u, AgentMessageChunk))
    # The model was asked again only after the tool's output came back to it.
    assert claude.standin.tool_results()[0]["content"].strip() == "tool-finished"


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


async def test_a_cancel_mid_tool_ends_the_tools_whole_process_tree(
    system, claude, checkouts, tmp_path
):
    marks = checkouts / REPO / ".marks"
    marks.mkdir()
    claude.standin.tool_commands = [
        f"echo $$ > {marks}/tool.pid; "
        f"setsid sh -c 'echo $$ > {marks}/detached.pid; sleep 120' & "
        f"sleep 120; echo never > {marks}/written"
    ]
    await claude_runner(system, claude, checkouts)
    editor = Editor()
    async with editor_process(system, editor, tmp_path) as (conn, _):
        session = await open_editor(conn, tmp_path)
        turn = asyncio.create_task(
            conn.prompt(session_id=session, prompt=[text_block("run the endless tool")]))
        await system.wait_for(
            lambda: _ready(marks / "tool.pid", marks / "detached.pid", editor), timeout=90)
        pids = [int((marks / name).read_text()) for name in ("tool.pid", "detached.pid")]
        assert all(alive(pid) for pid in pids)
        await conn.cancel(session_id=session)
        answer = await asyncio.wait_for(turn, 60)

    assert answer.stop_reason == "cancelled"
    # The turn was answered only once the stop had ended every process of the tool.
    assert [pid for pid in pids if alive(pid)] == []
    assert not (marks / "written").exists()
    [started] = editor.of(ToolCallStart)
    assert [u.status for u in editor.of(ToolCallProgress)
            if u.tool_call_id == started.tool_call_id] == ["failed"]


async def _ready(tool: Path, detached: Path, editor: Editor) -> bool:
    return tool.exists() and detached.exists() and bool(editor.of(ToolCallStart)) and all(
        p.read_text().strip() for p in (tool, detached))
