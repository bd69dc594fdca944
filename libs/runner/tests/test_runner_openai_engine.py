"""The OpenAI-compatible adapter against a local chat completions stand-in."""

import pytest

from seedline_runner.engines import EngineError, OpenAIChatEngine
from seedline_runner.store import Conversation, SeedMessage, seed_if_empty


async def test_the_store_gives_it_multi_turn_memory(chat_standin, emitted):
    engine = OpenAIChatEngine(base_url=chat_standin.base_url, model="stand-in")
    conversation = Conversation("c1")
    await engine.start("c1", None)
    first, second = emitted(), emitted()

    await engine.run_turn(conversation, "add castling", first)
    conversation.append_exchange("add castling", first[0].content)
    await engine.run_turn(conversation, "and en passant", second)

    assert first.contents() == ["received 1 messages; last: add castling"]
    assert second.contents() == ["received 3 messages; last: and en passant"]
    roles = [m["role"] for m in chat_standin.requests[1]["messages"]]
    assert roles == ["user", "assistant", "user"]


async def test_a_seeded_conversation_is_sent_whole_with_tool_exchanges_in_chat_form(
    chat_standin, emitted
):
    engine = OpenAIChatEngine(base_url=chat_standin.base_url, model="m", system_prompt="be brief")
    call = {"id": "call-1", "type": "function", "function": {"name": "ls", "arguments": "{}"}}
    conversation = Conversation("c1")
    seed_if_empty(conversation, [
        SeedMessage(role="user", content="list files"),
        SeedMessage(role="assistant", content="", tool_calls=[call]),
        SeedMessage(role="tool", content="a.py", tool_call_id="call-1"),
    ])

    await engine.run_turn(conversation, "and now?", emitted())

    assert chat_standin.requests[0] == {
        "model": "m",
        "messages": [
            {"role": "system", "content": "be brief"},
            {"role": "user", "content": "list files"},
            {"role": "assistant", "content": "", "tool_calls": [call]},
            {"role": "tool", "content": "a.py", "tool_call_id": "call-1"},
            {"role": "user", "content": "and now?"},
        ],
    }


async def test_the_api_key_comes_from_the_named_environment_variable(
    chat_standin, monkeypatch, emitted
):
    monkeypatch.setenv("STAND_IN_KEY", "sk-test")
    engine = OpenAIChatEngine(base_url=chat_standin.base_url, model="m", api_key_env="STAND_IN_KEY")

    await engine.run_turn(Conversation("c1"), "hi", emitted())

    assert chat_standin.headers[0]["authorization"] == "Bearer sk-test"


async def test_no_key_means_no_authorization_header(chat_standin, monkeypatch, emitted):
    monkeypatch.delenv("STAND_IN_KEY", raising=False)
    engine = OpenAIChatEngine(base_url=chat_standin.base_url, model="m", api_key_env="STAND_IN_KEY")

    await engine.run_turn(Conversation("c1"), "hi", emitted())

    assert "authorization" not in chat_standin.headers[0]


async def test_an_error_answer_is_an_engine_error_naming_the_status(chat_standin, emitted):
    chat_standin.status = 429
    engine = OpenAIChatEngine(base_url=chat_standin.base_url, model="m")

    with pytest.raises(EngineError, match="429"):
        await engine.run_turn(Conversation("c1"), "hi", emitted())


async def test_an_endpoint_that_does_not_answer_is_an_engine_error(emitted):
    engine = OpenAIChatEngine(base_url="http://127.0.0.1:9/v1", model="m")

    with pytest.raises(EngineError, match="could not be reached"):
        await engine.run_turn(Conversation("c1"), "hi", emitted())
    await engine.aclose()


async def test_it_keeps_nothing_so_it_never_resumes(chat_standin):
    engine = OpenAIChatEngine(base_url=chat_standin.base_url, model="m")

    started = await engine.start("c1", "anything")

    assert engine.stateless is True
    assert (started.resumed, started.engine_session_id) == (False, None)
