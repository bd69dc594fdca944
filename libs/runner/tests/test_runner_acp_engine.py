"""The ACP engine against a tiny agent written with the protocol's SDK (acp_tiny_agent.py)."""

from __future__ import annotations

import asyncio
import json
import os
import sys
from pathlib import Path

import pytest
from seedline_contracts.runner import ResumeExpect

from seedline_runner.engines.acp import AcpEngine
from seedline_runner.engines.acp_config import parse_acp_agents
from seedline_runner.engines.base import EngineError, EngineOutput
from seedline_runner.engines.registry import EngineOptions, build_engine
from seedline_runner.presence import presence_of
from seedline_runner.store import Conversation

# Each test starts the tiny agent as a process (or three), and importing the protocol's SDK
# alone takes it about a second: `make test` runs them, the fast loop (`make check`) not.
pytestmark = pytest.mark.slow

TINY_AGENT = Path(__file__).with_name("acp_tiny_agent.py")


def tiny_engine(store: Path, mode: str = "load", policy: str = "reject") -> AcpEngine:
    return AcpEngine(
        "tiny",
        [sys.executable, str(TINY_AGENT), str(store), mode],
        permission_policy=policy,  # type: ignore[arg-type]
    )


class Collected(list[EngineOutput]):
    async def __call__(self, output: EngineOutput) -> None:
        self.append(output)


def prompts_received(store: Path) -> list[str]:
    log = store / "prompts.log"
    if not log.is_file():
        return []
    return [json.loads(line)["prompt"] for line in log.read_text().splitlines()]


async def first_conversation(store: Path, tmp_path: Path, mode: str = "load") -> str:
    engine = tiny_engine(store, mode)
    started = await engine.start("c1", None, tmp_path)
    assert started.resumed is False and started.engine_session_id
    out = Collected()
    result = await engine.run_turn(Conversation("c1"), "add castling rules", out)
    await engine.end("c1")
    assert out == [EngineOutput("chat_assistant", "echo: add castling rules")]
    assert result.engine_session_id == started.engine_session_id
    return started.engine_session_id


EXPECT = ResumeExpect(seq=4, kind="chat_assistant", excerpt="echo: add castling rules")


async def test_a_new_conversation_streams_one_message_per_reply(tmp_path: Path) -> None:
    await first_conversation(tmp_path / "store", tmp_path)


async def test_load_whose_history_holds_the_expected_turn_resumes(tmp_path: Path) -> None:
    store = tmp_path / "store"
    earlier = await first_conversation(store, tmp_path)
    engine = tiny_engine(store)
    started = await engine.start("c2", earlier, tmp_path, expect=EXPECT)
    assert started.resumed is True and started.engine_session_id == earlier
    out = Collected()
    await engine.run_turn(Conversation("c2"), "and en passant", out)
    await engine.end("c2")
    # The replayed history is proof only: it is not emitted again as new output.
    assert out == [EngineOutput("chat_assistant", "echo: and en passant")]


async def test_load_whose_history_lacks_the_expected_turn_is_a_new_conversation(
    tmp_path: Path,
) -> None:
    store = tmp_path / "store"
    earlier = await first_conversation(store, tmp_path)
    (store / f"{earlier}.json").write_text("[]")  # the record was cut
    engine = tiny_engine(store)
    started = await engine.start("c2", earlier, tmp_path, expect=EXPECT)
    await engine.end("c2")
    assert started.resumed is False
    assert started.engine_session_id not in (None, earlier)


async def test_a_load_that_replays_nothing_is_no_proof_even_without_an_expected_turn(
    tmp_path: Path,
) -> None:
    store = tmp_path / "store"
    earlier = await first_conversation(store, tmp_path)
    (store / f"{earlier}.json").write_text("[]")  # accepted id, empty record
    engine = tiny_engine(store)
    started = await engine.start("c2", earlier, tmp_path, expect=None)
    await engine.end("c2")
    assert started.resumed is False and started.engine_session_id != earlier


async def test_a_refused_id_is_a_new_conversation(tmp_path: Path) -> None:
    store = tmp_path / "store"
    earlier = await first_conversation(store, tmp_path)
    (store / f"{earlier}.json").unlink()  # the record was wiped
    for mode in ("load", "resume"):
        engine = tiny_engine(store, mode)
        started = await engine.start("c2", earlier, tmp_path, expect=EXPECT)
        await engine.end("c2")
        assert started.resumed is False, mode
        assert started.engine_session_id != earlier


async def test_resume_accepted_by_an_agent_without_load_resumes(tmp_path: Path) -> None:
    store = tmp_path / "store"
    earlier = await first_conversation(store, tmp_path, mode="resume")
    engine = tiny_engine(store, "resume")
    started = await engine.start("c2", earlier, tmp_path, expect=EXPECT)
    await engine.end("c2")
    assert started.resumed is True and started.engine_session_id == earlier


async def test_an_agent_that_can_neither_load_nor_resume_starts_anew(tmp_path: Path) -> None:
    store = tmp_path / "store"
    earlier = await first_conversation(store, tmp_path, mode="none")
    engine = tiny_engine(store, "none")
    assert engine.name not in presence_of("n", "n", {engine.name: engine}, []).stateless_engines
    started = await engine.start("c2", earlier, tmp_path, expect=EXPECT)
    await engine.end("c2")
    assert started.resumed is False and started.engine_session_id != earlier
    # Its handshake said it keeps no conversation: the presence now says so too.
    assert presence_of("n", "n", {engine.name: engine}, []).stateless_engines == [engine.name]
    loading = tiny_engine(store, "load")
    await loading.start("c3", None, tmp_path)
    await loading.end("c3")
    assert presence_of("n", "n", {loading.name: loading}, []).stateless_engines == []


@pytest.mark.parametrize(
    ("policy", "result_text"), [("allow", "a.txt b.txt"), ("reject", "not allowed")]
)
async def test_tool_calls_plans_and_the_permission_policy_are_recorded(
    tmp_path: Path, policy: str, result_text: str
) -> None:
    engine = tiny_engine(tmp_path / "store", policy=policy)
    await engine.start("c1", None, tmp_path)
    out = Collected()
    await engine.run_turn(Conversation("c1"), "TOOL please", out)
    await engine.end("c1")
    kinds = [o.kind for o in out]
    assert kinds == ["outcome", "command", "outcome", "terminal", "chat_assistant"]
    assert out[0].content == "Plan:\n[in_progress] look around"
    assert out[1].content.startswith("list files") and '"cmd": "ls"' in out[1].content
    assert f"permission policy ({policy})" in out[2].content
    assert result_text in out[3].content
    assert out[4].content == "echo: TOOL please"


async def test_end_cancels_a_running_turn_and_ends_the_agent(tmp_path: Path) -> None:
    engine = tiny_engine(tmp_path / "store")
    await engine.start("c1", None, tmp_path)
    process = engine._agents["c1"].process
    out = Collected()
    turn = asyncio.create_task(engine.run_turn(Conversation("c1"), "SLOW job", out))
    gathered = engine._agents["c1"].client.gatherer
    while not gathered._chunks:  # the agent's first words have arrived
        await asyncio.sleep(0.05)
    turn.cancel()
    await asyncio.gather(turn, return_exceptions=True)
    assert out == [EngineOutput("chat_assistant", "working on it")]
    await engine.end("c1")
    assert process.returncode is not None
    with pytest.raises(ProcessLookupError):
        os.killpg(process.pid, 0)
    with pytest.raises(EngineError):
        await engine.run_turn(Conversation("c1"), "more", Collected())


async def test_an_agent_command_that_does_not_exist_is_an_engine_error(tmp_path: Path) -> None:
    engine = AcpEngine("ghost", [str(tmp_path / "no-such-agent")])
    with pytest.raises(EngineError, match="could not be started"):
        await engine.start("c1", None, tmp_path)


def test_agents_are_configured_by_name_and_command() -> None:
    agents = parse_acp_agents(['gemini=gemini --experimental-acp', "acp:claude=claude-code-acp"])
    assert agents == {"gemini": ("gemini", "--experimental-acp"), "claude": ("claude-code-acp",)}
    with pytest.raises(ValueError):
        parse_acp_agents(["gemini"])
    engine = build_engine("acp:gemini", EngineOptions(acp_agents=agents))
    assert engine.name == "acp:gemini" and engine.stateless is False
    with pytest.raises(ValueError, match="--acp codex="):
        build_engine("acp:codex", EngineOptions(acp_agents=agents))


# The proof of a load: what the agent replays against what the platform recorded from it.

from seedline_runner.engines.acp_updates import ReplayedMessage, history_holds  # noqa: E402

NOTICE = ("Model metadata for `stand-in-model` not found. Defaulting to fallback metadata; "
          "this can degrade performance and cause issues.")
REPLY = "Castling is in: the king moves two squares and the rook jumps over it."


def test_a_reply_recorded_after_the_agents_own_notice_is_proved_by_the_reply_replayed() -> None:
    replayed = [ReplayedMessage("chat_user", "add castling"), ReplayedMessage("chat_assistant", REPLY)]
    recorded = (NOTICE + REPLY)[:200]
    assert history_holds(replayed, "chat_assistant", recorded)
    assert history_holds(replayed, "chat_assistant", REPLY)


def test_a_notice_before_another_reply_proves_nothing() -> None:
    replayed = [ReplayedMessage("chat_assistant", "Promotion is in: a pawn on the last rank.")]
    assert not history_holds(replayed, "chat_assistant", (NOTICE + REPLY)[:200])
    # Only a notice that ends a sentence is set aside; words run into the reply are not.
    assert not history_holds([ReplayedMessage("chat_assistant", REPLY)], "chat_assistant",
                             "Before that I wonder whether " + REPLY)
    # Nor is a reply shown too little to tell (under 40 characters of a longer one).
    assert not history_holds([ReplayedMessage("chat_assistant", REPLY)], "chat_assistant",
                             (NOTICE + REPLY)[: len(NOTICE) + 20])
