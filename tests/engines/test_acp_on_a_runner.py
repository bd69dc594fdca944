"""The real ACP agent (@zed-industries/claude-agent-acp) on runners, through all four
services: fresh, resumed for real, wiped record, relocated, and switched to the claude
engine and back. The Anthropic stand-in's requests show what the model was given."""

from __future__ import annotations

import dataclasses
import shutil
import uuid

import pytest

from seedline_contracts import subjects
from seedline_contracts.times import now_text
from seedline_runner.checkouts import Checkouts
from seedline_runner.engines.acp import AcpEngine
from seedline_runner.engines.claude import ClaudeEngine
from seedline_runner.runner import Runner

from .conftest import REPO, engine_cli

pytestmark = pytest.mark.servers

INSTANCE = "bd43f4de"
BRIEF_MARK = "Background from the earlier conversation"


@pytest.fixture
def settings(settings):
    # The agent starts Claude Code through its SDK before it answers: more than 3 s.
    return dataclasses.replace(settings, launch_timeout_seconds=60, open_timeout_seconds=90)


async def start_machine(system, node_id: str, engines: dict) -> None:
    import nats

    nc = await nats.connect(system.settings.nats_url)
    runner = Runner(nc, node_id, node_id, engines, presence_interval=1.0,
                    checkouts=Checkouts(repos_dir=system.checkouts))
    await runner.start()

    async def close() -> None:
        await runner.stop()
        await nc.close()

    system.stack.push_async_callback(close)


async def open_(system, engine: str, instruction: str, node: str = "node-1") -> dict:
    reply = await system.request(subjects.API_SESSIONS_OPEN, {
        "instance_id": INSTANCE, "repo": REPO, "engine": engine, "node_id": node,
        "instruction": instruction}, timeout=120)
    assert reply["ok"], reply
    return reply


async def answered(system, standin, words: str) -> list[str]:
    """The prompts of the model request that carried ``words``, once one has."""
    async def probe():
        for prompts in reversed(standin.prompts_seen()):
            # The agent puts its own /model bookkeeping in the history: not a person's words.
            prompts = [p for p in prompts if not p.startswith(("<local-command", "<command-"))]
            if any(words in p for p in prompts):
                return prompts
        return None

    return await system.wait_for(probe, timeout=120)


async def replied(system, session_id: str) -> bool:
    """The conversation's answer is in the timeline."""
    rows = await system.request(subjects.API_TIMELINE_READ, {
        "instance_id": INSTANCE, "repo": REPO, "session_id": session_id})
    return any(row["kind"] == "chat_assistant" for row in rows["entries"])


async def test_the_acp_engine_resumes_for_real_and_is_briefed_otherwise(
    system, claude, checkouts, tmp_path
) -> None:
    agent = engine_cli("claude-agent-acp")
    system.checkouts = checkouts
    standin = claude.standin
    elsewhere_env = dict(claude.env) | {"CLAUDE_CONFIG_DIR": str(tmp_path / "node-2-config")}
    await start_machine(system, "node-1", {
        "acp:claude": AcpEngine("claude", [str(agent)], env=claude.env),
        "claude": ClaudeEngine(executable=str(claude.executable), env=claude.env,
                               claude_home=claude.home),
    })
    await start_machine(system, "node-2", {
        "acp:claude": AcpEngine("claude", [str(agent)], env=elsewhere_env)})

    # Fresh: nothing before, so no brief.
    first = await open_(system, "acp:claude", "add castling")
    assert first["outcome"] in ("fresh", "unbriefed"), first
    assert await answered(system, standin, "add castling") == ["add castling"]
    # Its answer is in the timeline before the repo is opened again: an agent stopped while
    # it still answers keeps no record of the turn, and then cannot prove a resume.
    await system.wait_for(lambda: replied(system, first["session_id"]), timeout=120)

    # Resumed for real: the agent loaded its own conversation; the model saw it again.
    second = await open_(system, "acp:claude", "now en passant")
    assert second["continuity"]["mode"] == "resume", second
    assert second["outcome"] == "resumed" and second["seeded"] is False, second
    prompts = await answered(system, standin, "now en passant")
    assert prompts == ["add castling", "now en passant"]
    assert BRIEF_MARK not in " ".join(prompts)

    # Record wiped: the agent cannot load it, so the brief goes with the message.
    # (Stopped first, so the agent is not still writing its record after the wipe.)
    stopped = await system.request(subjects.API_SESSIONS_STOP, {
        "session_id": second["session_id"], "reason": "test"}, timeout=60)
    assert stopped["ok"], stopped
    shutil.rmtree(claude.home / "projects")
    third = await open_(system, "acp:claude", "and promotion")
    assert third["resumed"] is False and third["seeded"] is True, third
    prompts = await answered(system, standin, "and promotion")
    assert "add castling" not in prompts and "now en passant" not in prompts
    assert BRIEF_MARK in prompts[-1] and "now en passant" in prompts[-1]

    # Relocated to another machine: briefed; the next message carries the brief.
    moved = await system.request(subjects.API_SESSIONS_RELOCATE, {
        "session_id": third["session_id"], "node_id": "node-2"}, timeout=120)
    assert moved["ok"] and moved["outcome"] == "briefed", moved
    entry = {"entry_id": f"m-{uuid.uuid4().hex}", "instance_id": INSTANCE, "repo": REPO,
             "session_id": third["session_id"], "kind": "chat_user",
             "content": "and stalemate", "at": now_text()}
    assert (await system.request(subjects.API_TIMELINE_APPEND, entry))["ok"]
    prompts = await answered(system, standin, "and stalemate")
    assert "and promotion" not in prompts
    assert BRIEF_MARK in prompts[-1] and "and promotion" in prompts[-1]

    # Switched to the claude engine and back: engine_changed, each time with a brief.
    stopped = await system.request(subjects.API_SESSIONS_STOP, {
        "session_id": third["session_id"], "reason": "test"}, timeout=60)
    assert stopped["ok"], stopped
    to_claude = await open_(system, "claude", "and the fifty-move rule")
    assert to_claude["continuity"]["reason_code"] == "engine_changed", to_claude
    assert to_claude["outcome"] == "briefed", to_claude
    prompts = await answered(system, standin, "and the fifty-move rule")
    assert len(prompts) == 1 and BRIEF_MARK in prompts[0] and "and stalemate" in prompts[0]
    back = await open_(system, "acp:claude", "and threefold repetition")
    assert back["continuity"]["reason_code"] == "engine_changed", back["continuity"]
    assert back["outcome"] == "briefed", back
    prompts = await answered(system, standin, "and threefold repetition")
    assert "and the fifty-move rule" not in prompts
    assert BRIEF_MARK in prompts[-1] and "the fifty-move rule" in prompts[-1]
