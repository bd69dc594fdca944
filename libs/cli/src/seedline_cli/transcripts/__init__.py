"""Other tools' conversation transcripts, read as timeline entries (pure, no I/O).

A parser takes the numbered lines of one transcript file and gives a ``Transcript``:
the conversation's id and working directory as the file recorded them, one ``Item``
per timeline entry, how many lines it skipped and why, and the lines it could not
read at all (by number). Entry ids come from the transcript's own ids, so reading the
same file again gives the same ids and a second import is all duplicates.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field, replace

from seedline_contracts.times import parse_rfc3339
from seedline_runner.engines.transcript_marks import transcript_entry_id

# (line number, line text); None as the text: the line was too long to read.
NumberedLines = Iterable[tuple[int, str | None]]


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
    # The file says a Seedline runner made it (Codex's originator), or a message in it
    # carries a Seedline brief: only a runner's runs are given one.
    runner_run: bool = False
    seedline_brief: bool = False
    # Codex: the file has user_message events, the person's words as typed.
    typed_messages: bool = False

    def skip(self, reason: str, count: int = 1) -> None:
        self.skipped[reason] += count

    def time_of(self, record: dict) -> str | None:
        """The record's own time, or the latest one before it."""
        own = timestamp(record.get("timestamp"))
        if own is not None:
            self.last_at = own
        return own or self.last_at


SEEDLINE_BRIEFS = "Seedline briefs a runner gave the engine (never a person's message)"
RUNNER_PUBLISHED = "lines of a run a Seedline runner made (it published them live)"


def without_runs_of_a_runner(transcript: Transcript, items: list[Item]) -> list[Item]:
    """Nothing of a transcript a Seedline runner wrote: the runner published it live.

    Claude Code marks each record (the parser skips those one by one); Codex marks the
    file; a transcript of an older runner is known by the brief it was given.
    """
    if not (transcript.runner_run or transcript.seedline_brief) or not items:
        return items
    transcript.skip(RUNNER_PUBLISHED, len(items))
    return []


def stable_id(*parts: str | int) -> str:
    """An entry id made of ``parts``: the runner's own rule, so that a record it
    published live gets the same id here (seedline_runner.engines.transcript_marks)."""
    return transcript_entry_id(*parts)


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
