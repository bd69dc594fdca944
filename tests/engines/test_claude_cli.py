"""The claude engine against the real Claude Code CLI and a stand-in Messages API."""

from __future__ import annotations

import json
import re
import subprocess
import uuid

import pytest
from structlog.testing import capture_logs

from seedline_cli.transcripts import claude as claude_transcript
from seedline_runner.engines import ClaudeEngine
from seedline_runner.engines.base import ResumeRefused
from seedline_runner.store import Conversation

REPO = "apps/chess-academy"  # the checkout the conftest's repos folder holds


def engine_for(claude, *extra_args: str) -> ClaudeEngine:
    """A new adapter, as a new runner process would have it."""
    return ClaudeEngine(
        executable=str(claude.executable),
        env=claude.env,
        claude_home=claude.home,
        extra_args=extra_args,
    )


async def first_turn(claude, workdir, emitted, prompt="add castling") -> str:
    engine = engine_for(claude)
    await engine.start("c1", None, workdir)
    result = await engine.run_turn(Conversation("c1"), prompt, emitted())
    return result.engine_session_id


async def test_a_fresh_turn_streams_the_reply_and_names_a_new_conversation(
    claude, checkouts, emitted
):
    workdir = checkouts / REPO
    engine = engine_for(claude)
    started = await engine.start("c1", None, workdir)
    out = emitted()

    result = await engine.run_turn(Conversation("c1"), "add castling", out)

    assert (started.resumed, started.engine_session_id) == (False, None)
    assert out.kinds() == ["chat_assistant", "outcome"]
    assert out[0].content == "stand-in heard 1 prompt(s): add castling"
    assert out[1].content.startswith("success (1 turn")
    assert str(uuid.UUID(result.engine_session_id)) == result.engine_session_id
    assert result.resumed is None
    # Its transcript is kept in the folder of the checkout it ran in, named with every
    # character but letters and digits written as "-" (underscores too).
    [transcript] = claude.transcripts()
    assert transcript.name == f"{result.engine_session_id}.jsonl"
    assert transcript.parent.name == re.sub(r"[^A-Za-z0-9]", "-", str(workdir.resolve()))


async def test_a_resumed_conversation_reaches_the_model_with_its_earlier_turns(
    claude, checkouts, emitted
):
    workdir = checkouts / REPO
    key = await first_turn(claude, workdir, emitted)
    later = engine_for(claude)
    out = emitted()

    started = await later.start("c2", key, workdir)
    result = await later.run_turn(Conversation("c2"), "now en passant", out)

    assert (started.resumed, started.engine_session_id) == (True, key)
    assert (result.resumed, result.engine_session_id) == (True, key)
    assert out[0].content == "stand-in heard 2 prompt(s): add castling | now en passant"


async def test_a_missing_transcript_is_no_resume_and_the_cli_is_not_asked_for_one(
    claude, checkouts, emitted
):
    workdir = checkouts / REPO
    key = await first_turn(claude, workdir, emitted)
    for transcript in claude.transcripts():
        transcript.unlink()
    later = engine_for(claude)
    out = emitted()

    started = await later.start("c2", key, workdir)
    result = await later.run_turn(Conversation("c2"), "carry on", out)

    assert (started.resumed, started.engine_session_id) == (False, None)
    assert result.resumed is None and result.engine_session_id != key
    assert out[0].content == "stand-in heard 1 prompt(s): carry on"


def test_the_cli_refuses_a_resume_it_cannot_find_naming_the_requested_id(claude, checkouts):
    # What the adapter must not mistake for a resume: exit 1 and a result line that
    # carries the requested id, with no init line before it.
    requested = str(uuid.uuid4())

    done = subprocess.run(
        [str(claude.executable), "-p", "carry on", "--output-format", "stream-json",
         "--verbose", "--resume", requested],
        cwd=checkouts / REPO, env=claude.env, capture_output=True, text=True, timeout=120,
    )

    lines = [json.loads(line) for line in done.stdout.splitlines() if line.strip()]
    assert done.returncode == 1
    assert [line["type"] for line in lines] == ["result"]
    assert (lines[0]["session_id"], lines[0]["is_error"]) == (requested, True)
    assert any(requested in error for error in lines[0]["errors"])


async def test_a_refused_resume_is_never_counted_as_resumed(claude, checkouts, emitted):
    workdir = checkouts / REPO
    key = await first_turn(claude, workdir, emitted)
    later = engine_for(claude)
    started = await later.start("c2", key, workdir)
    for transcript in claude.transcripts():
        transcript.unlink()  # gone between the launch and the first turn
    out = emitted()

    with pytest.raises(ResumeRefused):
        await later.run_turn(Conversation("c2"), "carry on", out)
    result = await later.run_turn(Conversation("c2"), "carry on", out)

    assert started.resumed is True  # the transcript was there at launch
    assert result.resumed is None  # the second run asked for no resume
    assert result.engine_session_id not in (None, key)
    assert out[0].content == "stand-in heard 1 prompt(s): carry on"
    assert not any("No conversation found" in output.content for output in out)


async def test_the_conversation_id_is_announced_before_the_model_is_asked(
    claude, checkouts, emitted
):
    engine = engine_for(claude)
    await engine.start("c1", None, checkouts / REPO)
    heard: list = []

    class Listening:
        async def __call__(self, output):
            heard.append(("output", output.kind))

        async def bound(self, engine_session_id):
            heard.append(("bound", engine_session_id, len(claude.standin.conversation_requests())))

    result = await engine.run_turn(Conversation("c1"), "add castling", Listening())

    assert heard[0] == ("bound", result.engine_session_id, 0)
    assert [entry[0] for entry in heard[1:]] == ["output", "output"]


async def test_tool_calls_and_results_are_emitted_while_the_cli_is_still_working(
    claude, checkouts, emitted
):
    claude.standin.tool_commands = ["echo one", "echo two"]
    engine = engine_for(claude, "--allowedTools", "Bash")
    await engine.start("c1", None, checkouts / REPO)
    seen_by_model_at_emit: list[int] = []
    out = emitted()

    async def emit(output):
        seen_by_model_at_emit.append(len(claude.standin.conversation_requests()))
        await out(output)

    await engine.run_turn(Conversation("c1"), "run the steps", emit)

    assert out.kinds() == [
        "chat_assistant", "command", "terminal",
        "chat_assistant", "command", "terminal",
        "chat_assistant", "outcome",
    ]
    assert [o.content for o in out if o.kind in ("command", "terminal")] == [
        "Bash: echo one", "one", "Bash: echo two", "two"
    ]
    # The first call was emitted when the model had been asked once, not at the end.
    assert seen_by_model_at_emit[:2] == [1, 1]
    assert seen_by_model_at_emit[-1] == 3


async def test_line_types_the_adapter_does_not_know_are_logged_and_skipped(
    claude, checkouts, emitted
):
    plain, streamed = emitted(), emitted()
    for out, args in ((plain, ()), (streamed, ("--include-partial-messages",))):
        engine = engine_for(claude, *args)
        await engine.start("c1", None, checkouts / REPO)
        with capture_logs() as logs:
            await engine.run_turn(Conversation("c1"), "add castling", out)

    assert streamed.kinds() == plain.kinds() == ["chat_assistant", "outcome"]
    assert streamed[0] == plain[0]
    [warning] = [entry for entry in logs if entry["event"] == "claude_unknown_lines"]
    assert warning["types"] == ["stream_event"]


async def test_the_transcript_the_cli_writes_imports_as_the_conversation_it_had(
    claude, checkouts, emitted
):
    # The transcripts of this CLI version are not kept as files (they hold its system
    # prompt): this one is written here, by the real CLI, and read back by the importer.
    claude.standin.tool_commands = ["echo one"]
    engine = engine_for(claude, "--allowedTools", "Bash")
    await engine.start("c1", None, checkouts / REPO)
    out = emitted()
    result = await engine.run_turn(Conversation("c1"), "run the step", out)
    [path] = claude.transcripts()
    lines = path.read_text().splitlines()

    # The runner's own run: it published all of it live, so an import adds nothing.
    as_written = claude_transcript.parse(enumerate(lines, start=1))
    # The same lines as a person's own run of the CLI would have them.
    by_hand = claude_transcript.parse(enumerate(
        (line.replace('"entrypoint":"seedline-runner"', '"entrypoint":"cli"') for line in lines),
        start=1))

    assert as_written.items == [] and as_written.skipped
    transcript = by_hand
    assert transcript.session_id == result.engine_session_id
    assert transcript.cwd == str((checkouts / REPO).resolve())
    assert transcript.malformed == []
    said = [(o.kind, o.content) for o in out if o.kind != "outcome"]
    assert [(item.kind, item.content) for item in transcript.items] == [
        ("chat_user", "run the step"), *said
    ]
    # Each output was published live under the id the import gives the same record.
    assert [item.entry_id for item in transcript.items[1:]] == [
        o.entry_id for o in out if o.kind != "outcome"]
