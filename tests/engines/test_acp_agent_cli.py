"""A real ACP agent from npm (@zed-industries/claude-agent-acp) as the engine acp:claude.

The agent runs Claude Code through its SDK against the Anthropic stand-in, each test in
a config folder of its own. What the stand-in received is the evidence: a real resume
carries the earlier prompt in the model's history, a brief-less new conversation does not.
"""

from __future__ import annotations

from pathlib import Path

from seedline_contracts.runner import ResumeExpect

from seedline_runner.engines.acp import AcpEngine
from seedline_runner.store import Conversation

from .conftest import REPO, ClaudeSetup, engine_cli

FIRST = "add castling to the chess rules"


def acp_claude(setup: ClaudeSetup, config: Path | None = None) -> AcpEngine:
    executable = engine_cli("claude-agent-acp")
    env = dict(setup.env)
    if config is not None:
        env["CLAUDE_CONFIG_DIR"] = str(config)
    return AcpEngine("claude", [str(executable)], env=env)


async def first_run(setup: ClaudeSetup, workdir: Path, emitted) -> tuple[str, str]:
    engine = acp_claude(setup)
    started = await engine.start("c1", None, workdir)
    assert started.resumed is False and started.engine_session_id
    out = emitted()
    await engine.run_turn(Conversation("c1"), FIRST, out)
    await engine.end("c1")
    replies = [o.content for o in out if o.kind == "chat_assistant"]
    assert replies, out
    return started.engine_session_id, replies[-1]


async def test_fresh_then_resumed_for_real(claude, checkouts, emitted) -> None:
    workdir = checkouts / REPO
    earlier, reply = await first_run(claude, workdir, emitted)
    engine = acp_claude(claude)
    expect = ResumeExpect(seq=3, kind="chat_assistant", excerpt=reply[:200])
    started = await engine.start("c2", earlier, workdir, expect=expect)
    assert started.resumed is True and started.engine_session_id == earlier
    out = emitted()
    await engine.run_turn(Conversation("c2"), "now en passant", out)
    await engine.end("c2")
    assert any(o.kind == "chat_assistant" for o in out)
    # The model saw the earlier prompt again: the agent continued its own conversation.
    last = claude.standin.prompts_seen()[-1]
    assert any(FIRST in p for p in last) and any("now en passant" in p for p in last)


async def test_a_wiped_record_is_a_new_conversation(claude, checkouts, emitted) -> None:
    workdir = checkouts / REPO
    earlier, reply = await first_run(claude, workdir, emitted)
    for transcript in claude.transcripts():
        transcript.unlink()
    engine = acp_claude(claude)
    expect = ResumeExpect(seq=3, kind="chat_assistant", excerpt=reply[:200])
    started = await engine.start("c2", earlier, workdir, expect=expect)
    assert started.resumed is False and started.engine_session_id != earlier
    await engine.run_turn(Conversation("c2"), "BRIEF then now en passant", emitted())
    await engine.end("c2")
    last = claude.standin.prompts_seen()[-1]
    assert not any(FIRST in p for p in last)
    assert any("BRIEF then now en passant" in p for p in last)


async def test_another_machine_has_no_record_so_starts_anew(
    claude, checkouts, tmp_path, emitted
) -> None:
    workdir = checkouts / REPO
    earlier, reply = await first_run(claude, workdir, emitted)
    elsewhere = acp_claude(claude, config=tmp_path / "other-machine-config")
    expect = ResumeExpect(seq=3, kind="chat_assistant", excerpt=reply[:200])
    started = await elsewhere.start("c2", earlier, workdir, expect=expect)
    await elsewhere.end("c2")
    assert started.resumed is False and started.engine_session_id != earlier




# Codex through @zed-industries/codex-acp, against the Responses stand-in ------------------


def acp_codex(setup, home: Path | None = None) -> AcpEngine:
    env = dict(setup.env)
    if home is not None:
        home.mkdir(parents=True, exist_ok=True)
        (home / "config.toml").write_text((setup.home / "config.toml").read_text())
        env["CODEX_HOME"] = str(home)
    return AcpEngine("codex", [str(engine_cli("codex-acp"))], env=env)


async def codex_first_run(setup, workdir: Path, emitted) -> tuple[str, str]:
    engine = acp_codex(setup)
    started = await engine.start("c1", None, workdir)
    out = emitted()
    await engine.run_turn(Conversation("c1"), FIRST, out)
    await engine.end("c1")
    replies = [o.content for o in out if o.kind == "chat_assistant"]
    assert replies and started.engine_session_id, out
    return started.engine_session_id, replies[-1]


async def test_codex_acp_fresh_then_resumed_for_real(codex, checkouts, emitted) -> None:
    workdir = checkouts / REPO
    earlier, reply = await codex_first_run(codex, workdir, emitted)
    # What the runner recorded from codex-acp opens with its own notice, which its
    # replayed history does not hold: the proof must still find the reply.
    assert reply.startswith("Model metadata for `stand-in-model` not found."), reply
    engine = acp_codex(codex)
    for expect in (ResumeExpect(seq=4, kind="chat_assistant", excerpt=reply[:200]),
                   ResumeExpect(seq=3, kind="chat_user", excerpt=FIRST)):
        started = await engine.start("c2", earlier, workdir, expect=expect)
        assert started.resumed is True and started.engine_session_id == earlier, expect
        await engine.end("c2")
    await engine.start("c2", earlier, workdir, expect=ResumeExpect(
        seq=4, kind="chat_assistant", excerpt=reply[:200]))
    await engine.run_turn(Conversation("c2"), "now en passant", emitted())
    await engine.end("c2")
    last = codex.standin.prompts_seen()[-1]
    assert any(FIRST in p for p in last) and any("now en passant" in p for p in last)


async def test_codex_acp_wiped_or_elsewhere_starts_anew(
    codex, checkouts, tmp_path, emitted
) -> None:
    workdir = checkouts / REPO
    earlier, reply = await codex_first_run(codex, workdir, emitted)
    expect = ResumeExpect(seq=3, kind="chat_user", excerpt=FIRST)
    elsewhere = acp_codex(codex, home=tmp_path / "other-machine-codex")
    started = await elsewhere.start("c2", earlier, workdir, expect=expect)
    await elsewhere.end("c2")
    assert started.resumed is False and started.engine_session_id != earlier
    for rollout in codex.rollouts():
        rollout.unlink()
    engine = acp_codex(codex)
    started = await engine.start("c3", earlier, workdir, expect=expect)
    await engine.end("c3")
    assert started.resumed is False and started.engine_session_id != earlier
