"""Other tools' conversation transcripts, read as timeline entries (pure, no I/O).

A parser takes the numbered lines of one transcript file and gives a ``Transcript``:
the conversation's id and working directory as the file recorded them, one ``Item``
per timeline entry, how many lines it skipped and why, and the lines it could not
read at all (by number). Entry ids come from the transcript's own ids, so reading the
same file again gives the same ids and a second import is all duplicates.
"""

from __future__ import annotations

import hashlib
import re
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field, replace

from seedline_contracts.timeline import MAX_ENTRY_ID_CHARS
from seedline_contracts.times import parse_rfc3339

# (line number, line text); None as the text: the line was too long to read.
NumberedLines = Iterable[tuple[int, str | None]]

_PLAIN_ID = re.compile(r"[^\s\x00-\x1f\x7f]+")


@dataclass(frozen=True)
class Item:
    entry_id: str
    kind: str
    content: str
    # The transcript's own time for it (RFC 3339); None when the line had none.
    at: str | None


@dataclass
class Transcript:
    engine: str
    session_id: str | None = None
    cwd: str | None = None
    items: list[Item] = field(default_factory=list)
    # The latest time any line so far carried: the time of a line that has none.
    last_at: str | None = None
    # Why lines or parts of lines were left out, with how many of each.
    skipped: Counter[str] = field(default_factory=Counter)
    malformed: list[tuple[int, str]] = field(default_factory=list)

    def skip(self, reason: str, count: int = 1) -> None:
        self.skipped[reason] += count

    def time_of(self, record: dict) -> str | None:
        """The record's own time, or the latest one before it."""
        own = timestamp(record.get("timestamp"))
        if own is not None:
            self.last_at = own
        return own or self.last_at


def stable_id(*parts: str | int) -> str:
    """An entry id made of ``parts``; a digest of them when they do not fit one."""
    plain = ":".join(str(part) for part in parts)
    if len(plain) <= MAX_ENTRY_ID_CHARS and _PLAIN_ID.fullmatch(plain):
        return plain
    return f"{parts[0]}-" + hashlib.sha256(plain.encode("utf-8")).hexdigest()


def timestamp(value: object) -> str | None:
    """``value`` when it is an RFC 3339 time, else None."""
    if not isinstance(value, str):
        return None
    try:
        parse_rfc3339(value)
    except ValueError:
        return None
    return value


def fill_times(items: list[Item]) -> list[Item]:
    """Give the items before the file's first time that first time.

    An entry without ``at`` would get its arrival time and count as fresh: a person's
    message imported that way could wake a conversation. History never should.
    """
    first = next((item.at for item in items if item.at is not None), None)
    if first is None:
        return items
    return [item if item.at is not None else replace(item, at=first) for item in items]
