"""CONTRACT.md 4.1: the lifecycle table, what makes facts, relocation rules, reconciliation."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from seedline_core import lifecycle as lc
from seedline_core.presence import Absence, PresencePut, reconcile

AT = "2026-12-01T10:00:00Z"


def requested(session_id="csess_a", seq=1, node="mac", engine="claude") -> lc.Requested:
    return lc.Requested(session_id, "inst", "apps/x", seq, node, engine)


def opened(node="mac", engine="claude", key="k1") -> lc.Opened:
    return lc.Opened(node, engine, key, AT)


def fold(*events) -> lc.Conversation | None:
    conversation = None
    for event in events:
        conversation = lc.apply(conversation, event)
    return conversation


def test_a_request_opens_and_an_open_makes_it_live_with_its_engine_facts():
    c = fold(requested(), opened())
    assert c.state is lc.State.LIVE and c.live_node == "mac"
    assert (c.engine, c.resume_key, c.resume_node_id) == ("claude", "k1", "mac")


def test_a_failed_open_makes_no_fact_and_is_final():
    c = fold(requested(engine="claude"), lc.OpenFailed())
    assert c.state is lc.State.FAILED and c.engine is None and c.resume_key is None
    for later in (opened(), lc.Relocated("pc", "claude", None, AT), lc.Stopped("x")):
        assert lc.apply(c, later) == c


def test_stopped_leaves_only_by_relocation():
    c = fold(requested(), opened(), lc.Stopped("superseded"))
    assert c.state is lc.State.STOPPED and c.live_node is None and c.node_id == "mac"
    assert lc.apply(c, opened(node="pc")) == c
    moved = lc.apply(c, lc.Relocated("pc", None, "k2", AT))
    assert moved.state is lc.State.LIVE and moved.live_node == "pc"
    assert (moved.engine, moved.resume_key, moved.resume_node_id) == ("claude", "k2", "pc")


def test_relocating_keeps_the_old_machines_resume_key_until_the_new_one_reports():
    c = fold(requested(), opened(), lc.Relocated("pc", "claude", None, AT))
    assert c.live_node == "pc" and (c.resume_key, c.resume_node_id) == ("k1", "mac")


def test_engine_bound_counts_only_from_the_machine_it_is_live_on():
    c = fold(requested(), opened())
    assert lc.apply(c, lc.EngineBound("other", "forged")) == c
    assert lc.apply(c, lc.EngineBound("mac", "k9")).resume_key == "k9"
    assert lc.apply(fold(requested()), lc.EngineBound("mac", "k9")).resume_key is None


def test_an_opening_conversation_cannot_be_stopped_and_events_before_a_request_do_nothing():
    assert fold(requested(), lc.Stopped("requested")).state is lc.State.OPENING
    assert fold(opened()) is None


EVENTS = st.one_of(
    st.builds(lambda n: requested(node=n), st.sampled_from(["mac", "pc"])),
    st.builds(opened, st.sampled_from(["mac", "pc"]), st.sampled_from(["claude", "codex"])),
    st.just(lc.OpenFailed()),
    st.builds(lambda n: lc.Relocated(n, None, None, AT), st.sampled_from(["mac", "pc"])),
    st.builds(lc.Stopped, st.sampled_from(["idle", "superseded"])),
    st.builds(lc.EngineBound, st.sampled_from(["mac", "pc"]), st.text(min_size=1, max_size=3)),
)
ALLOWED = {
    (None, lc.State.OPENING),
    (lc.State.OPENING, lc.State.LIVE),
    (lc.State.OPENING, lc.State.FAILED),
    (lc.State.LIVE, lc.State.STOPPED),
    (lc.State.LIVE, lc.State.LIVE),
    (lc.State.STOPPED, lc.State.LIVE),
}


@given(st.lists(EVENTS, max_size=30))
def test_every_change_of_state_is_one_the_table_lists(events):
    conversation = None
    for event in events:
        after = lc.apply(conversation, event)
        before_state = conversation.state if conversation else None
        after_state = after.state if after else None
        if after != conversation:
            assert (before_state, after_state) in ALLOWED
        if before_state is lc.State.FAILED:
            assert after == conversation
        if after is not None and after.engine != (conversation.engine if conversation else None):
            assert isinstance(event, (lc.Opened, lc.Relocated))
        conversation = after


def _ran(session_id, seq, state=lc.State.STOPPED, node="mac") -> lc.Conversation:
    return lc.Conversation(session_id, "inst", "apps/x", state, seq, node_id=node)


def test_relocation_applies_to_the_newest_platform_conversation_only():
    old, new = _ran("csess_old", 1), _ran("csess_new", 2, lc.State.LIVE)
    verdict = lc.judge_relocation(old, [old, new], "pc")
    assert verdict == lc.RelocationVerdict("not_newest", "csess_new")
    assert lc.judge_relocation(new, [old, new], "pc").kind == "move"
    assert lc.judge_relocation(new, [old, new], "mac").kind == "unchanged"
    assert lc.judge_relocation(None, [old, new], "pc").kind == "not_platform"


def test_a_failed_or_opening_conversation_is_never_the_one_relocated():
    failed = _ran("csess_f", 3, lc.State.FAILED)
    stopped = _ran("csess_s", 2)
    assert lc.judge_relocation(failed, [stopped, failed], "pc").kind == "never_ran"
    assert lc.judge_relocation(stopped, [stopped, failed], "pc").kind == "move"


def test_two_successive_puts_after_the_launch_that_leave_it_out_stop_it():
    hosted = {"csess_a": 10}
    counts, gone = reconcile(PresencePut(10, frozenset()), hosted, {})
    assert (counts, gone) == ({}, [])  # made before the launch was accepted
    counts, gone = reconcile(PresencePut(11, frozenset()), hosted, counts)
    assert (counts, gone) == ({"csess_a": 1}, [])
    counts, gone = reconcile(PresencePut(12, frozenset({"csess_a"})), hosted, counts)
    assert (counts, gone) == ({}, [])  # listed again: the count starts over
    counts, _ = reconcile(PresencePut(13, frozenset()), hosted, counts)
    _, gone = reconcile(PresencePut(14, frozenset()), hosted, counts)
    assert gone == ["csess_a"]


def test_a_protocol_1_presence_is_never_reconciled():
    assert reconcile(PresencePut(99, None), {"csess_a": 1}, {"csess_a": 1}) == ({}, [])


def test_absence_is_confirmed_only_ten_seconds_after_the_first_miss():
    absent = Absence(first_missed_at=100.0)
    assert not absent.confirmed(109.9) and absent.confirmed(110.0)


def test_a_conversation_whose_only_open_failed_is_never_the_earlier_one():
    from seedline_core.lifecycle import may_be_earlier

    requested = lc.apply(None, lc.Requested("csess_f", "i", "r", 1, "mac", "claude"))
    failed = lc.apply(requested, lc.OpenFailed())
    opened = lc.apply(requested, lc.Opened("mac", "claude", "k", "2026-12-01T10:00:00Z"))
    stopped = lc.apply(opened, lc.Stopped("requested"))
    assert not may_be_earlier(failed)
    assert may_be_earlier(None)  # only seen in the timeline
    assert may_be_earlier(opened) and may_be_earlier(stopped) and may_be_earlier(requested)


def test_a_resume_lost_corrects_the_outcome_of_a_resumed_launch_only():
    live = lc.apply(lc.apply(None, requested()), lc.Opened("mac", "claude", "k1", AT, "resumed"))
    lost = lc.apply(live, lc.ResumeLost("mac", "resume_unconfirmed_briefed"))
    assert lost.outcome == "resume_unconfirmed_briefed" and lost.state is lc.State.LIVE
    assert lost.resume_key == "k1"  # the engine's next id comes with engine_bound
    assert lc.apply(live, lc.ResumeLost("elsewhere", "fresh")) == live
    briefed = lc.apply(lc.apply(None, requested()), lc.Opened("mac", "claude", None, AT, "briefed"))
    assert lc.apply(briefed, lc.ResumeLost("mac", "fresh")) == briefed
    assert lc.apply(lost, lc.ResumeLost("mac", "fresh")) == lost  # told once
