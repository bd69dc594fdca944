"""Where the composer reads the repo's timeline: a port, Postgres, and a fake."""

from __future__ import annotations

from typing import Protocol

from psycopg_pool import AsyncConnectionPool

from seedline_core.brief import BriefRow
from seedline_platform.timeline_table import ROW_COLUMNS


class TimelineReader(Protocol):
    async def newest_first(self, instance_id: str, repo: str, until_seq: int, limit: int) -> list[BriefRow]:
        """Up to `limit` repo rows with seq <= until_seq, newest first."""


class PostgresTimelineReader:
    def __init__(self, pool: AsyncConnectionPool) -> None:
        self._pool = pool

    async def newest_first(self, instance_id: str, repo: str, until_seq: int, limit: int) -> list[BriefRow]:
        async with self._pool.connection() as conn:
            cur = await conn.execute(
                f"SELECT {ROW_COLUMNS} FROM timeline_entries WHERE instance_id = %s AND repo = %s"
                " AND seq <= %s ORDER BY seq DESC LIMIT %s",
                (instance_id, repo, until_seq, limit),
            )
            rows = await cur.fetchall()
        return [
            BriefRow(seq=seq, session_id=sid, kind=kind, content=content, at=at, engine=engine)
            for seq, _entry_id, sid, kind, content, at, engine, _truncated in rows
        ]


class InMemoryTimelineReader:
    """Rows given up front; records every read so tests can assert there was none."""

    def __init__(self, rows: list[tuple[str, str, BriefRow]] | None = None) -> None:
        self.rows = rows or []
        self.calls: list[tuple[str, str, int, int]] = []

    async def newest_first(self, instance_id: str, repo: str, until_seq: int, limit: int) -> list[BriefRow]:
        self.calls.append((instance_id, repo, until_seq, limit))
        matching = [r for i, p, r in self.rows if i == instance_id and p == repo and r.seq <= until_seq]
        return sorted(matching, key=lambda r: r.seq, reverse=True)[:limit]
