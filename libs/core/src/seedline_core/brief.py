"""The brief: an honest, bounded record of earlier conversations on a repo, for a cold engine.

The walk starts at the newest entry and goes backwards until a budget is spent. It
stops rather than skips: a brief that kept looking further back for a smaller entry
would have a hole in the middle and no text saying so. When that record would leave
out any of the person's instructions, the newest of them come first in a part of their
own (CONTRACT.md 5). Pure: the text depends only on the rows and the budget.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from dataclasses import dataclass, replace

from seedline_core.brief_instructions import (
    INSTRUCTION_CHARS,
    INSTRUCTION_ENTRY_CHARS,
    INSTRUCTION_ROWS,
    leaves_out_one,
    limits_within,
    walk_instructions,
)
from seedline_core.brief_layout import (
    FRAMING,
    PREAMBLE,
    SUMMARY_MAX_CHARS,
    CarriedTree,
    Framing,
    KeptEntry,
    Layout,
    overhead,
    render,
)
from seedline_core.brief_layout import SummaryBlock as Summary
from seedline_core.brief_rows import (
    ENTRY_KINDS,
    BriefRow,
    Source,
    WellFormed,
    entry_count,
    is_whole_number,
)
from seedline_core.brief_walk import MIN_PARTIAL_CHARS, Limits, shown, walk
from seedline_core.redaction import RULESET

__all__ = [
    "DEFAULT_BUDGET",
    "ENTRY_KINDS",
    "FRAMING",
    "INSTRUCTION_CHARS",
    "INSTRUCTION_ENTRY_CHARS",
    "INSTRUCTION_ROWS",
    "MAX_BUDGET",
    "MAX_CHARS",
    "MAX_ENTRY_CHARS",
    "MAX_OVERHEAD",
    "MAX_ROWS",
    "MIN_BUDGET",
    "MIN_PARTIAL_CHARS",
    "PREAMBLE",
    "SUMMARY_MAX_CHARS",
    "Brief",
    "BriefEntry",
    "BriefRow",
    "Budget",
    "CarriedTree",
    "Framing",
    "Summary",
    "compose_brief",
    "usable_budget",
]

MAX_ROWS = 60
MAX_CHARS = 12_000
MAX_ENTRY_CHARS = 4_000
MAX_OVERHEAD = 3_000


@dataclass(frozen=True)
class Budget:
    """How many entries and characters of entry text a brief may keep (both parts)."""

    rows: int = MAX_ROWS
    chars: int = MAX_CHARS


DEFAULT_BUDGET = Budget()
# The smallest budget an operator may set leaves the record its newest entry beside a
# full instructions part; the largest keeps the text well inside one NATS message.
MIN_BUDGET = Budget(INSTRUCTION_ROWS + 1, INSTRUCTION_CHARS + MIN_PARTIAL_CHARS)
MAX_BUDGET = Budget(1_000, 100_000)


def usable_budget(budget: object) -> Budget:
    """A budget within what the walks can honour; anything else is the default."""
    if not isinstance(budget, Budget):
        return DEFAULT_BUDGET
    if not (is_whole_number(budget.rows) and is_whole_number(budget.chars)):
        return DEFAULT_BUDGET
    return Budget(
        rows=min(max(budget.rows, 1), MAX_BUDGET.rows),
        chars=min(max(budget.chars, MIN_PARTIAL_CHARS), MAX_BUDGET.chars),
    )


@dataclass(frozen=True)
class BriefEntry:
    """What a brief holds of one timeline entry: where, and how much of it."""

    seq: int
    kind: str
    chars: int
    left_out: int
    # "instructions", "record", or "reference" (a record line pointing at the part).
    part: str


@dataclass(frozen=True)
class Brief:
    text: str
    rows: int
    chars: int
    omitted_rows: int
    until_seq: int
    sha256: str
    budget: Budget = DEFAULT_BUDGET
    entries: tuple[BriefEntry, ...] = ()
    summary: Summary | None = None
    # Secret spans left out of the text, and the detector set that found them
    # (None: a brief composed before redaction existed, replayed as it was).
    redacted: int = 0
    redaction: int | None = RULESET

    def stats(self) -> dict[str, int | str]:
        """The wire `brief` object: everything but the text."""
        return {
            "rows": self.rows,
            "chars": self.chars,
            "omitted_rows": self.omitted_rows,
            "until_seq": self.until_seq,
            "sha256": self.sha256,
            "redacted": self.redacted,
        }

    @property
    def has_instructions_part(self) -> bool:
        return any(entry.part == "instructions" for entry in self.entries)

    @property
    def oldest_in_record(self) -> int:
        """The seq of the record's oldest entry: everything older is in the part or left out."""
        return min(entry.seq for entry in self.entries if entry.part != "instructions")


def _instructions_in(record: list[KeptEntry]) -> int:
    return sum(1 for entry in shown(record) if entry.kind == "chat_user")


def _walk_record(
    source: Source,
    until_seq: int,
    total: int,
    limits: Limits,
    part: list[KeptEntry],
    instructions_upto: int,
    framing: Framing,
) -> tuple[list[KeptEntry], int]:
    """The record kept, newest first, and how many malformed rows it passed over."""
    rows = WellFormed(source, until_seq)
    part_oldest_first = part[::-1]

    def fits(candidate: list[KeptEntry]) -> bool:
        # The earlier-entries and earlier-instructions lines only shorten as the walk
        # goes on, so checking with their lengths now bounds the finished brief's overhead.
        earlier = max(0, total - len(shown(candidate)) - len(part) - rows.skipped)
        layout = Layout(
            record=candidate[::-1],
            earlier=earlier,
            instructions=part_oldest_first,
            earlier_instructions=_earlier_instructions(instructions_upto, part, candidate),
            framing=framing,
        )
        return overhead(layout) <= MAX_OVERHEAD

    kept = walk(rows, limits, fits, referenced={entry.seq for entry in part})
    return kept, rows.skipped


def _earlier_instructions(upto: int, part: list[KeptEntry], record: list[KeptEntry]) -> int:
    if not part:
        return 0
    return max(0, upto - len(part) - _instructions_in(record))


def compose_brief(
    newest_first: Iterable[object],
    until_seq: int,
    entries_upto: int,
    instructions: Iterable[object] | None = None,
    instructions_upto: int = 0,
    budget: Budget = DEFAULT_BUDGET,
    summary: Summary | None = None,
    redaction: int | None = RULESET,
    framing: Framing = Framing(),
) -> Brief | None:
    """The brief of the entries `newest_first` yields, or None when it keeps none.

    `newest_first` yields the repo's rows with seq <= until_seq, newest first;
    `instructions` yields its `chat_user` rows the same way (None: no instructions part).
    Both are read lazily and no further than the walks need: the record at most one row
    past its last kept one, the instructions not at all when the record leaves nothing
    out. `entries_upto` and `instructions_upto` count the repo's entries and `chat_user`
    entries with seq <= until_seq. `summary`, already written, is shown and labelled.
    """
    if not is_whole_number(until_seq):
        return None
    budget = usable_budget(budget)
    total = entry_count(entries_upto)
    instructions_total = entry_count(instructions_upto)
    record_rows = Source(newest_first, redaction)
    whole = Limits(budget.rows, budget.chars, MAX_ENTRY_CHARS)
    record, skipped = _walk_record(record_rows, until_seq, total, whole, [], 0, framing)
    if not record:
        return None
    part: list[KeptEntry] = []
    part_limits = limits_within(budget.rows, budget.chars)
    left_out = total - len(record) - skipped > 0
    if instructions is not None and part_limits is not None and left_out:
        instruction_rows = Source(instructions, redaction)
        if leaves_out_one(instruction_rows, until_seq, record[-1].seq):
            part = walk_instructions(
                instruction_rows, until_seq, part_limits, instructions_total, MAX_OVERHEAD,
                framing,
            )
    if part:
        rest = Limits(
            budget.rows - len(part),
            budget.chars - sum(len(entry.text) for entry in part),
            MAX_ENTRY_CHARS,
        )
        record, skipped = _walk_record(
            record_rows, until_seq, total, rest, part, instructions_total, framing
        )
    brief = _brief(record, skipped, part, total, instructions_total, until_seq, budget, summary,
                   framing)
    return replace(brief, redaction=redaction)


def _brief(
    record: list[KeptEntry],
    skipped: int,
    part: list[KeptEntry],
    total: int,
    instructions_upto: int,
    until_seq: int,
    budget: Budget,
    summary: Summary | None,
    framing: Framing,
) -> Brief:
    kept = [*part, *shown(record)]
    earlier = max(0, total - len(kept) - skipped)
    layout = Layout(
        record=record[::-1],
        earlier=earlier,
        instructions=part[::-1],
        earlier_instructions=_earlier_instructions(instructions_upto, part, record),
        summary=summary,
        framing=framing,
    )
    text = "".join(render(layout))
    entries = [_entry(entry, "instructions") for entry in part[::-1]]
    entries += [_entry(entry, "reference" if entry.reference else "record") for entry in record]
    return Brief(
        text=text,
        rows=len(kept),
        chars=sum(len(entry.text) for entry in kept),
        omitted_rows=skipped + earlier,
        until_seq=until_seq,
        sha256=hashlib.sha256(text.encode("utf-8")).hexdigest(),
        budget=budget,
        entries=tuple(sorted(entries, key=lambda entry: (entry.seq, entry.part))),
        summary=summary,
        redacted=sum(entry.secrets for entry in kept),
    )


def _entry(entry: KeptEntry, part: str) -> BriefEntry:
    return BriefEntry(entry.seq, entry.kind, len(entry.text), entry.left_out, part)
