import json
from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest

from seedline_core.decision import (
    BRANCHES,
    Branch,
    Decision,
    DecisionSettings,
    OpenRequest,
    PreviousConversation,
    ReasonCode,
    SavedRecord,
    SeedSource,
    decide,
    relocation_decision,
)
from seedline_core.notices import wording_violations

NOW = datetime(2026, 8, 17, 22, 0, tzinfo=UTC)
SETTINGS = DecisionSettings()


def request(
    engine: str = "claude", node_id: str = "mac-mini-1", **overrides: object
) -> OpenRequest:
    return replace(OpenRequest(engine=engine, node_id=node_id), **overrides)


def previous(
    age: timedelta | None = timedelta(hours=11),
    engine: str | None = "claude",
    resume_key: str | None = "claude-abc",
    resume_node_id: str | None = "mac-mini-1",
) -> PreviousConversation:
    return PreviousConversation(
        session_id="csess_21b8d1b9",
        last_activity_at=None if age is None else NOW - age,
        engine=engine,
        resume_key=resume_key,
        resume_node_id=resume_node_id,
    )


CASES = [
    (
        request(force_fresh=True),
        previous(),
        ReasonCode.FORCE_FRESH,
        "a fresh start was asked for; "
        "the previous conversation on this repo was last touched 11 hours ago",
    ),
    (request(), None, ReasonCode.NO_PREVIOUS, "there is no earlier conversation on this repo"),
    (
        request(),
        previous(age=None),
        ReasonCode.NO_ACTIVITY,
        "the earlier conversation on this repo has no recorded activity time",
    ),
    (
        request(),
        previous(age=timedelta(days=5, hours=3)),
        ReasonCode.PAST_WINDOW,
        "the previous conversation on this repo was last touched 5 days ago, past the 4-day window",
    ),
    (
        request(engine="codex"),
        previous(),
        ReasonCode.ENGINE_CHANGED,
        "the previous conversation on this repo ran on claude rather than codex "
        "and was last touched 11 hours ago",
    ),
    (
        request(engine="raw"),
        previous(engine=None),
        ReasonCode.ENGINE_STATELESS,
        "the raw engine keeps no conversation of its own; "
        "the previous conversation on this repo was last touched 11 hours ago",
    ),
    (
        request(),
        previous(resume_key=None),
        ReasonCode.NO_RESUME_KEY,
        "the claude engine never reported a conversation to continue; "
        "the previous conversation on this repo was last touched 11 hours ago",
    ),
    (
        request(node_id="laptop-2"),
        replace(previous(), saved_record=SavedRecord("mac-mini-1", "claude", "claude-abc")),
        ReasonCode.RESUME_MOVED,
        "the claude engine's own record of the previous conversation was saved on mac-mini-1 "
        "when it stopped and goes with it to laptop-2; the previous conversation on this repo "
        "was last touched 11 hours ago",
    ),
    (
        request(node_id="laptop-2"),
        previous(),
        ReasonCode.OTHER_MACHINE,
        "the claude engine's own memory of the previous conversation is on mac-mini-1, "
        "not on laptop-2; the previous conversation on this repo was last touched 11 hours ago",
    ),
    (
        request(),
        previous(),
        ReasonCode.RESUME,
        "the previous conversation on this repo was last touched 11 hours ago",
    ),
]


@pytest.mark.parametrize(("req", "prev", "code", "reason"), CASES, ids=[c[2] for c in CASES])
def test_each_reason_code_with_its_reason(
    req: OpenRequest, prev: PreviousConversation | None, code: ReasonCode, reason: str
) -> None:
    decision = decide(req, prev, NOW, SETTINGS)
    assert decision.reason_code is code
    assert decision.reason == reason


def test_every_reason_code_is_reached() -> None:
    reached = {decide(req, prev, NOW, SETTINGS).reason_code for req, prev, _, _ in CASES}
    assert reached == set(ReasonCode)


def test_branches_follow_the_contract_table_in_order() -> None:
    assert [branch.reason_code for branch in BRANCHES] == list(ReasonCode)
    assert [branch.mode for branch in BRANCHES] == ["fresh"] * 7 + ["resume", "fresh", "resume"]


def test_only_force_fresh_declines_a_seed() -> None:
    declining = [branch.reason_code for branch in BRANCHES if branch.seed is None]
    assert declining == [ReasonCode.FORCE_FRESH]
    for branch in BRANCHES:
        if branch.seed is not None:
            assert branch.seed is SeedSource.REPO_TIMELINE


def test_a_branch_cannot_be_built_without_declaring_its_seed() -> None:
    with pytest.raises(TypeError):
        Branch(  # type: ignore[call-arg]
            reason_code=ReasonCode.RESUME,
            mode="resume",
            applies=lambda s: True,
            explain=lambda s: "",
        )


def test_decision_seed_is_the_branch_seed() -> None:
    for req, prev, code, _ in CASES:
        decision = decide(req, prev, NOW, SETTINGS)
        expected = None if code is ReasonCode.FORCE_FRESH else SeedSource.REPO_TIMELINE
        assert decision.seed == expected


def test_precedence_follows_the_table_top_to_bottom() -> None:
    # Everything holds at once; switching conditions off one at a time reveals each row.
    req = request(engine="raw", node_id="laptop-2", force_fresh=True)
    prev = previous(age=timedelta(days=9), engine="claude", resume_key=None, resume_node_id=None)
    steps = [
        (ReasonCode.FORCE_FRESH, lambda r, p: (replace(r, force_fresh=False), p)),
        (ReasonCode.PAST_WINDOW, lambda r, p: (r, replace(p, last_activity_at=NOW))),
        (ReasonCode.ENGINE_CHANGED, lambda r, p: (r, replace(p, engine=None))),
        (ReasonCode.ENGINE_STATELESS, lambda r, p: (replace(r, engine="claude"), p)),
        (ReasonCode.NO_RESUME_KEY, lambda r, p: (r, replace(p, resume_key="claude-abc"))),
        (ReasonCode.OTHER_MACHINE, lambda r, p: (r, replace(p, resume_node_id="laptop-2"))),
        (ReasonCode.RESUME, lambda r, p: (r, p)),
    ]
    for expected, switch_off in steps:
        assert decide(req, prev, NOW, SETTINGS).reason_code is expected
        req, prev = switch_off(req, prev)


def test_force_fresh_beats_a_missing_previous_conversation() -> None:
    assert decide(request(force_fresh=True), None, NOW).reason == "a fresh start was asked for"
    assert decide(request(force_fresh=True), None, NOW).reason_code is ReasonCode.FORCE_FRESH


def test_no_activity_beats_engine_change() -> None:
    decision = decide(request(engine="codex"), previous(age=None), NOW, SETTINGS)
    assert decision.reason_code is ReasonCode.NO_ACTIVITY


def test_resume_carries_the_previous_id_and_key_and_fresh_carries_neither() -> None:
    resumed = decide(request(), previous(), NOW, SETTINGS)
    assert (resumed.mode, resumed.resume_from, resumed.resume_key) == (
        "resume",
        "csess_21b8d1b9",
        "claude-abc",
    )
    for req, prev, code, _ in CASES:
        decision = decide(req, prev, NOW, SETTINGS)
        if code not in (ReasonCode.RESUME, ReasonCode.RESUME_MOVED):
            assert decision.mode == "fresh"
            assert (decision.resume_from, decision.resume_key) == (None, None)


@pytest.mark.parametrize(
    ("age", "shown"),
    [
        (timedelta(seconds=59), "59 seconds ago"),
        (timedelta(seconds=60), "1 minute ago"),
        (timedelta(seconds=1), "1 second ago"),
        (timedelta(hours=1), "1 hour ago"),
        (timedelta(hours=47, minutes=59), "47 hours ago"),
        (timedelta(hours=48), "2 days ago"),
        (timedelta(days=4), "4 days ago"),
    ],
)
def test_resume_reason_shows_the_age(age: timedelta, shown: str) -> None:
    decision = decide(request(), previous(age=age), NOW, SETTINGS)
    assert decision.reason_code is ReasonCode.RESUME
    assert decision.reason == f"the previous conversation on this repo was last touched {shown}"


def test_activity_exactly_at_the_window_is_not_past_it() -> None:
    assert decide(request(), previous(age=timedelta(days=4)), NOW).reason_code is ReasonCode.RESUME
    later = previous(age=timedelta(days=4, seconds=1))
    assert decide(request(), later, NOW).reason_code is ReasonCode.PAST_WINDOW


def test_window_is_phrased_from_the_setting() -> None:
    settings = DecisionSettings(resume_window=timedelta(hours=36))
    decision = decide(request(), previous(age=timedelta(hours=40)), NOW, settings)
    assert decision.reason == (
        "the previous conversation on this repo was last touched 40 hours ago, "
        "past the 36-hour window"
    )


def test_unknown_earlier_engine_is_not_a_change() -> None:
    decision = decide(request(engine="codex"), previous(engine=None), NOW, SETTINGS)
    assert decision.reason_code is ReasonCode.RESUME


def test_runner_can_declare_an_engine_stateless() -> None:
    req = request(engine="grok", runner_stateless_engines=frozenset({"grok"}))
    decision = decide(req, previous(engine="grok"), NOW, SETTINGS)
    assert decision.reason_code is ReasonCode.ENGINE_STATELESS
    assert "the grok engine keeps no conversation of its own" in decision.reason


def test_stateless_engines_come_from_the_setting() -> None:
    settings = DecisionSettings(stateless_engines=frozenset({"codex"}))
    decision = decide(request(engine="codex"), previous(engine="codex"), NOW, settings)
    assert decision.reason_code is ReasonCode.ENGINE_STATELESS
    assert decide(request(engine="raw"), previous(engine="raw"), NOW, settings).reason_code is (
        ReasonCode.RESUME
    )


def test_resume_key_reported_by_no_known_machine_counts_as_another_machine() -> None:
    decision = decide(request(), previous(resume_node_id=None), NOW, SETTINGS)
    assert decision.reason_code is ReasonCode.OTHER_MACHINE
    assert "on another machine" in decision.reason


def test_naive_and_aware_times_mix_without_error() -> None:
    naive_previous = previous(age=None)
    naive_previous = replace(naive_previous, last_activity_at=datetime(2026, 8, 17, 11, 0))
    decision = decide(request(), naive_previous, NOW, SETTINGS)
    assert decision.reason.endswith("11 hours ago")


def test_activity_in_the_future_reads_as_zero_seconds() -> None:
    decision = decide(request(), previous(age=-timedelta(minutes=5)), NOW, SETTINGS)
    assert decision.reason.endswith("last touched 0 seconds ago")


def test_continuity_is_the_wire_object() -> None:
    continuity = decide(request(), previous(), NOW, SETTINGS).to_continuity()
    assert continuity == {
        "mode": "resume",
        "resume_from": "csess_21b8d1b9",
        "reason_code": "resume",
        "reason": "the previous conversation on this repo was last touched 11 hours ago",
    }
    assert type(continuity["reason_code"]) is str
    json.dumps(continuity)


def moved(previous: str | None, to: str, record=None) -> Decision:
    return relocation_decision("csess_1", previous, to, "claude", "k-1", None, record)


def test_relocation_is_fresh_on_another_machine_with_a_brief() -> None:
    decision = moved("mac-mini-1", "laptop-2")
    assert isinstance(decision, Decision)
    assert (decision.mode, decision.reason_code, decision.seed) == (
        "fresh",
        ReasonCode.OTHER_MACHINE,
        SeedSource.REPO_TIMELINE,
    )
    assert (decision.resume_from, decision.resume_key) == (None, None)
    assert "mac-mini-1" in decision.reason and "laptop-2" in decision.reason
    assert "moved" in decision.reason and "brief" in decision.reason
    assert moved(None, "laptop-2").reason.startswith("the conversation moved to laptop-2")


def test_a_relocation_whose_record_came_along_resumes_it_when_the_engine_is_the_same() -> None:
    from seedline_core.decision import SavedRecord, Turn

    turn = Turn(7, "chat_assistant", "Castling added")
    record = SavedRecord("mac-mini-1", "claude", "k-saved")
    carried = relocation_decision("csess_1", "mac-mini-1", "laptop-2", "claude", "k-1", turn,
                                  record)
    assert (carried.mode, carried.reason_code, carried.resume_from, carried.resume_key) == (
        "resume", ReasonCode.RESUME_MOVED, "csess_1", "k-saved")
    assert carried.resume_expect == turn and "own record" in carried.reason
    other_engine = SavedRecord("mac-mini-1", "codex", "k-saved")
    assert moved("mac-mini-1", "laptop-2", other_engine).reason_code is ReasonCode.OTHER_MACHINE


def test_an_open_on_another_machine_resumes_from_a_record_saved_when_it_stopped() -> None:
    from seedline_core.decision import OpenRequest, PreviousConversation, SavedRecord

    previous = PreviousConversation("csess_a", NOW - timedelta(hours=1), "claude", "k-a", "mac",
                                    saved_record=SavedRecord("mac", "claude", "k-saved"))
    on_pc = decide(OpenRequest(engine="claude", node_id="pc"), previous, NOW, SETTINGS)
    assert (on_pc.mode, on_pc.reason_code, on_pc.resume_key) == (
        "resume", ReasonCode.RESUME_MOVED, "k-saved")
    assert wording_violations(on_pc.reason) == [] and "saved on mac" in on_pc.reason
    # The same machine resumes as ever; another engine cannot use the record.
    assert decide(OpenRequest(engine="claude", node_id="mac"), previous, NOW,
                  SETTINGS).reason_code is ReasonCode.RESUME
    assert decide(OpenRequest(engine="codex", node_id="pc"), previous, NOW,
                  SETTINGS).reason_code is ReasonCode.ENGINE_CHANGED


def test_reasons_are_sentences_for_a_person_in_allowed_words() -> None:
    reasons = [decide(req, prev, NOW, SETTINGS).reason for req, prev, _, _ in CASES]
    reasons.append(moved("mac-mini-1", "laptop-2").reason)
    for reason in reasons:
        assert reason[0].islower()
        assert not reason.endswith(".")
        assert wording_violations(reason) == []


def test_an_entry_counts_at_the_earlier_of_its_at_and_its_acceptance():
    from seedline_core.decision import entry_activity_at

    accepted = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)
    ahead = accepted + timedelta(hours=20)
    behind = accepted - timedelta(days=3)
    assert entry_activity_at(ahead, accepted) == accepted  # a clock running ahead
    assert entry_activity_at(behind, accepted) == behind  # a backfill keeps its own time
    assert entry_activity_at(ahead, None) == ahead  # no acceptance time known: its `at`


def test_a_resume_carries_the_newest_turn_of_the_earlier_conversation():
    from seedline_core.decision import Turn, newest_turn

    turn = None
    for seq, kind, content in ((3, "chat_user", "Add castling"), (4, "terminal", "ok"),
                               (5, "chat_assistant", "x" * 500), (2, "chat_user", "older")):
        turn = newest_turn(turn, seq, kind, content)
    assert turn == Turn(5, "chat_assistant", "x" * 200)
    resumed = decide(request(), replace(previous(), newest_turn=turn), NOW)
    assert resumed.mode == "resume" and resumed.resume_expect == turn
    fresh = decide(request(node_id="elsewhere"), replace(previous(), newest_turn=turn), NOW)
    assert fresh.mode == "fresh" and fresh.resume_expect is None
