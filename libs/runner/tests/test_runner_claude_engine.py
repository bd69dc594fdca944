"""The Claude Code adapter against a stand-in `claude` that speaks stream-json."""

import pytest

from seedline_runner.engines import ClaudeEngine, EngineError
from seedline_runner.engines.base import EngineOutput
from seedline_runner.store import Conversation


@pytest.fixture
def make_engine(fake_claude, monkeypatch):
    def make(mode: str = "faithful", **env: str):
        claude = fake_claude(mode)
        monkeypatch.setenv("FAKE_CLAUDE_LOG", str(claude.log_path))
        for name, value in env.items():
            monkeypatch.setenv(name, value)
        return claude.engine(), claude

    return make


async def test_a_fresh_turn_maps_the_stream_and_reports_the_new_conversation_id(
    make_engine, emitted
):
    engine, claude = make_engine()
    started = await engine.start("c1", None)
    out = emitted()

    result = await engine.run_turn(Conversation("c1"), "add castling", out)

    assert (started.resumed, started.engine_session_id) == (False, None)
    assert out == [
        EngineOutput("chat_assistant", "heard 0 earlier prompts; now: add castling"),
        EngineOutput("command", "Bash: ls"),
        EngineOutput("terminal", "README.md\nsrc"),
        EngineOutput("chat_assistant", "done"),
        EngineOutput("outcome", "success (2 turns, 1.2 s)"),
    ]
    assert result.engine_session_id and result.resumed is None
    assert claude.calls()[0]["argv"] == [
        "-p", "add castling", "--output-format", "stream-json", "--verbose"
    ]


async def test_the_next_turn_resumes_the_conversation_the_last_one_reported(
    make_engine, emitted
):
    engine, claude = make_engine()
    await engine.start("c1", None)
    first = await engine.run_turn(Conversation("c1"), "one", emitted())
    out = emitted()

    second = await engine.run_turn(Conversation("c1"), "two", out)

    assert claude.calls()[1]["resume"] == first.engine_session_id
    assert (second.engine_session_id, second.resumed) == (first.engine_session_id, True)
    assert out[0].content.startswith("heard 1 earlier prompts")


async def test_a_key_whose_transcript_is_on_disk_resumes_and_the_turn_confirms_it(
    make_engine, emitted
):
    engine, claude = make_engine("faithful")
    await engine.start("c1", None)
    earlier = await engine.run_turn(Conversation("c1"), "one", emitted())
    later_process = claude.engine()

    started = await later_process.start("c2", earlier.engine_session_id)
    result = await later_process.run_turn(Conversation("c2"), "two", emitted())

    assert (started.resumed, started.engine_session_id) == (True, earlier.engine_session_id)
    assert (result.resumed, result.engine_session_id) == (True, earlier.engine_session_id)


async def test_a_cli_that_starts_over_despite_resume_is_reported_as_not_resumed(
    make_engine, emitted
):
    engine, claude = make_engine("forgetful")
    await engine.start("c1", None)
    earlier = await engine.run_turn(Conversation("c1"), "one", emitted())

    started = await engine.start("c2", earlier.engine_session_id)
    result = await engine.run_turn(Conversation("c2"), "two", emitted())

    assert started.resumed is True  # the transcript is there; only the turn can tell
    assert claude.calls()[-1]["resume"] == earlier.engine_session_id
    assert result.resumed is False
    assert result.engine_session_id not in (None, earlier.engine_session_id)


async def test_a_resume_key_without_a_transcript_starts_fresh_without_asking_to_resume(
    make_engine, emitted
):
    engine, claude = make_engine("strict")

    started = await engine.start("c1", "0b7f5a4e-gone")
    result = await engine.run_turn(Conversation("c1"), "one", emitted())

    assert (started.resumed, started.engine_session_id) == (False, None)
    assert claude.calls()[0]["resume"] is None
    assert result.resumed is None and result.engine_session_id


async def test_a_refused_resume_is_answered_in_a_new_conversation(make_engine, emitted):
    engine, claude = make_engine("strict")
    await engine.start("c1", None)
    earlier = await engine.run_turn(Conversation("c1"), "one", emitted())
    started = await engine.start("c2", earlier.engine_session_id)
    claude.transcript(earlier.engine_session_id).unlink()
    out = emitted()

    result = await engine.run_turn(Conversation("c2"), "two", out)

    assert started.resumed is True
    assert [call["resume"] for call in claude.calls()[1:]] == [earlier.engine_session_id, None]
    # The refusal's result line names the requested id: that is no resume.
    assert result.resumed is False
    assert result.engine_session_id != earlier.engine_session_id
    assert out[0].content == "heard 0 earlier prompts; now: two"
    assert not any("No conversation found" in o.content for o in out)


async def test_a_resume_key_that_is_not_a_plain_id_is_never_looked_up(make_engine):
    engine, claude = make_engine()
    outside = claude.claude_home / "secret.jsonl"
    outside.parent.mkdir(parents=True, exist_ok=True)
    outside.write_text("{}")

    started = await engine.start("c1", "../../secret")

    assert started.resumed is False


async def test_a_long_prompt_goes_through_standard_input(make_engine, emitted):
    engine, claude = make_engine()
    await engine.start("c1", None)
    prompt = "é" * 80_000

    await engine.run_turn(Conversation("c1"), prompt, emitted())

    call = claude.calls()[0]
    assert call["prompt"] == prompt
    assert prompt not in call["argv"]


async def test_a_cli_that_fails_without_answering_is_an_engine_error_with_its_words(
    make_engine, emitted
):
    engine, _ = make_engine(FAKE_CLAUDE_FAIL="not logged in")
    await engine.start("c1", None)

    with pytest.raises(EngineError, match="exit code 3.*not logged in"):
        await engine.run_turn(Conversation("c1"), "one", emitted())


async def test_a_missing_executable_is_an_engine_error(tmp_path, emitted):
    engine = ClaudeEngine(executable=str(tmp_path / "no-such-claude"), workdir=tmp_path)
    await engine.start("c1", None)

    with pytest.raises(EngineError, match="could not be started"):
        await engine.run_turn(Conversation("c1"), "one", emitted())


async def test_a_turn_before_start_is_an_engine_error(make_engine, emitted):
    engine, _ = make_engine()

    with pytest.raises(EngineError):
        await engine.run_turn(Conversation("c1"), "one", emitted())
