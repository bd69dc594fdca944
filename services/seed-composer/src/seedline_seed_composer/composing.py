"""Turn a continuity decision into a brief: read, compose (pure), store, record."""

from __future__ import annotations

from typing import Iterator, Sequence

from seedline_contracts.events import ContinuityDecided
from seedline_core.brief import MAX_ROWS, Brief, BriefRow, compose_brief

from .reader import TimelineReader


class _Counting:
    """An iterator that notes whether the walk asked for more rows than it had."""

    def __init__(self, rows: Sequence[BriefRow]) -> None:
        self._rows = rows
        self.exhausted = False

    def __iter__(self) -> Iterator[BriefRow]:
        yield from self._rows
        self.exhausted = True


async def compose_for(decision: ContinuityDecided, reader: TimelineReader) -> Brief | None:
    """The brief a decision offers, or None. clean_slate and force_fresh read nothing."""
    plan = decision.plan
    if plan.clean_slate or decision.seed_source is None or decision.until_seq is None:
        return None
    # The walk keeps at most MAX_ROWS rows and looks one further; it needs more
    # only when some rows are malformed, and then the read is widened.
    limit = MAX_ROWS + 1
    while True:
        rows = await reader.newest_first(plan.instance_id, plan.repo, decision.until_seq, limit)
        walk = _Counting(rows)
        brief = compose_brief(walk, decision.until_seq, decision.entries_upto)
        if not walk.exhausted or len(rows) < limit:
            return brief
        limit *= 4
