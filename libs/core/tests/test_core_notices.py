from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from seedline_core.brief import PREAMBLE, BriefRow, compose_brief
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
    offline_text,
    open_notice,
    runner_offline_notice_text,
    runner_too_old_text,
    wake_refused_text,
    stopped_idle_text,
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


def test_runner_offline_notification_says_what_the_next_message_does() -> None:
    text = runner_offline_notice_text("Mac mini", "mac-mini-1")
    assert text.startswith("Your Mac mini is offline.")
    assert "next message" in text and "brief" in text


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
    assert "next message continues it" in text
    assert "brief of what happened so far" in text
    assert "open" not in text.lower()
    assert "1 hour and 30 minutes" in stopped_idle_text(timedelta(minutes=90), None)


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
