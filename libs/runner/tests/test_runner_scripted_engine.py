import hashlib

from seedline_contracts.runner import ResumeExpect

from seedline_runner.engines import ScriptedEngine
from seedline_runner.framing import frame_first_prompt
from seedline_runner.store import Conversation

BRIEF = "The previous conversation has ended. We were adding castling."
BRIEF_SHA = hashlib.sha256(BRIEF.encode()).hexdigest()


async def test_its_reply_names_the_context_size_and_the_seed_it_received(emitted):
    engine = ScriptedEngine()
    await engine.start("c1", None)
    prompt = frame_first_prompt(BRIEF, "What were we doing?")
    out = emitted()

    await engine.run_turn(Conversation("c1"), prompt, out)

    assert out.contents() == [
        "scripted reply to: What were we doing? "
        f"(context: {len(prompt)} characters, seed sha256 {BRIEF_SHA})"
    ]


async def test_its_reply_says_when_it_received_no_seed(emitted):
    engine = ScriptedEngine()
    await engine.start("c1", None)
    out = emitted()

    await engine.run_turn(Conversation("c1"), "x" * 100, out)

    assert out[0].content == (
        f"scripted reply to: {'x' * 60} (context: 100 characters, no seed)"
    )


async def test_it_resumes_a_conversation_it_issued_and_carries_its_context(emitted):
    engine = ScriptedEngine(resumable=True)
    first = await engine.start("c1", None)
    await engine.run_turn(Conversation("c1"), "first message", emitted())
    await engine.end("c1")
    out = emitted()

    again = await engine.start("c2", first.engine_session_id)
    result = await engine.run_turn(Conversation("c2"), "second", out)

    assert (again.resumed, again.engine_session_id) == (True, first.engine_session_id)
    assert result.engine_session_id == first.engine_session_id
    assert "context: 0" not in out[0].content
    assert f"(context: {len('second')} characters" not in out[0].content


async def test_a_non_resumable_engine_starts_over_even_with_its_own_key():
    engine = ScriptedEngine(resumable=False)
    first = await engine.start("c1", None)

    again = await engine.start("c2", first.engine_session_id)

    assert again.resumed is False
    assert again.engine_session_id != first.engine_session_id


async def test_it_records_every_prompt_it_was_given(emitted):
    engine = ScriptedEngine()
    await engine.start("c1", None)
    await engine.run_turn(Conversation("c1"), "one", emitted())
    await engine.run_turn(Conversation("c1"), "two", emitted())

    assert engine.prompts == [("c1", "one"), ("c1", "two")]


async def test_a_conversation_it_was_never_given_a_message_in_is_no_resume():
    engine = ScriptedEngine(resumable=True)
    first = await engine.start("c1", None)
    await engine.end("c1")

    again = await engine.start("c2", first.engine_session_id)

    assert again.resumed is False
    assert again.engine_session_id != first.engine_session_id


async def test_it_resumes_only_when_its_store_holds_the_expected_turn(emitted):
    engine = ScriptedEngine(resumable=True)
    first = await engine.start("c1", None)
    out = emitted()
    await engine.run_turn(Conversation("c1"), "R1: build the parser", out)
    await engine.end("c1")
    key = first.engine_session_id

    reply = out[0].content[:200]
    by_reply = await engine.start("c2", key, expect=ResumeExpect(7, "chat_assistant", reply))
    by_prompt = await engine.start("c3", key, expect=ResumeExpect(6, "chat_user", "R1: build"))
    never_given = ResumeExpect(9, "chat_user", "R2: never given")
    elsewhere = await engine.start("c4", key, expect=never_given)

    assert (by_reply.resumed, by_prompt.resumed, elsewhere.resumed) == (True, True, False)


async def test_a_message_that_asks_for_time_makes_a_slow_turn(emitted, monkeypatch):
    slept = []

    async def sleep(seconds):
        slept.append(seconds)

    monkeypatch.setattr("seedline_runner.engines.scripted.asyncio.sleep", sleep)
    engine = ScriptedEngine()
    await engine.start("c1", None)
    out = emitted()

    await engine.run_turn(Conversation("c1"), "Refactor it (take 7 seconds)", out)

    assert slept == [7]
    assert [o.kind for o in out] == ["terminal", "chat_assistant"]
    assert out[0].content == "working for 7 s"
