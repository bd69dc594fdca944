"""Where the composer reads the repo's timeline: its port, over the TimelineView, and over rows
held in memory (`seedline eval` composes from a transcript file, with no servers).

The composer never touches the timeline-writer's table itself: ``ViewReader`` asks the
writer's read port (seedline_timeline_view) and turns its rows into the pure brief's.
"""

from __future__ import annotations

from typing import Protocol

from seedline_core.brief import BriefRow
from seedline_timeline_view import TimelineView


class TimelineReader(Protocol):
    async def newest_first(
        self, instance_id: str, repo: str, until_seq: int, limit: int, kind: str | None = None
    ) -> list[BriefRow]:
        """Up to `limit` repo rows with seq <= until_seq (of one kind when given), newest first."""

    async def count(self, instance_id: str, repo: str, until_seq: int, kind: str) -> int:
        """How many repo rows of `kind` have seq <= until_seq."""


class ViewReader:
    def __init__(self, view: TimelineView) -> None:
        self._view = view

    async def newest_first(
        self, instance_id: str, repo: str, until_seq: int, limit: int, kind: str | None = None
    ) -> list[BriefRow]:
        rows = await self._view.newest_first(instance_id, repo, until_seq, limit, kind)
        return [BriefRow(r.seq, r.session_id, r.kind, r.content, r.at, r.engine) for r in rows]

    async def count(self, instance_id: str, repo: str, until_seq: int, kind: str) -> int:
        return await self._view.count(instance_id, repo, until_seq, kind)


class RowsReader:
    """Rows given up front, as (instance, repo, row)."""

    def __init__(self, rows: list[tuple[str, str, BriefRow]] | None = None) -> None:
        self.rows = rows or []

    async def newest_first(
        self, instance_id: str, repo: str, until_seq: int, limit: int, kind: str | None = None
    ) -> list[BriefRow]:
        matching = self._matching(instance_id, repo, until_seq, kind)
        return sorted(matching, key=lambda r: r.seq, reverse=True)[:limit]

    async def count(self, instance_id: str, repo: str, until_seq: int, kind: str) -> int:
        return len(self._matching(instance_id, repo, until_seq, kind))

    def _matching(
        self, instance_id: str, repo: str, until_seq: int, kind: str | None
    ) -> list[BriefRow]:
        return [
            r for i, p, r in self.rows
            if i == instance_id and p == repo and r.seq <= until_seq
            and (kind is None or r.kind == kind)
        ]
