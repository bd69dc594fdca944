"""Reading Claude Code and Codex transcripts (pure): real files from tests/data."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

from seedline_cli.transcripts import claude, codex

DATA = Path(__file__).resolve().parents[3] / "tests" / "data" / "engine_transcripts"
CLAUDE_TOOLS = DATA / "claude" / "spotter-tool-heavy.jsonl"
CLAUDE_SHORT = DATA / "claude" / "spotter-short.jsonl"
CODEX_DESKTOP = DATA / "codex" / (
    "rollout-2026-05-11T11-26-55-019e1625-789d-76c0-80ab-3724b5ddb799.jsonl"
)
CODEX_CLI = DATA / "codex" / (
    "rollout-2026-12-01T09-51-42-01a23104-68fe-7733-b08a-841035ff1a5b.jsonl"
)


def numbered(path: Path) -> list[tuple[int, str]]:
    return list(enumerate(path.read_text(encoding="utf-8").splitlines(), start=1))


def summary(transcript) -> list[tuple[str, str]]:
    return [(item.kind, item.content.splitlines()[0][:50]) for item in transcript.items]


def test_a_claude_session_gives_prompts_replies_tool_calls_and_results_in_order():
    transcript = claude.parse(numbered(CLAUDE_TOOLS))

    assert (transcript.session_id, transcript.cwd) == (
        "d6e0bada-1959-4eec-a9d2-0bfade768d8f", "/home/marco/projects/spotter"
    )
    assert transcript.malformed == []
    assert summary(transcript)[:7] == [
        ("chat_user", "start phoenix in background"),
        ("command", "Bash: mix phx.server"),
        ("terminal", "Command running in background with ID: bae407b. Ou"),
        ("chat_assistant", "Phoenix server is starting in the background."),
        ("command", "Bash: tail -5 /tmp/claude-1000/-home-marco-project"),
        ("terminal", "  Serializer: Phoenix.Socket.V2.JSONSerializer"),
        ("system", "[Request interrupted by user]"),
    ]
    assert Counter(item.kind for item in transcript.items) == {
        "chat_user": 2, "chat_assistant": 1, "command": 6, "terminal": 6, "system": 4
    }
    first = transcript.items[0]
    assert first.entry_id == (
        "claude:d6e0bada-1959-4eec-a9d2-0bfade768d8f:5440873c-2d59-4c8c-88ec-c0a8c38a027d:0"
    )
    assert first.at == "2026-02-10T22:57:54.684Z"


def test_claude_bookkeeping_notes_to_the_model_and_thinking_are_left_out_and_counted():
    transcript = claude.parse(numbered(CLAUDE_SHORT))

    assert dict(transcript.skipped) == {
        "Claude Code's own file-history-snapshot records": 1,
        "Claude Code's own progress records": 3,
        "Claude Code's own system records": 2,
        "the model's thinking": 1,
        "empty text": 1,
    }
    assert "the model's thinking" not in {item.content for item in transcript.items}
    tool_heavy = claude.parse(numbered(CLAUDE_TOOLS))
    assert tool_heavy.skipped["Claude Code's notes to the model"] == 1
    assert not any("local-command-caveat" in item.content for item in tool_heavy.items)


def test_reading_the_same_file_again_gives_the_same_ids_and_no_id_twice():
    once, again = claude.parse(numbered(CLAUDE_TOOLS)), claude.parse(numbered(CLAUDE_TOOLS))

    ids = [item.entry_id for item in once.items]
    assert ids == [item.entry_id for item in again.items]
    assert len(set(ids)) == len(ids)


def test_malformed_lines_are_named_by_number_and_nothing_else_is_lost():
    lines = [text for _, text in numbered(CLAUDE_SHORT)]
    broken = lines[:3] + ["not json at all"] + lines[3:6] + [lines[6][:40]] + lines[6:] + [None]

    transcript = claude.parse(list(enumerate(broken, start=1)))

    assert transcript.malformed == [
        (4, "not a JSON object"),
        (8, "not a JSON object"),
        (len(broken), "the line is too long to read"),
    ]
    assert transcript.items == claude.parse(numbered(CLAUDE_SHORT)).items


def test_a_codex_rollout_takes_the_persons_words_from_user_message_events():
    transcript = codex.parse(numbered(CODEX_DESKTOP))

    assert transcript.session_id == "019e1625-789d-76c0-80ab-3724b5ddb799"
    assert transcript.cwd == "/Users/Sample_User/repos/codemie-ai/codemie-code"
    assert summary(transcript) == [
        ("chat_user", "show tools"),
        ("command", "exec_command: sed -n '1,180p' /Users/Sample_User/."),
        ("terminal", "Chunk ID: a21e41"),
        ("command", 'write_stdin {"chars": "", "max_output_tokens": 120'),
        ("terminal", "Chunk ID: 853167"),
        ("chat_assistant", "Available tool groups in this session:"),
    ]
    # The model's copies of the message (AGENTS.md, then the message) are not the person's.
    assert transcript.skipped["the model's copy of a person's message"] == 2
    assert transcript.skipped["the model's reasoning"] == 1


def test_a_rollout_of_the_pinned_codex_holds_both_turns_of_a_resumed_thread():
    transcript = codex.parse(numbered(CODEX_CLI))

    assert transcript.session_id == "01a23104-68fe-7733-b08a-841035ff1a5b"
    assert [kind for kind, _ in summary(transcript)] == [
        "chat_user", "chat_assistant", "command", "terminal",
        "chat_assistant", "command", "terminal", "chat_assistant",
        "chat_user", "chat_assistant",
    ]
    assert transcript.items[-1].content == (
        "stand-in heard 2 prompt(s): Add castling to the move generator | Now add en passant"
    )
    # Newer Codex numbers its lines: the ids use that ordinal.
    assert transcript.items[0].entry_id == "codex:01a23104-68fe-7733-b08a-841035ff1a5b:7:0"


def test_an_early_rollout_without_wrappers_or_events_reads_its_user_messages():
    # The shape of Codex rollouts before session_meta and event_msg existed (0.1x).
    lines = [
        {"id": "0196-early", "timestamp": "2025-05-01T10:00:00Z", "instructions": None},
        {"type": "message", "role": "user", "content": [
            {"type": "input_text", "text": "<environment_context>cwd</environment_context>"}]},
        {"type": "message", "role": "user", "content": [
            {"type": "input_text", "text": "fix the tests"}]},
        {"type": "function_call", "name": "shell", "call_id": "c1",
         "arguments": json.dumps({"command": ["bash", "-lc", "pytest -q"]})},
        {"type": "function_call_output", "call_id": "c1",
         "output": json.dumps({"output": "3 passed", "metadata": {"exit_code": 0}})},
        {"type": "message", "role": "assistant", "content": [
            {"type": "output_text", "text": "All green."}]},
    ]

    transcript = codex.parse([(n, json.dumps(line)) for n, line in enumerate(lines, 1)])

    assert transcript.session_id == "0196-early"
    assert summary(transcript) == [
        ("chat_user", "fix the tests"),
        ("command", "shell: bash -lc pytest -q"),
        ("terminal", "3 passed"),
        ("chat_assistant", "All green."),
    ]
    # Lines without a time of their own take the time before them.
    assert {item.at for item in transcript.items} == {"2025-05-01T10:00:00Z"}
