"""What a transcript's lines become: Claude Code's own messages to the model are not the
person's, and failed tools read as tool errors. Real files from tests/data."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

from seedline_cli.transcripts import RUNNER_PUBLISHED, SEEDLINE_BRIEFS, claude, codex

DATA = Path(__file__).resolve().parents[3] / "tests" / "data" / "engine_transcripts"
COMPACTED = DATA / "claude" / "claude-2.1.332-compact-and-tasks.jsonl"
SPOTTER_SHORT = DATA / "claude" / "spotter-short.jsonl"
CODEX_CLI = DATA / "codex" / (
    "rollout-2026-12-01T09-51-42-01a23104-68fe-7733-b08a-841035ff1a5b.jsonl"
)


def numbered(path: Path) -> list[tuple[int, str]]:
    return list(enumerate(path.read_text(encoding="utf-8").splitlines(), start=1))


def test_a_compaction_summary_and_a_task_notification_are_system_not_the_persons():
    transcript = claude.parse(numbered(COMPACTED))

    said = [item.content for item in transcript.items if item.kind == "chat_user"]
    assert said == ["Add castling to the move generator", "Run the tests in the background",
                    "Now add en passant"]
    system = [item.content for item in transcript.items if item.kind == "system"]
    assert [text.split("\n")[0][:60] for text in system] == [
        "<task-notification>",
        "This session is being continued from a previous conversation",
        "<command-name>/compact</command-name>",
        "<local-command-stdout>Compacted </local-command-stdout>",
    ]


def test_a_failed_command_in_claude_code_reads_as_a_tool_error():
    transcript = claude.parse(numbered(COMPACTED))

    terminals = [item.content for item in transcript.items if item.kind == "terminal"]
    assert "[tool error] Exit code 1\ncat: missing.txt: No such file or directory" in terminals
    assert sum(text.startswith("[tool error]") for text in terminals) == 1


def test_a_tool_the_person_refused_reads_as_a_tool_error():
    transcript = claude.parse(numbered(SPOTTER_SHORT))

    terminals = [item.content for item in transcript.items if item.kind == "terminal"]
    assert len(terminals) == 2
    refused = "[tool error] The user doesn't want to proceed"
    assert all(text.startswith(refused) for text in terminals)


def test_a_codex_command_that_exited_non_zero_reads_as_a_tool_error():
    transcript = codex.parse(numbered(CODEX_CLI))

    terminals = [item.content for item in transcript.items if item.kind == "terminal"]
    assert Counter(text.startswith("[tool error]") for text in terminals) == {True: 1, False: 1}
    (failed,) = [text for text in terminals if text.startswith("[tool error]")]
    assert "Process exited with code 128" in failed


# A runner machine's own engine folder -------------------------------------------------

RUNNER = DATA / "runner"
RUNNER_CLAUDE = RUNNER / "claude-ea4e83c5-1f4b-48e0-9a4f-6540c484f566.jsonl"
RUNNER_CLAUDE_STREAM = RUNNER / "claude-ea4e83c5-1f4b-48e0-9a4f-6540c484f566.stream.jsonl"
RUNNER_CODEX = RUNNER / "rollout-2026-12-02T15-09-39-01a2374d-ded1-77a2-affa-6422884a6052.jsonl"
OLDER_RUNNER_BRIEFED = RUNNER / "claude-briefed-by-an-older-runner.jsonl"


def test_a_claude_run_a_runner_made_adds_nothing_and_says_why():
    transcript = claude.parse(numbered(RUNNER_CLAUDE))

    assert transcript.items == []
    assert transcript.skipped[RUNNER_PUBLISHED] == 8  # prompt, 3 replies, 2 calls, 2 results


def test_the_runner_published_each_claude_output_under_the_id_the_import_gives_it():
    from seedline_runner.engines.claude_stream import ClaudeStream

    stream = ClaudeStream()
    live = [o for line in RUNNER_CLAUDE_STREAM.read_text().splitlines() for o in stream.feed(line)]
    # The same file as a person's own run (no runner mark): what the import would publish.
    unmarked = [(n, line.replace('"entrypoint":"seedline-runner"', '"entrypoint":"cli"'))
                for n, line in numbered(RUNNER_CLAUDE)]
    imported = {item.entry_id: (item.kind, item.content) for item in claude.parse(unmarked).items}

    named = [o for o in live if o.kind != "outcome"]
    assert len(named) == 7 and all(o.entry_id for o in named)
    assert {o.entry_id: (o.kind, o.content) for o in named} == {
        entry_id: value for entry_id, value in imported.items() if value[0] != "chat_user"
    }


def test_a_codex_run_a_runner_made_adds_nothing_and_says_why():
    transcript = codex.parse(numbered(RUNNER_CODEX))

    assert transcript.session_id == "01a2374d-ded1-77a2-affa-6422884a6052"
    assert transcript.items == []
    assert transcript.skipped[RUNNER_PUBLISHED] > 0


def test_a_seedline_brief_is_never_a_persons_message_even_from_an_older_runner():
    transcript = claude.parse(numbered(OLDER_RUNNER_BRIEFED))

    assert [item for item in transcript.items if item.kind == "chat_user"] == []
    assert transcript.items == []
    assert transcript.skipped[SEEDLINE_BRIEFS] == 1
    assert transcript.skipped[RUNNER_PUBLISHED] == 1  # the reply to it
