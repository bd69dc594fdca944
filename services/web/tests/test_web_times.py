"""The document's time pattern is the server's reading of a time, both ways: every string
it allows parses, and every one in the same shape that parses is allowed (the days of
each month, 29 February in leap years only). The one bound a pattern cannot state, an
entry's time at most a day after it arrives, is a 409, not a 400."""

from __future__ import annotations

import re
from datetime import datetime, timedelta, timezone

import pytest
from hypothesis import given
from hypothesis import strategies as st

from seedline_contracts.times import parse_rfc3339
from seedline_web.errors import WebError
from seedline_web.fields import RFC3339
from seedline_web.publishing import EntryBody, to_entry

PATTERN = re.compile(RFC3339)


def _shaped(year: int, month: int, day: int, hour: int, minute: int, second: int,
            fraction: str, offset: str, sep: str) -> str:
    return (f"{year:04d}-{month:02d}-{day:02d}{sep}{hour:02d}:{minute:02d}:{second:02d}"
            f"{fraction}{offset}")


def _reads(text: str) -> bool:
    try:
        parse_rfc3339(text)
    except OverflowError:
        return True  # a real time, beyond what Python holds once in UTC (9999-12-31 and on)
    except ValueError:
        return False
    return True


@given(year=st.integers(2000, 9999), month=st.integers(1, 12), day=st.integers(1, 31),
       hour=st.integers(0, 23), minute=st.integers(0, 59), second=st.integers(0, 59),
       fraction=st.sampled_from(["", ".5", ".123456", ".123456789"]),
       offset=st.sampled_from(["Z", "z", "+00:00", "-23:59", "+05:30"]),
       sep=st.sampled_from(["T", "t", " "]))
def test_the_pattern_allows_exactly_the_times_the_server_reads(year, month, day, hour, minute,
                                                              second, fraction, offset, sep):
    text = _shaped(year, month, day, hour, minute, second, fraction, offset, sep)
    assert bool(PATTERN.search(text)) == _reads(text), text


@pytest.mark.parametrize("text, allowed", [
    ("2024-02-29T00:00:00Z", True), ("2000-02-29T00:00:00Z", True),
    ("2100-02-29T00:00:00Z", False), ("2026-02-29T00:00:00Z", False),
    ("2026-11-31T10:00:00Z", False), ("2026-12-31T23:59:59Z", True),
    ("1999-12-31T23:59:59Z", False), ("2026-12-01T24:00:00Z", False),
])
def test_days_of_each_month_and_leap_years(text, allowed):
    assert bool(PATTERN.search(text)) == allowed


def _body(at: str) -> EntryBody:
    return EntryBody(entry_id="e-1", repo="apps/hello", session_id="s", kind="chat_user",
                     content="hi", at=at)


def test_a_time_the_pattern_allows_but_too_far_ahead_is_409_and_a_non_time_400():
    ahead = (datetime.now(timezone.utc) + timedelta(days=3)).strftime("%Y-%m-%dT%H:%M:%SZ")
    for at in (ahead, "9999-12-31T23:59:59-01:00", "2000-01-01T00:30:00+01:00"):
        with pytest.raises(WebError) as refused:
            to_entry(_body(at), "bd43f4de")
        assert refused.value.status == 409 and refused.value.code == "invalid_entry", at
        assert "one day after it arrived" in refused.value.message
    with pytest.raises(WebError) as malformed:
        to_entry(_body("2026-11-31T10:00:00Z"), "bd43f4de")
    assert malformed.value.status == 400
    assert to_entry(_body("2026-11-30T10:00:00Z"), "bd43f4de").at == "2026-11-30T10:00:00Z"
