"""When `seedline acp` answers an editor's turn: on the engine's end mark for that very
message, or when the platform says the message will not be answered; never on time."""

from __future__ import annotations

from acp.schema import ToolCallProgress, ToolCallStart

from seedline_cli.acp_timeline import UpdateWriter
from seedline_cli.acp_turn import STOPPED_TEXT, TurnWatch, failed_to_wake_text
from seedline_core.notices import wording_violations
from seedline_runner.engines.tool_errors import failed_tool_text

LIVE = "csess_live"


def entry(seq: int, entry_id: str, session_id: str = LIVE, kind: str = "chat_assistant",
          content: str = "said") -> dict:
    return {"seq": seq, "entry_id": entry_id, "session_id": session_id, "kind": kind,
            "content": content}


def test_only_the_end_mark_of_the_turn_answering_this_message_ends_it():
    watch = TurnWatch(12, answering=LIVE)
    assert not watch.read(entry(11, f"{LIVE}:turn-11:end"))  # the turn before
    assert not watch.read(entry(13, "claude:s-1:u-1:0"))  # output, however long after
    assert not watch.read(entry(14, f"{LIVE}:turn-9:end"))  # another message's end
    assert not watch.read(entry(15, f"{LIVE}:launch:end"))  # not woken by this message
    assert watch.read(entry(16, f"{LIVE}:turn-12:end"))
    assert watch.ended and watch.unanswered is None


def test_a_conversation_woken_by_this_message_ends_it_with_its_first_turn():
    watch = TurnWatch(12, answering=None)
    watch.event({"type": "wake_requested", "session_id": "csess_w", "wake_seq": 11})
    assert not watch.read(entry(13, "csess_w:launch:end", session_id="csess_w"))
    watch.event({"type": "wake_requested", "session_id": "csess_new", "wake_seq": 12})
    assert watch.read(entry(14, "csess_new:launch:end", session_id="csess_new"))


def test_a_stop_ends_it_unanswered_unless_the_message_goes_to_a_woken_conversation():
    # Stopped after it said something of this turn: the answer was cut.
    watch = TurnWatch(12, answering=LIVE)
    watch.read(entry(13, "claude:s-1:u-1:0"))
    watch.event({"type": "stopped", "session_id": LIVE, "reason": "runner_offline"})
    assert watch.unanswered == STOPPED_TEXT
    # Its machine restarted before it said anything: the message wakes another one.
    watch = TurnWatch(12, answering=LIVE)
    watch.event({"type": "stopped", "session_id": LIVE, "reason": "runner_restarted"})
    assert not watch.ended
    watch.event({"type": "wake_requested", "session_id": "csess_new", "wake_seq": 12})
    watch.event({"type": "open_failed", "session_id": "csess_new",
                 "error": {"code": "runner_offline", "message": "Your Mac mini is offline."}})
    assert watch.unanswered == failed_to_wake_text("Your Mac mini is offline.")
    # Another repo's conversation stopping says nothing of this turn.
    watch = TurnWatch(12, answering=LIVE)
    watch.event({"type": "reaped", "session_id": "csess_other"})
    assert not watch.ended


def test_nothing_to_wake_for_this_repo_ends_it_with_the_notice():
    watch = TurnWatch(12)
    watch.notice({"kind": "not_woken", "repo": "apps/other", "text": "x"}, "apps/chess")
    assert not watch.ended
    watch.notice({"kind": "not_woken", "repo": "apps/chess", "text": "Nothing to wake."},
                 "apps/chess")
    assert watch.unanswered == "Nothing to wake."


def test_what_the_person_is_told_keeps_to_the_wording_rules():
    for text in (STOPPED_TEXT, failed_to_wake_text(None), failed_to_wake_text("Offline.")):
        assert not wording_violations(text), text


def test_tool_calls_start_then_finish_in_the_order_they_started():
    writer = UpdateWriter()
    first = writer.updates(entry(1, "a", kind="command", content="Bash: make test"))
    second = writer.updates(entry(2, "b", kind="command", content="Bash: make lint"))
    done = writer.updates(entry(3, "c", kind="terminal", content="12 passed"))
    failed = writer.updates(entry(4, "d", kind="terminal",
                                  content=failed_tool_text("lint: 2 errors")))
    assert [type(u) for u in first + second] == [ToolCallStart, ToolCallStart]
    assert isinstance(done[0], ToolCallProgress)
    assert (done[0].tool_call_id, done[0].status) == (first[0].tool_call_id, "completed")
    assert done[0].content[0].content.text == "12 passed"
    assert (failed[0].tool_call_id, failed[0].status) == (second[0].tool_call_id, "failed")
    # A call whose output never came is closed when its turn is.
    third = writer.updates(entry(5, "e", kind="command", content="Bash: sleep 600"))
    [closed] = writer.close_open_tools("failed")
    assert (closed.tool_call_id, closed.status) == (third[0].tool_call_id, "failed")
    assert writer.close_open_tools("failed") == []


def test_what_a_runner_tells_of_a_refusal_keeps_to_the_wording_rules():
    from seedline_runner.engines.permissions import acp_refusal, claude_refusal, codex_refusal

    for text in (claude_refusal("Write", "/etc/motd"), codex_refusal("rm -rf /"),
                 acp_refusal("ACP agent gemini", "run 'Edit /etc/hosts'")):
        assert not wording_violations(text), text
