"""The rows a brief is walked over: what a well-formed one is, and reading a source once.

A stored row that is malformed never fails a brief: it is passed over and counted.
Two walks may go over the same source (the record, first with the whole budget and
then with what the instructions leave), so a source is read lazily and only once.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from functools import lru_cache
from typing import TypeGuard

from seedline_core.brief_layout import TAIL_KEPT_KINDS, KeptEntry
from seedline_core.redaction import RULESET, Redacted, redact

ENTRY_KINDS = frozenset(
    {"chat_user", "chat_assistant", "terminal", "command", "brain", "outcome", "system"}
)
INSTRUCTION_KINDS = frozenset({"chat_user"})

# A JetStream sequence is an unsigned 64-bit number; anything larger is not a seq.
MAX_SEQ = 2**64 - 1
# Bounds the walk over a source that yields nothing but malformed rows.
MAX_SKIPPED_ROWS = 10_000

_SURROGATE = re.compile("[\ud800-\udfff]")
# Secrets are left out of the part of an entry a brief could show, before the
# walk: the budget then counts what is sent, and a cut never lands inside a secret.
# Twice the largest entry cut, so a long secret (a private key block) replaced by a
# short marker still leaves the cut its text; what lies beyond is never shown.
REDACTION_WINDOW = 8_000


@dataclass(frozen=True)
class BriefRow:
    seq: int
    session_id: str
    kind: str
    content: str
    at: str
    engine: str | None


@dataclass(frozen=True)
class RedactedRow(BriefRow):
    """A row whose content is the part a brief could show, secrets left out."""

    # Characters of the stored content beyond that part (never shown, counted left out).
    beyond: int = 0
    # Where each secret's marker stands in `content`.
    markers: tuple[tuple[int, int], ...] = ()


@lru_cache(maxsize=256)
def _redact_window(window: str, ruleset: int) -> Redacted:
    # Consecutive briefs of a repo show mostly the same entries: each is scanned once.
    return redact(window, ruleset)


def redacted_row(row: BriefRow, ruleset: int = RULESET) -> RedactedRow:
    content = row.content
    beyond = max(0, len(content) - REDACTION_WINDOW)
    if row.kind in TAIL_KEPT_KINDS:
        window = content[beyond:]
    else:
        window = content[: len(content) - beyond]
    redacted = _redact_window(window, ruleset)
    return RedactedRow(
        row.seq, row.session_id, row.kind, redacted.text, row.at, row.engine,
        beyond=beyond, markers=redacted.markers,
    )


def is_whole_number(value: object) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool)


def entry_count(value: object) -> int:
    if not is_whole_number(value) or value <= 0:
        return 0
    return min(value, MAX_SEQ)


def _well_formed(
    row: object, until_seq: int, older_than: int | None, kinds: frozenset[str]
) -> BriefRow | None:
    if type(row) is not BriefRow:
        return None
    seq = row.seq
    if not is_whole_number(seq) or not 1 <= seq <= min(until_seq, MAX_SEQ):
        return None
    if older_than is not None and seq >= older_than:
        return None
    texts = (row.session_id, row.kind, row.content, row.at)
    if any(type(text) is not str for text in texts):
        return None
    if not row.session_id or row.kind not in kinds:
        return None
    if row.engine is not None and type(row.engine) is not str:
        return None
    return row


class Source:
    """A lazily read iterable whose rows are kept, so a second walk reads nothing twice.

    With a `ruleset`, the well-formed rows a walk takes are redacted with it, once each
    (None: nothing is redacted)."""

    def __init__(self, rows: Iterable[object] | None, ruleset: int | None = None) -> None:
        try:
            self._rows: Iterator[object] = iter(rows)  # type: ignore[arg-type]
        except TypeError:
            self._rows = iter(())
        self._read: list[object] = []
        self._ruleset = ruleset
        self._redacted: dict[int, BriefRow] = {}

    def shown(self, row: BriefRow) -> BriefRow:
        """The row as a brief may show it."""
        if self._ruleset is None:
            return row
        kept = self._redacted.get(id(row))
        if kept is None:
            kept = self._redacted[id(row)] = redacted_row(row, self._ruleset)
        return kept

    def __iter__(self) -> Iterator[object]:
        index = 0
        while True:
            if index == len(self._read):
                try:
                    self._read.append(next(self._rows))
                except StopIteration:
                    return
            yield self._read[index]
            index += 1


class WellFormed:
    """The well-formed rows of a source, newest first, counting the malformed ones passed over.

    A row out of order (not older than the one before it) is malformed too.
    """

    def __init__(
        self, source: Source, until_seq: int, kinds: frozenset[str] = ENTRY_KINDS
    ) -> None:
        self._source = source
        self._until_seq = until_seq
        self._kinds = kinds
        self.skipped = 0

    def __iter__(self) -> Iterator[BriefRow]:
        older_than = None
        for row in self._source:
            entry = _well_formed(row, self._until_seq, older_than, self._kinds)
            if entry is None:
                self.skipped += 1
                if self.skipped >= MAX_SKIPPED_ROWS:
                    return
                continue
            older_than = entry.seq
            yield self._source.shown(entry)


def _cut(
    content: str, kind: str, keep: int, markers: tuple[tuple[int, int], ...]
) -> tuple[str, int]:
    """The kept part and how many secret markers it holds; a cut that would split a
    marker leaves the whole marker out instead."""
    if kind in TAIL_KEPT_KINDS:
        start = len(content) - keep
        for begin, end in markers:
            if begin < start < end:
                start = end
        return content[start:], sum(1 for begin, _ in markers if begin >= start)
    stop = keep
    for begin, end in markers:
        if begin < stop < end:
            stop = begin
    return content[:stop], sum(1 for _, end in markers if end <= stop)


def readable(text: str) -> str:
    """Lone surrogates cannot be encoded; they become U+FFFD."""
    return _SURROGATE.sub("\ufffd", text)


def kept_entry(entry: BriefRow, keep: int) -> KeptEntry:
    markers = entry.markers if isinstance(entry, RedactedRow) else ()
    beyond = entry.beyond if isinstance(entry, RedactedRow) else 0
    text, secrets = _cut(entry.content, entry.kind, keep, markers)
    return KeptEntry(
        seq=entry.seq,
        session_id=entry.session_id,
        kind=entry.kind,
        at=entry.at,
        text=readable(text),
        left_out=len(entry.content) - len(text) + beyond,
        secrets=secrets,
    )


def reference_to(entry: BriefRow) -> KeptEntry:
    """An instruction the instructions part holds: in the record it is one line."""
    return KeptEntry(
        seq=entry.seq,
        session_id=entry.session_id,
        kind=entry.kind,
        at=entry.at,
        text="",
        left_out=0,
        reference=True,
    )
