"""Time as the contract writes it: RFC 3339 in UTC with a Z."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone


def utc_now() -> datetime:
    return datetime.now(timezone.utc)


def format_utc(moment: datetime) -> str:
    moment = moment.astimezone(timezone.utc)
    # Four-digit years always: strftime("%Y") writes year 1 as "1", which is not RFC 3339.
    text = f"{moment.year:04d}-" + moment.strftime("%m-%dT%H:%M:%S")
    if moment.microsecond:
        text += f".{moment.microsecond:06d}".rstrip("0")
    return text + "Z"


def parse_rfc3339(text: str) -> datetime:
    """Parse an RFC 3339 time with any offset; raises ValueError when it is not one."""
    if not isinstance(text, str) or len(text) < 20 or len(text) > 40 or text[10] not in "Tt ":
        raise ValueError("not an RFC 3339 time")
    value = datetime.fromisoformat(text.replace("z", "Z").replace("Z", "+00:00"))
    if value.tzinfo is None:
        raise ValueError("an RFC 3339 time needs an offset or Z")
    return value.astimezone(timezone.utc)


# The range an entry's `at` may take (CONTRACT.md 4.1, time bounds).
EARLIEST_AT = datetime(2000, 1, 1, tzinfo=timezone.utc)
LATEST_AT_AHEAD = timedelta(days=1)


def now_text() -> str:
    return format_utc(utc_now())
