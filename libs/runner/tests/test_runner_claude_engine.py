"""The Claude Code adapter against a stand-in `claude` that speaks stream-json."""

import pytest
from seedline_contracts.runner import ResumeExpect

from seedline_runner.engines import ClaudeEngine, EngineError
from seedline_runner.engines.base import ResumeRefused
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
    # By default it may edit files in its checkout and run commands there (nobody can
    # approve anything in -p mode).
    assert claude.calls()[0]["argv"] == [
        "-p", "add castling", "--output-format", "stream-json", "--verbose",
        "--permission-mode", "acceptEdits", "--allowedTools", "Bash",
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


async def test_a_cli_that_starts_another_conversation_is_stopped_at_its_init_line(
    make_engine, emitted
):
    engine, claude = make_engine("forgetful")
    await engine.start("c1", None)
    earlier = await engine.run_turn(Conversation("c1"), "one", emitted())
    started = await engine.start("c2", earlier.engine_session_id)
    out = emitted()

    with pytest.raises(ResumeRefused):
        await engine.run_turn(Conversation("c2"), "two", out)
    again = await engine.run_turn(Conversation("c2"), "two", emitted())

    assert (started.resumed, started.acceptance_pending) == (True, True)
    assert out == []  # nothing of the run on another conversation went out
    assert [call["resume"] for call in claude.calls()[1:]] == [earlier.engine_session_id, None]
    assert again.resumed is None
    assert again.engine_session_id not in (None, earlier.engine_session_id)


async def test_a_refused_resume_raises_and_leaves_the_engine_on_a_new_conversation(
    make_engine, emitted
):
    engine, claude = make_engine("strict")
    await engine.start("c1", None)
    earlier = await engine.run_turn(Conversation("c1"), "one", emitted())
    started = await engine.start("c2", earlier.engine_session_id)
    claude.transcript(earlier.engine_session_id).unlink()
    out = emitted()

    with pytest.raises(ResumeRefused) as refusal:
        await engine.run_turn(Conversation("c2"), "two", out)
    again = await engine.run_turn(Conversation("c2"), "two", out)

    assert started.resumed is True
    assert [call["resume"] for call in claude.calls()[1:]] == [earlier.engine_session_id, None]
    # The refusal's result line names the requested id: that is no resume.
    assert again.resumed is None
    assert again.engine_session_id != earlier.engine_session_id
    assert out[0].content == "heard 0 earlier prompts; now: two"
    assert not any("No conversation found" in o.content for o in out)
    assert "session" not in str(refusal.value).lower()


def expect(kind: str, excerpt: str) -> ResumeExpect:
    return ResumeExpect(seq=12, kind=kind, excerpt=excerpt)


async def test_a_transcript_that_holds_the_expected_turn_proves_the_resume(make_engine, emitted):
    engine, claude = make_engine("strict")
    await engine.start("c1", None)
    earlier = await engine.run_turn(Conversation("c1"), "add castling", emitted())
    key = earlier.engine_session_id

    by_reply = await claude.engine().start("c2", key, expect=expect("chat_assistant", "done"))
    by_prompt = await claude.engine().start("c3", key, expect=expect("chat_user", "add cast"))

    assert (by_reply.resumed, by_reply.engine_session_id) == (True, key)
    assert (by_prompt.resumed, by_prompt.engine_session_id) == (True, key)


async def test_an_emptied_or_cut_transcript_is_no_resume_and_the_cli_is_not_asked_for_one(
    make_engine, emitted
):
    engine, claude = make_engine("strict")
    await engine.start("c1", None)
    first = await engine.run_turn(Conversation("c1"), "add castling", emitted())
    await engine.run_turn(Conversation("c1"), "add en passant", emitted())
    key = first.engine_session_id
    transcript = claude.transcript(key)
    lines = transcript.read_text().splitlines()
    newest = expect("chat_user", "add en passant")

    transcript.write_text("\n".join(lines[:3]) + "\n")  # cut before the newest turn
    cut = await claude.engine().start("c2", key, expect=newest)
    transcript.write_text("")
    emptied = await claude.engine().start("c3", key, expect=None)
    later = claude.engine()
    await later.start("c4", key, expect=newest)
    await later.run_turn(Conversation("c4"), "carry on", emitted())

    assert (cut.resumed, cut.engine_session_id) == (False, None)
    assert (emptied.resumed, emptied.engine_session_id) == (False, None)
    assert claude.calls()[-1]["resume"] is None


class Listening(list):
    """An emit that also hears the engine name its conversation, in order with outputs."""

    async def __call__(self, output):
        self.append(("output", output.kind))

    async def bound(self, engine_session_id):
        self.append(("bound", engine_session_id))


async def test_the_conversation_id_is_announced_at_the_init_line_before_any_output(make_engine):
    engine, _ = make_engine()
    await engine.start("c1", None)
    heard = Listening()

    result = await engine.run_turn(Conversation("c1"), "add castling", heard)

    assert heard[0] == ("bound", result.engine_session_id)
    assert [kind for kind, _ in heard[1:]] == ["output"] * 5


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
