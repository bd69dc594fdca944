"""Normalising one ingest payload (CONTRACT.md 2.1, and the time bounds of 4.1)."""

from __future__ import annotations

import json
from datetime import datetime, timezone

import pytest
from hypothesis import given
from hypothesis import strategies as st

from seedline_contracts.normalise import Accepted, Refusal, normalise
from seedline_contracts.times import format_utc, parse_rfc3339

RECEIVED = "2026-12-01T10:00:00Z"


def _payload(**over) -> bytes:
    body = {
        "entry_id": "e-1",
        "instance_id": "bd43f4de",
        "repo": "apps/chess-academy",
        "session_id": "csess_1",
        "kind": "chat_user",
        "content": "Add castling",
    }
    body.update(over)
    return json.dumps(body).encode()


def _refusal(payload: bytes) -> Refusal:
    result = normalise(payload, RECEIVED)
    assert isinstance(result, Refusal), result
    return result


@pytest.mark.parametrize(
    "at",
    ["0001-01-01T00:00:00Z", "1999-12-31T23:59:59Z", "2026-12-02T10:00:01Z", "9999-12-31T23:59:59Z"],
)
def test_an_at_outside_the_bounds_is_invalid_and_names_at(at):
    refusal = _refusal(_payload(at=at))
    assert refusal.reason_code == "invalid_entry"
    assert refusal.message.startswith("at ")


@pytest.mark.parametrize(
    ("at", "stored"),
    [
        ("2000-01-01T00:00:00Z", "2000-01-01T00:00:00Z"),
        ("2026-12-02T10:00:00Z", "2026-12-02T10:00:00Z"),
        ("2026-12-01T12:00:00+02:00", "2026-12-01T10:00:00Z"),
    ],
)
def test_an_at_inside_the_bounds_is_stored_in_utc(at, stored):
    result = normalise(_payload(at=at), RECEIVED)
    assert isinstance(result, Accepted)
    assert result.entry.at == stored


def test_an_entry_without_at_takes_its_arrival_time():
    result = normalise(_payload(), RECEIVED)
    assert isinstance(result, Accepted) and result.entry.at == RECEIVED


# Times in UTC, as the platform has them: a naive time would be read as this machine's local
# time, and near year 1 that reading itself fails (year 0 is out of range).
@given(st.datetimes(min_value=datetime(1, 1, 1), timezones=st.just(timezone.utc)))
def test_formatted_times_always_have_four_digit_years_and_read_back(moment):
    text = format_utc(moment)
    assert len(text.split("-", 1)[0]) == 4
    assert format_utc(parse_rfc3339(text)) == text


@pytest.mark.parametrize("field", ["instance_id", "repo", "session_id"])
@pytest.mark.parametrize("value", ["apps\x00hello", "tab\there", "\x7f", ""])
def test_names_with_control_characters_or_empty_are_bad_tokens(field, value):
    refusal = _refusal(_payload(**{field: value}))
    assert refusal.reason_code == "bad_token"
    assert refusal.message.startswith(field)


def test_nul_in_content_is_stored_as_the_replacement_character():
    result = normalise(_payload(content="a\x00b"), RECEIVED)
    assert isinstance(result, Accepted) and result.entry.content == "a\ufffdb"


@pytest.mark.parametrize(
    ("given", "stored"), [(None, "live"), ("live", "live"), ("import", "import")]
)
def test_origin_is_live_unless_the_producer_says_import(given, stored):
    body = {} if given is None else {"origin": given}
    result = normalise(_payload(**body), RECEIVED)
    assert isinstance(result, Accepted)
    assert result.entry.origin == stored


def test_a_null_origin_is_live():
    result = normalise(_payload(origin=None), RECEIVED)
    assert isinstance(result, Accepted) and result.entry.origin == "live"


@pytest.mark.parametrize("origin", ["backfill", "", "IMPORT", 1, ["import"]])
def test_any_other_origin_is_invalid_and_names_origin(origin):
    refusal = _refusal(_payload(origin=origin))
    assert refusal.reason_code == "invalid_entry"
    assert "origin" in refusal.message
