"""The one retry-and-park policy both consumers keep (retry_policy.py)."""

from __future__ import annotations

from types import SimpleNamespace

from seedline_contracts.events import SessionEvent
from seedline_contracts.timeline import TimelineEntry
from seedline_platform.retry_policy import (
    failure_reason,
    gives_up,
    outage_pause,
    unreadable_reason,
    worn_out,
)


def delivered(times: int):
    return SimpleNamespace(metadata=SimpleNamespace(num_delivered=times))


def test_a_message_delivered_past_the_limit_is_parked_unhandled():
    assert worn_out(delivered(5), max_deliver=5) is None
    assert worn_out(delivered(6), max_deliver=5) == "delivered 6 times without completing"


def test_a_failure_is_parked_on_the_last_try_and_not_before():
    assert [gives_up(tries, max_deliver=3) for tries in (1, 2, 3, 4)] == [
        False, False, True, True]


def test_an_outage_is_waited_out_longer_each_time_up_to_two_seconds():
    pauses = [outage_pause(waits) for waits in range(15)]
    assert pauses == sorted(pauses) and pauses[0] == 0.2 and max(pauses) == 2.0


def test_the_parked_reason_names_the_fault_within_the_rejected_field():
    reason = failure_reason(5, ValueError("x" * 1_000))
    assert reason.startswith("failed 5 times: ValueError: xxx") and len(reason) == 500


def test_an_unreadable_payload_is_named_by_its_type_or_the_events_it_is_none_of():
    problem = ValueError("JSON is malformed")
    assert unreadable_reason(TimelineEntry, problem) == "not a TimelineEntry: JSON is malformed"
    reason = unreadable_reason(SessionEvent, problem)
    assert reason.startswith("not any of its ") and reason.endswith(" event types: JSON is malformed")
    assert "Session" not in reason  # an operator reads it (CONTRACT.md 3.3)
