"""Resume proof over real engine records (tests/data/engine_transcripts)."""

import json
from pathlib import Path

import pytest
from seedline_contracts.runner import ResumeExpect

from seedline_runner.engines.resume_proof import (
    RecordMessage,
    claude_messages,
    claude_record_proves,
    codex_record_proves,
    holds_turn,
)
from seedline_runner.framing import frame_first_prompt

DATA = Path(__file__).resolve().parents[3] / "tests" / "data" / "engine_transcripts"
CLAUDE = (DATA / "claude" / "spotter-tool-heavy.jsonl").read_text().splitlines()
CODEX_THREAD = "01a23104-68fe-7733-b08a-841035ff1a5b"
CODEX = (
    DATA / "codex" / f"rollout-2026-12-01T09-51-42-{CODEX_THREAD}.jsonl"
).read_text().splitlines()
CODEX_DESKTOP_THREAD = "019e1625-789d-76c0-80ab-3724b5ddb799"
CODEX_DESKTOP = (
    DATA / "codex" / f"rollout-2026-05-11T11-26-55-{CODEX_DESKTOP_THREAD}.jsonl"
).read_text().splitlines()

CLAUDE_LAST_PROMPT = "scrolling back in xterm.js still does not work (maybe because outer web"
CLAUDE_REPLY = "Phoenix server is starting in the background.\n\nLet me check the MCP servers"
CODEX_LAST_REPLY = "stand-in heard 2 prompt(s): Add castling to the move generator | Now add"


def expect(kind: str, excerpt: str, seq: int = 41) -> ResumeExpect:
    return ResumeExpect(seq=seq, kind=kind, excerpt=excerpt)


def before_line_with(lines: list[str], text: str) -> list[str]:
    """The record cut just before the first line that carries ``text``."""
    cut = next(i for i, line in enumerate(lines) if text in line)
    return lines[:cut]


# Claude Code --------------------------------------------------------------------


def test_a_claude_transcript_holding_the_newest_prompt_proves_it():
    assert claude_record_proves(CLAUDE, expect("chat_user", CLAUDE_LAST_PROMPT)).holds


def test_a_claude_reply_proves_itself_whatever_the_whitespace():
    squeezed = CLAUDE_REPLY.replace("\n\n", " ")

    assert claude_record_proves(CLAUDE, expect("chat_assistant", CLAUDE_REPLY)).holds
    assert claude_record_proves(CLAUDE, expect("chat_assistant", squeezed)).holds


def test_a_claude_transcript_cut_before_the_newest_turn_proves_nothing():
    cut = before_line_with(CLAUDE, "scrolling back in xterm.js")

    proof = claude_record_proves(cut, expect("chat_user", CLAUDE_LAST_PROMPT))

    assert proof.holds is False and "chat_user entry 41" in proof.reason
    # What it does hold still proves the earlier turn.
    assert claude_record_proves(cut, expect("chat_assistant", CLAUDE_REPLY)).holds


@pytest.mark.parametrize("record", [[], [""], ["{not json"], ["[]"]])
def test_an_empty_or_unreadable_claude_transcript_proves_nothing_even_without_expect(record):
    assert claude_record_proves(record, None).holds is False
    assert claude_record_proves(record, expect("chat_user", "anything")).holds is False


def test_without_an_expected_turn_any_conversation_in_the_record_is_enough():
    assert claude_record_proves(CLAUDE, None).holds


def test_the_turn_must_be_of_its_kind():
    # The person's prompt is no proof of a reply that starts the same way.
    assert claude_record_proves(CLAUDE, expect("chat_assistant", CLAUDE_LAST_PROMPT)).holds is False


def test_tool_results_and_thinking_are_not_words_of_the_conversation():
    texts = [m.text for m in claude_messages(CLAUDE)]

    assert not any("Command running in background" in text for text in texts)
    assert "start phoenix in background" in texts


def test_a_prompt_the_runner_framed_with_a_brief_proves_the_person_s_message():
    line = json.loads(CLAUDE[25])
    line["message"]["content"] = frame_first_prompt("We were adding castling.", "carry on now")

    record = [*CLAUDE[:25], json.dumps(line)]

    assert claude_record_proves(record, expect("chat_user", "carry on now")).holds


def test_a_compacted_claude_transcript_still_proves_the_turns_before_its_summary():
    # Claude Code compacts by appending a boundary and a summary; the lines before stay.
    boundary = {"type": "system", "subtype": "compact_boundary", "content": "compacted"}
    summary = {
        "type": "user", "isCompactSummary": True,
        "message": {"role": "user", "content": "This session is being continued: a summary."},
    }
    compacted = [*CLAUDE, json.dumps(boundary), json.dumps(summary)]

    assert claude_record_proves(compacted, expect("chat_user", CLAUDE_LAST_PROMPT)).holds


def test_a_subagent_s_words_are_another_conversation():
    line = json.loads(CLAUDE[3])
    line["isSidechain"] = True
    line["message"]["content"] = "only a subagent said this"

    record = [*CLAUDE, json.dumps(line)]

    assert claude_record_proves(record, expect("chat_user", "only a subagent")).holds is False


def test_nul_in_a_record_counts_as_the_replacement_character_the_timeline_stores():
    messages = [RecordMessage("user", "fix the \x00 byte")]

    assert holds_turn(messages, expect("chat_user", "fix the \ufffd byte")).holds


# Codex ----------------------------------------------------------------------------


def test_a_codex_rollout_holding_the_newest_reply_proves_it():
    proof = codex_record_proves(CODEX, CODEX_THREAD, expect("chat_assistant", CODEX_LAST_REPLY))

    assert proof.holds


def test_a_codex_rollout_cut_before_the_newest_turn_proves_nothing():
    cut = before_line_with(CODEX, "Now add en passant")

    last = codex_record_proves(cut, CODEX_THREAD, expect("chat_assistant", CODEX_LAST_REPLY))
    prompt = codex_record_proves(cut, CODEX_THREAD, expect("chat_user", "Now add en passant"))
    earlier = codex_record_proves(
        cut, CODEX_THREAD, expect("chat_user", "Add castling to the move generator")
    )

    assert (last.holds, prompt.holds, earlier.holds) == (False, False, True)


def test_a_rollout_of_another_thread_or_an_empty_one_proves_nothing():
    other = "01a23104-0000-7733-b08a-841035ff1a5b"

    assert codex_record_proves(CODEX, other, None).holds is False
    assert codex_record_proves([], CODEX_THREAD, None).holds is False
    # Only its first line: the thread is named, but no word was said in it.
    assert codex_record_proves(CODEX[:1], CODEX_THREAD, None).holds is False


def test_an_older_codex_rollout_is_read_from_its_events_too():
    reply = "Available tool groups in this"

    assert codex_record_proves(
        CODEX_DESKTOP, CODEX_DESKTOP_THREAD, expect("chat_user", "show tools")
    ).holds
    assert codex_record_proves(
        CODEX_DESKTOP, CODEX_DESKTOP_THREAD, expect("chat_assistant", reply)
    ).holds


def test_a_compacted_codex_rollout_still_proves_the_turns_before_it():
    compacted = {
        "type": "compacted",
        "payload": {"message": "summary", "replacement_history": [
            {"type": "message", "role": "user",
             "content": [{"type": "input_text", "text": "a summary of earlier work"}]},
        ]},
    }
    record = [*CODEX, json.dumps(compacted)]

    assert codex_record_proves(
        record, CODEX_THREAD, expect("chat_assistant", CODEX_LAST_REPLY)
    ).holds
    assert codex_record_proves(
        record, CODEX_THREAD, expect("chat_user", "a summary of earlier")
    ).holds
