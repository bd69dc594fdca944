"""TimelineView: what the continuity-resolver, the seed-composer and the runner-gateway may
ask of the timeline.

The contract, in DESIGN.md terms (rule 8, one owner per table):
- the timeline-writer owns the projection of SEEDLINE_TIMELINE; it alone creates the
  table and writes it, always in stream order, with the applied seq stored in the same
  transaction;
- every answer is about entries that are already applied: a reader that must see a
  given seq first calls ``wait_until_applied``;
- entries are identified by their stream seq and belong to one (instance, repo): no
  answer ever mixes instances or repos;
- the view is read-only; adapters hold no state of their own between calls.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import NamedTuple, Protocol

from seedline_contracts.timeline import TimelineEntry, TimelineRow

# Seqs are JetStream sequences (uint64); this is past any real one and fits bigint.
NO_UPPER_SEQ = 2**63 - 1


@dataclass(frozen=True)
class RepoHead:
    """The newest repo entry considered, and how many repo entries there are up to it."""

    seq: int
    entries: int


@dataclass(frozen=True)
class ConversationBefore:
    """One conversation's entries below a seq, as the continuity decision reads them."""

    last_at: datetime  # the latest `at` among them
    last_seq: int
    engine: str | None  # the newest engine they name
    newest_turn: TimelineRow | None = None  # when asked for: see conversation_before


class AppliedEntry(NamedTuple):
    """What a wait for one seq found."""

    applied: bool  # False: the wait's timeout passed first
    entry: TimelineEntry | None  # None too when its instance's key was destroyed
    # The newest entry of its repo below it (repo_head with before_seq=its seq), read with
    # it: every entry below an applied one is applied. None too when not applied.
    head_before: RepoHead | None = None
    # Its own conversation's entries below it (conversation_before of its session_id, with
    # the turn kinds the wait asked for), read with it too: a wake's message most often
    # touched the conversation the wake is decided over. None when there are none.
    own_before: ConversationBefore | None = None


class TimelineView(Protocol):
    async def repo_head(
        self, instance_id: str, repo: str, before_seq: int | None = None
    ) -> RepoHead | None:
        """The repo's newest entry with seq < before_seq (any when None), or None."""
        ...

    async def newest_first(
        self, instance_id: str, repo: str, until_seq: int, limit: int, kind: str | None = None
    ) -> list[TimelineRow]:
        """Up to `limit` repo entries with seq <= until_seq (of `kind` alone when given),
        newest first."""
        ...

    async def count(self, instance_id: str, repo: str, until_seq: int, kind: str) -> int:
        """How many repo entries of `kind` have seq <= until_seq."""
        ...

    async def conversation_before(
        self, instance_id: str, repo: str, session_id: str, before_seq: int,
        turn_kinds: tuple[str, ...] = (), lookback: int = 0,
    ) -> ConversationBefore | None:
        """The conversation's entries with seq < before_seq, summed up; None when it has none.
        With `turn_kinds`, in the same read, its newest entry of one of them below
        before_seq, looked for among the `lookback` newest repo entries of each kind (None
        when none is)."""
        ...

    async def entry(self, seq: int) -> TimelineEntry | None:
        """The entry stored at `seq`, or None."""
        ...

    async def newest_at(
        self, conversations: Sequence[tuple[str, str, str]]
    ) -> dict[str, datetime]:
        """The `at` of each conversation's newest entry (the highest seq), by session_id, of
        the (instance_id, repo, session_id) given that have entries."""
        ...

    async def applied_seq(self) -> int:
        """The highest seq the projection has applied."""
        ...

    async def wait_until_applied(self, seq: int, timeout: float) -> bool:
        """Wait until the projection has applied `seq`; False when `timeout` passes first."""
        ...

    async def wait_for_entry(self, seq: int, timeout: float,
                             turn_kinds: tuple[str, ...] = (), lookback: int = 0) -> AppliedEntry:
        """`wait_until_applied`, and the entry there, in the same reads; with it, its repo's
        head and its conversation before it (`turn_kinds` and `lookback` as in
        conversation_before)."""
        ...

    async def wait_until_stored(self, entry_id: str, timeout: float) -> int | None:
        """Wait until the entry with `entry_id` is readable: its seq, or None when `timeout`
        passes first."""
        ...
