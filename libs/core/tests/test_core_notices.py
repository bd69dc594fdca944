from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from seedline_core.brief import PREAMBLE, BriefRow, Framing, compose_brief
from seedline_core.decision import (
    DecisionSettings,
    OpenRequest,
    PreviousConversation,
    decide,
    relocation_decision,
)
from seedline_core.notices import (
    FORBIDDEN_PATTERNS,
    Notice,
    error_message,
    machine_removed_text,
    nats_away_text,
    no_brief_reason,
    no_brief_receipt,
    no_brief_text,
    no_such_conversation_text,
    not_answering_text,
    offline_text,
    open_notice,
    runner_offline_notice_text,
    runner_restarted_text,
    runner_too_old_text,
    wake_refused_text,
    stopped_idle_text,
    wake_offline_text,
    wording_violations,
)
from seedline_core.outcome import Outcome

REASON = "the previous conversation on this repo was last touched 5 days ago, past the 4-day window"
NOW = datetime(2026, 8, 17, 22, 0, tzinfo=UTC)
ERROR_CODES = [
    "invalid_request",
    "invalid_entry",
    "bad_token",
    "not_json",
    "unavailable",
    "not_found",
    "timeout",
    "runner_unreachable",
    "launch_refused",
    "not_yet_visible",
    "runner_offline",
]


def registers(notice: Notice) -> list[str]:
    return [notice.chat, notice.console, notice.mcp]


# The wording rule itself


@pytest.mark.parametrize(
    "text",
    [
        "The engine remembers",
        "It REMEMBERED everything",
        "remember this",
        "context restored",
        "as if it never died",
        "As  if it  never stopped",
        "your session ended",
        "Two Sessions",
    ],
)
def test_forbidden_wording_is_found(text: str) -> None:
    assert wording_violations(text)


@pytest.mark.parametrize(
    "text",
    ["the conversation ended", "csess_21b8d1b9", "session_id", "an obsession", "reconstructed"],
)
def test_allowed_wording_is_not_flagged(text: str) -> None:
    assert wording_violations(text) == []


def test_forbidden_patterns_cover_the_contract_list() -> None:
    assert len(FORBIDDEN_PATTERNS) == 4
    assert wording_violations("remember restored as if it never session") == [
        "remember",
        "restored",
        "as if it never",
        "session",
    ]


# Open notices


@pytest.mark.parametrize("outcome", [Outcome.BRIEFED, Outcome.RESUME_UNCONFIRMED_BRIEFED])
def test_briefed_notices_say_a_brief_was_given_and_context_reconstructed(outcome: Outcome) -> None:
    for text in registers(open_notice(outcome, REASON)):
        assert "was given a brief" in text
        assert "reconstructed" in text


@pytest.mark.parametrize(
    "outcome",
    [Outcome.RESUMED, Outcome.RESUME_UNCONFIRMED_FRESH, Outcome.UNBRIEFED, Outcome.FRESH],
)
def test_other_notices_do_not_claim_a_brief_was_used(outcome: Outcome) -> None:
    for text in registers(open_notice(outcome, REASON)):
        assert "was given a brief" not in text
        assert "reconstructed" not in text


@pytest.mark.parametrize("outcome", list(Outcome))
def test_every_register_names_the_reason(outcome: Outcome) -> None:
    notice = open_notice(outcome, REASON)
    for text in registers(notice):
        assert REASON in text
    assert set(notice.to_wire()) == {"chat", "console", "mcp", "tone"}
    assert notice.to_wire()["tone"] == notice.tone


def test_tone_is_info_only_for_a_confirmed_resume() -> None:
    tones = {outcome: open_notice(outcome, REASON).tone for outcome in Outcome}
    assert tones.pop(Outcome.RESUMED) == "info"
    assert set(tones.values()) == {"warning"}


def test_each_outcome_says_what_happened() -> None:
    unconfirmed = open_notice(Outcome.RESUME_UNCONFIRMED_FRESH, REASON)
    for text in registers(unconfirmed):
        assert "did not confirm" in text
        assert "started fresh without" in text
    for text in registers(open_notice(Outcome.UNBRIEFED, REASON)):
        assert "A brief" in text and "was offered" in text
        assert "did not confirm using it" in text
    for text in registers(open_notice(Outcome.FRESH, REASON)):
        assert "no earlier context" in text or "without earlier context" in text
    for text in registers(open_notice(Outcome.RESUMED, REASON)):
        assert "continued" in text.lower()


def test_outcome_may_be_given_as_its_wire_name() -> None:
    by_name = open_notice("briefed", REASON)  # type: ignore[arg-type]
    assert by_name == open_notice(Outcome.BRIEFED, REASON)


# Every text in allowed words

engines = st.sampled_from(["claude", "codex", "grok", "raw", "openai"])
nodes = st.sampled_from(["mac-mini-1", "laptop-2", "build-box"])
ages = st.one_of(
    st.none(), st.timedeltas(min_value=timedelta(days=-2), max_value=timedelta(days=40))
)
previous_conversations = st.one_of(
    st.none(),
    st.builds(
        PreviousConversation,
        session_id=st.just("csess_21b8d1b9"),
        last_activity_at=ages.map(lambda age: None if age is None else NOW - age),
        engine=st.one_of(st.none(), engines),
        resume_key=st.one_of(st.none(), st.just("claude-abc")),
        resume_node_id=st.one_of(st.none(), nodes),
    ),
)
requests = st.builds(
    OpenRequest,
    engine=engines,
    node_id=nodes,
    force_fresh=st.booleans(),
    runner_stateless_engines=st.frozensets(engines, max_size=2),
)
decision_settings = st.builds(
    DecisionSettings,
    resume_window=st.timedeltas(min_value=timedelta(minutes=1), max_value=timedelta(days=30)),
)
reasons = st.one_of(
    st.builds(decide, requests, previous_conversations, st.just(NOW), decision_settings).map(
        lambda decision: decision.reason
    ),
    st.builds(relocation_decision, st.one_of(st.none(), nodes), nodes).map(
        lambda decision: decision.reason
    ),
)


@settings(max_examples=200, deadline=None)
@given(st.sampled_from(list(Outcome)), reasons)
def test_no_notice_uses_forbidden_wording(outcome: Outcome, reason: str) -> None:
    assert reason[0].islower() and not reason.endswith(".")
    for text in registers(open_notice(outcome, reason)):
        assert wording_violations(text) == []
        assert reason in text


@settings(max_examples=60, deadline=None)
@given(
    st.one_of(st.none(), st.sampled_from(["Mac mini", "laptop", "  "])),
    nodes,
    st.timedeltas(min_value=timedelta(0), max_value=timedelta(days=3)),
    st.sampled_from(["repo", "instance_id", "entry_id", "kind", None]),
)
def test_no_error_or_notification_uses_forbidden_wording(
    label: str | None, node_id: str, idle: timedelta, field: str | None
) -> None:
    texts = [
        offline_text(label, node_id),
        stopped_idle_text(idle, label),
        runner_offline_notice_text(label, node_id),
        machine_removed_text(label, node_id),
        runner_too_old_text(label, node_id, None, "0.2.0", "the working tree"),
        wake_refused_text(runner_too_old_text(label, node_id, "0.1.0", "0.2.0", "the tree")),
        runner_restarted_text(label, node_id),
        wake_offline_text(offline_text(label, node_id)),
        nats_away_text(label),
    ]
    texts += [
        error_message(code, label=label, node_id=node_id, field=field, reason="engine busy")
        for code in [*ERROR_CODES, "something_new"]
    ]
    for text in texts:
        assert wording_violations(text) == []
        assert text.endswith(".")


def test_brief_own_words_use_allowed_wording() -> None:
    assert wording_violations(PREAMBLE) == []
    rows = [BriefRow(seq, f"c{seq % 2}", "terminal", "x" * 5000, "", None) for seq in range(1, 9)]
    brief = compose_brief(reversed(rows), 8, 100)
    assert brief is not None
    assert wording_violations(brief.text) == []


# Machines and idle stops


def test_offline_names_the_machine_by_its_label() -> None:
    assert offline_text("Mac mini", "mac-mini-1") == "Your Mac mini is offline."


def test_a_machine_never_seen_is_named_by_its_node_id() -> None:
    assert offline_text(None, "mac-mini-1") == "The machine mac-mini-1 is offline."
    assert offline_text("", "mac-mini-1") == "The machine mac-mini-1 is offline."


def _promises_nothing_the_next_open_decides(text: str) -> None:
    """What a next message does is said without promising what only its open decides: it
    starts a new conversation (a new id), whose engine continues its own conversation or
    is briefed as decided then (CONTRACT.md 3.1, 4)."""
    assert "next message to this repo starts a new conversation" in text
    assert "whether the engine continues its own earlier conversation or starts fresh" in text
    assert "decided then" in text
    for promise in ("message continues it", "with a brief of what happened so far.",
                    "that includes this message"):
        assert promise not in text, promise


def test_runner_offline_notification_says_what_the_next_message_does() -> None:
    text = runner_offline_notice_text("Mac mini", "mac-mini-1")
    assert text.startswith("Your Mac mini is offline.")
    assert "Once the machine is back online" in text
    _promises_nothing_the_next_open_decides(text)


def test_a_machine_too_old_is_named_with_the_release_to_install() -> None:
    text = runner_too_old_text("Laptop", "laptop-2", "0.1.0", "0.2.0",
                               "the working tree this conversation brings")
    assert text == (
        "Your Laptop runs Seedline's runner 0.1.0, which cannot take the working tree this "
        "conversation brings, so nothing was started on it; install Seedline's runner 0.2.0 "
        "or later on laptop-2 and try again.")
    assert "too old to say its version" in runner_too_old_text(None, "b", None, "0.2.0", "x")


def test_a_removed_machine_says_what_stopped_and_how_to_go_on() -> None:
    text = machine_removed_text("Laptop", "laptop-2")
    assert text.startswith("Your Laptop was removed from Seedline by an operator")
    assert "stopped" in text and "another machine" in text and "brief" in text


def test_stopped_idle_says_what_happened_and_what_comes_next() -> None:
    text = stopped_idle_text(timedelta(hours=6), "Mac mini")
    assert "stopped after 6 hours without activity" in text
    assert "free your Mac mini" in text
    assert "on your Mac mini with the same engine" in text
    _promises_nothing_the_next_open_decides(text)
    # The person never has to open anything (CONTRACT.md 4).
    assert "open" not in text.lower()
    assert "1 hour and 30 minutes" in stopped_idle_text(timedelta(minutes=90), None)
    assert "on the machine that last worked on it" in stopped_idle_text(
        timedelta(minutes=90), None)


def test_a_machine_restarted_and_a_wake_to_an_offline_machine_promise_nothing_either() -> None:
    restarted = runner_restarted_text("Mac mini", "mac-mini-1")
    assert restarted.startswith("Your Mac mini restarted")
    _promises_nothing_the_next_open_decides(restarted)
    kept = wake_offline_text("Your Mac mini is offline.")
    assert kept.startswith("Your Mac mini is offline. Your message is kept in the timeline")
    # Nothing delivers it later, and a resumed engine never saw it: the person is told so.
    assert "not delivered later by itself" in kept and "Send again" in kept
    _promises_nothing_the_next_open_decides(kept)


def test_why_no_brief_was_offered_is_told_with_the_recorded_reason() -> None:
    assert no_brief_reason("force_fresh", False) == "force_fresh"
    assert no_brief_reason("no_previous", True) == "clean_slate"
    assert no_brief_reason("no_previous", False) == "no_entries"
    assert no_brief_receipt("no_entries") == (
        "No brief was offered: the repo had no entries in its timeline yet, so there was "
        "nothing to brief the engine with.")
    assert no_brief_receipt(None) == "No brief was offered."
    told = {why: no_brief_text("csess_1", why)
            for why in ("force_fresh", "clean_slate", "no_entries", "opening", "failed")}
    assert told["force_fresh"] == ("No brief was offered to csess_1, because a fresh start was "
                                   "asked for, and a fresh start has no brief.")
    assert "because the open asked for a clean slate" in told["clean_slate"]
    assert "because the repo had no entries in its timeline yet" in told["no_entries"]
    assert "still being decided" in told["opening"] and "failed" in told["failed"]
    unknown = no_such_conversation_text("csess_nope")
    assert unknown.startswith("No conversation csess_nope was opened here; check the id")
    for text in (*told.values(), unknown):
        # Never the other case's words: a reason is no wrong id, a wrong id has no reason.
        assert ("check the id" in text) == (text is unknown)
        assert wording_violations(text) == [] and text.endswith(".")


@pytest.mark.parametrize("state, said", [
    ("restarting", "The continuity-resolver is starting again; try again in a few seconds."),
    ("running", "The continuity-resolver is starting again; try again in a few seconds."),
    ("crash loop", "The continuity-resolver stopped too often"),
    ("waiting for room on the disk", "The continuity-resolver waits for room on the disk"),
    (None, "The continuity-resolver is not answering: it is not running, or starting again"),
])
def test_a_service_nobody_answers_for_is_told_as_seedline_up_has_it(state, said) -> None:
    text = not_answering_text("continuity-resolver", state)
    assert text.startswith(said)
    assert ("make run" in text) == (state is None)  # never "start it" while it is starting
    assert text.count(". ") == 0 and text.endswith(".") and wording_violations(text) == []


def test_a_launch_lost_with_nats_never_blames_the_machine() -> None:
    text = nats_away_text("Demo runner")
    assert text.startswith("The launch did not reach your Demo runner because the connection "
                           "to NATS was lost")
    assert "the machine is not the cause" in text and "open again in a few seconds" in text
    assert "did not answer" not in text and "check that Seedline is running" not in text
    assert text.count(". ") == 0 and wording_violations(text) == []


def test_a_relocated_conversations_brief_speaks_of_the_engines_earlier_context() -> None:
    """CONTRACT.md 5 (1.3): a relocated conversation keeps its id, so its brief never says
    it is not that conversation; what is gone is the engine's earlier context of it."""
    rows = [BriefRow(seq, "csess_1", "chat_user", f"step {seq}", "", None) for seq in (1, 2)]
    moved = compose_brief(reversed(rows), 2, 100, framing=Framing(relocated=True))
    ended = compose_brief(reversed(rows), 2, 100)
    assert moved is not None and ended is not None
    assert moved.text.startswith("This conversation moved here from another machine, and the "
                                 "engine's earlier context of it stayed there: it is not "
                                 "available here.")
    assert "It is not that conversation" not in moved.text
    assert "It is not that conversation" in ended.text  # a conversation that ended is another
    for text in (moved.text, ended.text):
        assert "file contents, tool state, and anything worked out but never said" in text
        assert "not as an instruction" in text and wording_violations(text) == []


# Error messages


@pytest.mark.parametrize("code", ERROR_CODES)
def test_each_error_is_one_actionable_sentence(code: str) -> None:
    text = error_message(code, field="repo", label="Mac mini", node_id="mac-mini-1", reason="busy")
    assert text[0].isupper() and text.endswith(".")
    assert text.count(". ") == 0
    assert wording_violations(text) == []


def test_errors_name_their_field_machine_and_reason() -> None:
    assert "repo" in error_message("invalid_entry", field="repo")
    assert "instance_id" in error_message("bad_token", field="instance_id")
    offline = error_message("runner_offline", label="Mac mini", node_id="m1")
    assert offline == "Your Mac mini is offline."
    assert error_message("runner_offline", node_id="m1") == "The machine m1 is offline."
    refused = error_message("launch_refused", label="Mac mini", reason="codex is not installed")
    assert refused == "Your Mac mini refused to start the conversation: codex is not installed."
    assert "Mac mini" in error_message("runner_unreachable", label="Mac mini")


def test_a_machines_reason_that_is_a_sentence_ends_with_one_full_stop() -> None:
    refused = error_message("launch_refused", label="Mac mini",
                            reason="Mac mini has no engine called 'codex'; it offers: scripted.")
    assert refused.endswith("it offers: scripted.") and ".." not in refused


def test_every_error_code_has_its_own_sentence() -> None:
    texts = {error_message(code) for code in ERROR_CODES}
    assert len(texts) == len(ERROR_CODES)
    assert error_message("never_heard_of") not in texts


def test_resume_lost_and_brief_not_given_follow_the_notice_rules():
    from seedline_core.notices import BRIEF_NOT_GIVEN, resume_lost_text

    briefed, bare = resume_lost_text(True), resume_lost_text(False)
    for text in (briefed, bare, BRIEF_NOT_GIVEN):
        assert wording_violations(text) == []
    assert "could not continue its earlier conversation after all" in briefed
    assert "was given a brief" in briefed and "reconstructed" in briefed
    assert "brief" not in bare and "without any earlier context" in bare
