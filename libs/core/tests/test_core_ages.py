from datetime import timedelta

import pytest

from seedline_core.ages import describe_age, describe_duration, describe_window


@pytest.mark.parametrize(
    ("delta", "expected"),
    [
        (timedelta(0), "0 seconds ago"),
        (timedelta(seconds=1), "1 second ago"),
        (timedelta(seconds=59, microseconds=999_999), "59 seconds ago"),
        (timedelta(minutes=1), "1 minute ago"),
        (timedelta(minutes=59, seconds=59), "59 minutes ago"),
        (timedelta(hours=1), "1 hour ago"),
        (timedelta(hours=11, minutes=59), "11 hours ago"),
        (timedelta(hours=24), "24 hours ago"),
        (timedelta(hours=47, minutes=59, seconds=59), "47 hours ago"),
        (timedelta(hours=48), "2 days ago"),
        (timedelta(days=3, hours=23), "3 days ago"),
        (timedelta(days=5, hours=3), "5 days ago"),
    ],
)
def test_age_is_whole_units_rounded_down(delta: timedelta, expected: str) -> None:
    assert describe_age(delta) == expected


def test_negative_age_counts_as_zero_seconds() -> None:
    assert describe_age(timedelta(seconds=-5)) == "0 seconds ago"
    assert describe_age(timedelta(days=-3)) == "0 seconds ago"


def test_days_start_at_two_because_hours_are_used_below_48() -> None:
    ages = {describe_age(timedelta(hours=h)) for h in range(0, 24 * 30)}
    assert "1 day ago" not in ages
    assert "2 days ago" in ages


@pytest.mark.parametrize(
    ("window", "expected"),
    [
        (timedelta(days=4), "4-day"),
        (timedelta(days=1), "1-day"),
        (timedelta(hours=36), "36-hour"),
        (timedelta(minutes=90), "90-minute"),
        (timedelta(seconds=45), "45-second"),
    ],
)
def test_window_is_named_in_its_largest_whole_unit(window: timedelta, expected: str) -> None:
    assert describe_window(window) == expected


@pytest.mark.parametrize(
    ("delta", "expected"),
    [
        (timedelta(hours=6), "6 hours"),
        (timedelta(hours=1), "1 hour"),
        (timedelta(hours=1, minutes=30), "1 hour and 30 minutes"),
        (timedelta(minutes=45), "45 minutes"),
        (timedelta(minutes=1), "1 minute"),
        (timedelta(seconds=30), "30 seconds"),
        (timedelta(hours=30), "30 hours"),
    ],
)
def test_duration_in_hours_and_minutes(delta: timedelta, expected: str) -> None:
    assert describe_duration(delta) == expected
