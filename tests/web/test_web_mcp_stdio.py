"""An agent's side of MCP: the SDK's own client starts `seedline mcp` over stdio and
works on a repo of the running system."""

from __future__ import annotations

import os
import sys
from contextlib import asynccontextmanager
from pathlib import Path

import pytest
from mcp import Client, StdioServerParameters

from seedline_core.notices import wording_violations
from seedline_runner.engines.scripted import ScriptedEngine

from .conftest import INSTANCE, REPO

pytestmark = pytest.mark.servers
SEEDLINE = str(Path(sys.executable).parent / "seedline")


@asynccontextmanager
async def agent(settings):
    env = {**os.environ, "SEEDLINE_NATS_URL": settings.nats_url,
           "SEEDLINE_NATS_MONITOR_URL": settings.nats_monitor_url,
           "SEEDLINE_OPEN_TIMEOUT_SECONDS": "10"}
    params = StdioServerParameters(command=SEEDLINE, args=["mcp", "--instance", INSTANCE], env=env)
    async with Client(params, read_timeout_seconds=40) as client:
        yield client


def text_of(result) -> str:
    return "\n".join(block.text for block in result.content)


async def test_an_agent_opens_a_briefed_conversation_and_continues_it(system):
    engine = await system.start_runner(engine=ScriptedEngine(resumable=False))
    for n in range(1, 4):
        await system.append(n, content=f"we added castling, step {n}")
    async with agent(system.settings) as client:
        tools = {t.name: t for t in (await client.list_tools()).tools}
        assert {"open_conversation", "send_message", "read_timeline", "show_brief",
                "list_conversations", "list_machines", "stop_conversation",
                "move_conversation"} <= set(tools)

        opened = await client.call_tool("open_conversation", {
            "repo": REPO, "instruction": "What were we doing?", "machine": "mac-mini-1",
            "engine": "scripted"})
        text = text_of(opened)
        assert not opened.is_error, text
        assert "was given a brief" in text and "reconstructed" in text
        assert "Outcome, as the machine confirmed it: briefed." in text
        assert "Brief receipt: 3 entries" in text and "up to seq 3" in text
        assert "Decision: fresh (past_window)" in text
        assert not wording_violations(text)
        session_id = next(line.split()[2] for line in text.splitlines()
                          if line.startswith("Opened: conversation"))

        brief = text_of(await client.call_tool("show_brief", {"conversation_id": session_id}))
        assert "we added castling, step 3" in brief and "sha256" in brief

        sent = await client.call_tool("send_message", {"repo": REPO,
                                                       "text": "Now add en passant."})
        assert not sent.is_error, text_of(sent)
        assert f"reaches the live conversation {session_id}" in text_of(sent)

        async def delivered():
            return [p for c, p in engine.prompts if c == session_id and p == "Now add en passant."]

        await system.wait_for(delivered)

        timeline = text_of(await client.call_tool("read_timeline", {"repo": REPO}))
        assert f"── conversation {session_id} ──" in timeline
        assert "Now add en passant." in timeline and not wording_violations(timeline)
        listed = text_of(await client.call_tool("list_conversations", {}))
        assert session_id in listed and "Mac mini (mac-mini-1)" in listed
        stopped = text_of(await client.call_tool("stop_conversation",
                                                 {"conversation_id": session_id}))
        assert stopped.startswith(f"Stopped conversation {session_id}.")


async def test_an_agent_is_told_why_the_engine_continued_its_own_conversation(system):
    await system.start_runner()
    await system.append(1, content="the board renders")
    async with agent(system.settings) as client:
        # The engine is given a message and answers it: its own record then holds the
        # turn a resume must prove (CONTRACT.md 3.2, 1.2).
        first = await client.call_tool("open_conversation", {"repo": REPO,
                                                             "instruction": "Show the board."})
        assert not first.is_error, text_of(first)
        first_id = next(line.split()[2] for line in text_of(first).splitlines()
                        if line.startswith("Opened: conversation"))
        await system.wait_for(lambda: _answered(system, first_id))
        stopped = await client.call_tool("stop_conversation", {"conversation_id": first_id})
        assert "Stopped conversation" in text_of(stopped)

        again = await client.call_tool("open_conversation", {"repo": REPO,
                                                             "instruction": "Go on."})
        text = text_of(again)
        second_id = next(line.split()[2] for line in text.splitlines()
                         if line.startswith("Opened: conversation"))
        await client.call_tool("stop_conversation", {"conversation_id": second_id})
    assert not again.is_error, text
    assert text.startswith("The engine continued its own earlier conversation on this repo: "
                           "the previous conversation on this repo was last touched")
    assert "Decision: resume (resume)" in text
    assert f"Continuing from: conversation {first_id}." in text
    assert "Outcome, as the machine confirmed it: resumed." in text
    assert not wording_violations(text)


async def _answered(system, session_id: str) -> bool:
    read = await system.request("seedline.api.timeline.read", {
        "instance_id": INSTANCE, "repo": REPO, "session_id": session_id})
    return any(e["kind"] == "chat_assistant" for e in read.get("entries", []))


async def test_an_agent_is_told_why_no_brief_was_offered_apart_from_a_wrong_id(system):
    """show_brief on a conversation offered none says why, as recorded (CONTRACT.md 3.1),
    and never suggests the id is wrong; an id nobody has is said to be that. A tool called
    without what it needs is told so in one sentence naming it."""
    await system.start_runner()
    async with agent(system.settings) as client:
        first = await client.call_tool("open_conversation", {"repo": REPO,
                                                             "instruction": "Start it."})
        text = text_of(first)
        assert not first.is_error, text
        # The repo had no entries: the reply's receipt says so.
        assert ("No brief was offered: the repo had no entries in its timeline yet, so there "
                "was nothing to brief the engine with.") in text
        first_id = next(line.split()[2] for line in text.splitlines()
                        if line.startswith("Opened: conversation"))
        fresh = text_of(await client.call_tool("open_conversation", {
            "repo": REPO, "instruction": "Again, fresh.", "fresh": True}))
        fresh_id = next(line.split()[2] for line in fresh.splitlines()
                        if line.startswith("Opened: conversation"))

        none = await client.call_tool("show_brief", {"conversation_id": first_id})
        asked_fresh = await client.call_tool("show_brief", {"conversation_id": fresh_id})
        nobody = await client.call_tool("show_brief", {"conversation_id": "csess_nobody"})
        missing = await client.call_tool("send_message", {"repo": REPO})
        await client.call_tool("stop_conversation", {"conversation_id": fresh_id})
    assert none.is_error and text_of(none) == (
        f"No brief was offered to {first_id}, because the repo had no entries in its timeline "
        "yet, so there was nothing to brief the engine with.")
    assert asked_fresh.is_error and "because a fresh start was asked for" in text_of(
        asked_fresh)
    assert nobody.is_error and text_of(nobody).startswith(
        "No conversation csess_nobody was opened here; check the id")
    said = text_of(missing)
    assert missing.is_error and said == (
        "The tool send_message needs text (text: the message, as the person wrote it); call "
        "it again with it.")
    for reply in (none, asked_fresh, nobody, missing):
        assert "pydantic" not in text_of(reply) and not wording_violations(text_of(reply))
