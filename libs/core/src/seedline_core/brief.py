"""The brief: an honest, bounded record of earlier conversations on a repo, for a cold engine.

The walk starts at the newest entry and goes backwards until a budget is spent. It
stops rather than skips: a brief that kept looking further back for a smaller entry
would have a hole in the middle and no text saying so.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import TypeGuard

from seedline_core.brief_layout import PREAMBLE, TAIL_KEPT_KINDS, KeptEntry, render

__all__ = [
    "ENTRY_KINDS",
    "MAX_CHARS",
    "MAX_ENTRY_CHARS",
    "MAX_OVERHEAD",
    "MAX_ROWS",
    "MIN_PARTIAL_CHARS",
    "PREAMBLE",
    "Brief",
    "BriefRow",
    "compose_brief",
]

ENTRY_KINDS = frozenset(
    {"chat_user", "chat_assistant", "terminal", "command", "brain", "outcome", "system"}
)

MAX_ROWS = 60
MAX_CHARS = 12_000
MAX_ENTRY_CHARS = 4_000
MIN_PARTIAL_CHARS = 200
MAX_OVERHEAD = 3_000

# A JetStream sequence is an unsigned 64-bit number; anything larger is not a seq.
MAX_SEQ = 2**64 - 1
# Bounds the walk over a source that yields nothing but malformed rows.
MAX_SKIPPED_ROWS = 10_000

_SURROGATE = re.compile("[\ud800-\udfff]")


@dataclass(frozen=True)
class BriefRow:
    seq: int
    session_id: str
    kind: str
    content: str
    at: str
    engine: str | None


@dataclass(frozen=True)
class Brief:
    text: str
    rows: int
    chars: int
    omitted_rows: int
    until_seq: int
    sha256: str

    def stats(self) -> dict[str, int | str]:
        """The wire `brief` object: everything but the text."""
        return {
            "rows": self.rows,
            "chars": self.chars,
            "omitted_rows": self.omitted_rows,
            "until_seq": self.until_seq,
            "sha256": self.sha256,
        }


def _is_whole_number(value: object) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool)


def _well_formed(row: object, until_seq: int, older_than: int | None) -> BriefRow | None:
    if type(row) is not BriefRow:
        return None
    seq = row.seq
    if not _is_whole_number(seq) or not 1 <= seq <= min(until_seq, MAX_SEQ):
        return None
    if older_than is not None and seq >= older_than:
        return None
    texts = (row.session_id, row.kind, row.content, row.at)
    if any(type(text) is not str for text in texts):
        return None
    if not row.session_id or row.kind not in ENTRY_KINDS:
        return None
    if row.engine is not None and type(row.engine) is not str:
        return None
    return row


def _cut(content: str, kind: str, keep: int) -> str:
    if kind in TAIL_KEPT_KINDS:
        return content[len(content) - keep :]
    return content[:keep]


def _readable(text: str) -> str:
    return _SURROGATE.sub("\ufffd", text)


def _overhead(kept_newest_first: list[KeptEntry], earlier: int) -> int:
    parts = render(kept_newest_first[::-1], earlier)
    return sum(map(len, parts)) - sum(len(entry.text) for entry in kept_newest_first)


def _rows(newest_first: Iterable[object]) -> Iterator[object]:
    try:
        return iter(newest_first)
    except TypeError:
        return iter(())


def _entry_count(value: object) -> int:
    if not _is_whole_number(value) or value <= 0:
        return 0
    return min(value, MAX_SEQ)


def _kept_entry(entry: BriefRow, keep: int) -> KeptEntry:
    return KeptEntry(
        seq=entry.seq,
        session_id=entry.session_id,
        kind=entry.kind,
        at=entry.at,
        text=_readable(_cut(entry.content, entry.kind, keep)),
        left_out=len(entry.content) - keep,
    )


def _walk(rows: Iterator[object], until_seq: int, total: int) -> tuple[list[KeptEntry], int]:
    """The kept entries, newest first, and how many malformed rows were skipped."""
    kept: list[KeptEntry] = []
    skipped = 0
    room = MAX_CHARS
    for row in rows:
        entry = _well_formed(row, until_seq, kept[-1].seq if kept else None)
        if entry is None:
            skipped += 1
            if skipped >= MAX_SKIPPED_ROWS:
                break
            continue
        keep = min(len(entry.content), MAX_ENTRY_CHARS)
        last = False
        if keep > room:
            if room < MIN_PARTIAL_CHARS:
                break
            keep, last = room, True
        candidate = _kept_entry(entry, keep)
        # The earlier-entries line only shortens as the walk goes on, so checking with
        # its length at this point bounds the overhead of the finished brief.
        earlier = max(0, total - len(kept) - 1 - skipped)
        if kept and _overhead([*kept, candidate], earlier) > MAX_OVERHEAD:
            break
        kept.append(candidate)
        room -= keep
        if last or len(kept) == MAX_ROWS:
            break
    return kept, skipped


def compose_brief(
    newest_first: Iterable[object], until_seq: int, entries_upto: int
) -> Brief | None:
    """The brief of the entries `newest_first` yields, or None when it keeps none.

    `newest_first` yields the repo's rows with seq <= until_seq, newest first; it is
    read lazily and no further than the walk needs (at most one row beyond the last
    kept one). `entries_upto` is how many repo entries have seq <= until_seq.
    """
    if not _is_whole_number(until_seq):
        return None
    total = _entry_count(entries_upto)
    kept, skipped = _walk(_rows(newest_first), until_seq, total)
    if not kept:
        return None
    earlier = max(0, total - len(kept) - skipped)
    text = "".join(render(kept[::-1], earlier))
    return Brief(
        text=text,
        rows=len(kept),
        chars=sum(len(entry.text) for entry in kept),
        omitted_rows=skipped + earlier,
        until_seq=until_seq,
        sha256=hashlib.sha256(text.encode("utf-8")).hexdigest(),
    )
