"""`seedline acp` driven as an editor would: an ACP client written with the protocol's SDK,
speaking to the real command over stdio, against all four services and a runner."""

from __future__ import annotations

import asyncio
import os
import sys
from dataclasses import dataclass, field
from typing import Any

import pytest
from acp import PROTOCOL_VERSION, spawn_agent_process, text_block
from acp.schema import (
    AgentMessageChunk,
    ClientCapabilities,
    ToolCallProgress,
    ToolCallStart,
    UserMessageChunk,
)

from seedline_contracts import subjects
from seedline_core.notices import wording_violations
from seedline_runner.engines.base import EngineOutput
from seedline_runner.engines.scripted import ScriptedEngine
from seedline_runner.framing import split_background

pytestmark = pytest.mark.servers

INSTANCE, REPO = "bd43f4de", "apps/chess-academy"


class SlowWhenAsked(ScriptedEngine):
    """Answers like the scripted engine, but a message holding SLOW never finishes (a brief
    in front that quotes an earlier SLOW message does not count)."""

    async def run_turn(self, conversation, prompt, emit):
        if "SLOW" in split_background(prompt)[1]:
            await emit(EngineOutput("chat_assistant", "working on it"))
            await asyncio.Event().wait()
        return await super().run_turn(conversation, prompt, emit)


@dataclass
class Editor:
    """The client side: keeps every update, per conversation, in arrival order."""

    updates: dict[str, list[Any]] = field(default_factory=dict)

    async def session_update(self, session_id: str, update: Any, **kwargs: Any) -> None:
        self.updates.setdefault(session_id, []).append(update)

    async def request_permission(self, *args: Any, **kwargs: Any) -> Any:
        raise AssertionError("Seedline never asks the editor for permission")

    def texts(self, session_id: str, kind: type) -> list[str]:
        return [u.content.text for u in self.updates.get(session_id, []) if isinstance(u, kind)]


def _cli_env(settings, home) -> dict[str, str]:
    return {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(home),
        "SEEDLINE_NATS_URL": settings.nats_url,
        "SEEDLINE_HOME": str(home / "seedline"),
    }


async def test_an_editor_opens_prompts_loads_and_cancels(system, tmp_path):
    await system.start_runner(engine=SlowWhenAsked())
    # A conversation that ran elsewhere (another machine, another engine), before.
    earlier = [("chat_user", "add castling"), ("command", "pytest -q tests/test_castling.py"),
               ("terminal", "3 passed"), ("chat_assistant", "castling is in, tests pass")]
    for n, (kind, content) in enumerate(earlier):
        await system.append(100 + n, kind=kind, content=content, engine="claude",
                            session_id="csess_elsewhere", at=f"2026-08-17T10:00:0{n}Z")
    editor = Editor()
    command = [sys.executable, "-m", "seedline_cli", "acp", "--instance", INSTANCE,
               "--repo", REPO, "--node", "mac-mini-1", "--engine", "scripted"]
    async with spawn_agent_process(editor, *command, env=_cli_env(system.settings, tmp_path),
                                   cwd=str(tmp_path)) as (conn, process):
        await conn.initialize(protocol_version=PROTOCOL_VERSION,
                              client_capabilities=ClientCapabilities())

        # New: the first update tells the continuity decision, in the notice's words.
        created = await conn.new_session(cwd=str(tmp_path), mcp_servers=[])
        session = created.session_id
        notice = await system.wait_for(
            lambda: _first(editor.texts(session, AgentMessageChunk)))
        # Opened with no message: the brief goes with the first prompt, and says so.
        assert "is given a brief" in notice and "first message" in notice
        assert "reconstructed" in notice
        assert not wording_violations(notice)

        # Prompt: recorded as the person's message, answered by the engine, streamed back.
        answer = await conn.prompt(session_id=session, prompt=[text_block("add en passant")])
        assert answer.stop_reason == "end_turn"
        replies = editor.texts(session, AgentMessageChunk)
        assert any("scripted reply to: add en passant" in r for r in replies[1:])
        rows = await system.request(subjects.API_TIMELINE_READ, {
            "instance_id": INSTANCE, "repo": REPO, "session_id": session})
        assert [r["content"] for r in rows["entries"] if r["kind"] == "chat_user"] == [
            "add en passant"]

        # Load: the other conversation's history, replayed in order, then it continues.
        await conn.load_session(cwd=str(tmp_path), session_id="csess_elsewhere", mcp_servers=[])
        replayed = editor.updates["csess_elsewhere"]
        assert [type(u) for u in replayed] == [
            UserMessageChunk, ToolCallStart, ToolCallProgress, AgentMessageChunk]
        assert replayed[0].content.text == "add castling"
        assert replayed[1].raw_input == {"command": "pytest -q tests/test_castling.py"}
        assert replayed[2].status == "completed"
        assert replayed[2].content[0].content.text == "3 passed"
        assert replayed[3].content.text == "castling is in, tests pass"
        answer = await conn.prompt(session_id="csess_elsewhere",
                                   prompt=[text_block("and promotion")])
        assert answer.stop_reason == "end_turn"
        later = editor.texts("csess_elsewhere", AgentMessageChunk)[1:]
        assert any("scripted reply to: and promotion" in r for r in later)

        # Cancel: the turn stops, and so does the repo's live conversation.
        turn = asyncio.create_task(
            conn.prompt(session_id=session, prompt=[text_block("SLOW rewrite everything")]))
        await system.wait_for(
            lambda: _first([t for t in editor.texts(session, AgentMessageChunk)
                            if "working on it" in t]))
        await conn.cancel(session_id=session)
        assert (await asyncio.wait_for(turn, 20)).stop_reason == "cancelled"
        listed = await system.request(subjects.API_SESSIONS_LIST, {"instance_id": INSTANCE})
        assert not [c for c in listed["conversations"] if c["repo"] == REPO]

        # The next message wakes a new conversation; its first turn's end answers the turn.
        answer = await conn.prompt(session_id=session, prompt=[text_block("castle queenside")])
        assert answer.stop_reason == "end_turn"
        assert any("scripted reply to: castle queenside" in t
                   for t in editor.texts(session, AgentMessageChunk))
        listed = await system.request(subjects.API_SESSIONS_LIST, {"instance_id": INSTANCE})
        [woken] = [c for c in listed["conversations"] if c["repo"] == REPO]
        assert woken["session_id"] != session


async def _first(values):
    return values[0] if values else None
