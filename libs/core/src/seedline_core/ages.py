"""How long ago something happened, and how long something lasted, in words."""

from __future__ import annotations

from datetime import timedelta

__all__ = ["describe_age", "describe_duration", "describe_window"]

_MINUTE = 60
_HOUR = 60 * _MINUTE
_DAY = 24 * _HOUR
_HOURS_SHOWN_BELOW = 48 * _HOUR


def _whole_seconds(delta: timedelta) -> int:
    return max(0, delta // timedelta(seconds=1))


def _count(number: int, unit: str) -> str:
    return f"{number} {unit}" if number == 1 else f"{number} {unit}s"


def describe_age(delta: timedelta) -> str:
    """Say "N <unit> ago" in whole units rounded down: seconds, minutes, hours below 48, days."""
    seconds = _whole_seconds(delta)
    if seconds < _MINUTE:
        amount = _count(seconds, "second")
    elif seconds < _HOUR:
        amount = _count(seconds // _MINUTE, "minute")
    elif seconds < _HOURS_SHOWN_BELOW:
        amount = _count(seconds // _HOUR, "hour")
    else:
        amount = _count(seconds // _DAY, "day")
    return f"{amount} ago"


def describe_window(window: timedelta) -> str:
    """A length used as an adjective, in the largest whole unit: "4-day", "36-hour"."""
    seconds = _whole_seconds(window)
    for unit_seconds, unit in ((_DAY, "day"), (_HOUR, "hour"), (_MINUTE, "minute")):
        if seconds and seconds % unit_seconds == 0:
            return f"{seconds // unit_seconds}-{unit}"
    return f"{seconds}-second"


def describe_duration(delta: timedelta) -> str:
    """A length in hours and minutes ("6 hours", "1 hour and 30 minutes"), else seconds."""
    seconds = _whole_seconds(delta)
    if seconds < _MINUTE:
        return _count(seconds, "second")
    hours, minutes = divmod(seconds // _MINUTE, 60)
    if hours and minutes:
        return f"{_count(hours, 'hour')} and {_count(minutes, 'minute')}"
    if hours:
        return _count(hours, "hour")
    return _count(minutes, "minute")
