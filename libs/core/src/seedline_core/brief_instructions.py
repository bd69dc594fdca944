"""The person's instructions part of a brief (CONTRACT.md 5).

In a long agent conversation the newest entries are mostly tool output, and the record
walk would leave out what the person asked for. So when it would leave out any
`chat_user` entry, a second walk over that kind alone keeps the newest instructions,
within limits of their own that come out of the brief's budget.
"""

from __future__ import annotations

from seedline_core.brief_layout import Framing, KeptEntry, Layout, overhead
from seedline_core.brief_rows import INSTRUCTION_KINDS, MAX_SEQ, BriefRow, Source, WellFormed
from seedline_core.brief_walk import MIN_PARTIAL_CHARS, Limits, walk

INSTRUCTION_ROWS = 10
INSTRUCTION_CHARS = 3_000
INSTRUCTION_ENTRY_CHARS = 1_000


def _record_reserve() -> int:
    """The most overhead the record's newest entry can add: the walk always keeps it."""
    worst = BriefRow(MAX_SEQ, "s" * 300, "chat_assistant", "x" * 5, "t" * 90, None)
    cut = KeptEntry(worst.seq, worst.session_id, worst.kind, worst.at, "", MAX_SEQ)
    reference = KeptEntry(worst.seq, worst.session_id, "chat_user", worst.at, "", 0, True)
    empty = overhead(Layout(record=[], earlier=0))
    return max(overhead(Layout(record=[e], earlier=MAX_SEQ)) for e in (cut, reference)) - empty


RECORD_RESERVE = _record_reserve()


def limits_within(rows: int, chars: int) -> Limits | None:
    """The part's limits inside a budget, leaving the record room for its newest entry."""
    part_rows = min(INSTRUCTION_ROWS, rows - 1)
    part_chars = min(INSTRUCTION_CHARS, chars - MIN_PARTIAL_CHARS)
    if part_rows < 1 or part_chars < MIN_PARTIAL_CHARS:
        return None
    return Limits(part_rows, part_chars, INSTRUCTION_ENTRY_CHARS)


def leaves_out_one(source: Source, until_seq: int, oldest_in_record: int) -> bool:
    """Whether any instruction is older than the record; reads one past those inside it."""
    return any(
        entry.seq < oldest_in_record for entry in WellFormed(source, until_seq, INSTRUCTION_KINDS)
    )


def walk_instructions(
    source: Source, until_seq: int, limits: Limits, instructions_upto: int, max_overhead: int,
    framing: Framing = Framing(),
) -> list[KeptEntry]:
    """The instructions kept, newest first, with room left in the overhead for the record."""

    def fits(candidate: list[KeptEntry]) -> bool:
        layout = Layout(
            record=[],
            earlier=0,
            instructions=candidate[::-1],
            earlier_instructions=max(0, instructions_upto - len(candidate)),
            framing=framing,
        )
        return overhead(layout) + RECORD_RESERVE <= max_overhead

    return walk(WellFormed(source, until_seq, INSTRUCTION_KINDS), limits, fits)
