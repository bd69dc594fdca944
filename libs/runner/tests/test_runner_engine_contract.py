"""One contract every engine adapter passes, run against each of them."""

import pytest

from seedline_runner.engines import OpenAIChatEngine, ScriptedEngine
from seedline_runner.engines.base import Engine
from seedline_runner.store import Conversation, SeedMessage

TIMELINE_KINDS = {"chat_assistant", "command", "terminal", "outcome"}


class EngineContract:
    @pytest.fixture
    def engine(self) -> Engine:
        raise NotImplementedError

    def test_it_is_an_engine(self, engine):
        assert isinstance(engine, Engine)
        assert engine.name and isinstance(engine.stateless, bool)

    async def test_a_fresh_start_is_not_a_resume(self, engine):
        started = await engine.start("c1", None)

        assert started.resumed is False

    async def test_a_key_it_never_issued_is_not_a_resume(self, engine):
        started = await engine.start("c1", "never-issued-anywhere")

        assert started.resumed is False

    async def test_a_turn_emits_timeline_kinds_and_leaves_the_conversation_alone(
        self, engine, emitted
    ):
        await engine.start("c1", None)
        conversation = Conversation("c1", [SeedMessage(role="user", content="earlier")])
        before = list(conversation.messages)
        out = emitted()

        result = await engine.run_turn(conversation, "hello there", out)

        assert {o.kind for o in out} <= TIMELINE_KINDS
        assert any(o.kind == "chat_assistant" and o.content for o in out)
        assert conversation.messages == before
        assert result.resumed in (None, False)


class TestScriptedEngine(EngineContract):
    @pytest.fixture
    def engine(self):
        return ScriptedEngine()


class TestClaudeEngine(EngineContract):
    @pytest.fixture
    def engine(self, fake_claude, monkeypatch):
        claude = fake_claude("strict")
        monkeypatch.setenv("FAKE_CLAUDE_LOG", str(claude.log_path))
        return claude.engine()


class TestOpenAIChatEngine(EngineContract):
    @pytest.fixture
    def engine(self, chat_standin):
        return OpenAIChatEngine(base_url=chat_standin.base_url, model="stand-in")
