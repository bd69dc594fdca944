"""Where the composer reads the repo's timeline: a port, Postgres, and an in-memory one."""

from __future__ import annotations

from typing import Protocol

from psycopg_pool import AsyncConnectionPool

from seedline_core.brief import BriefRow
from seedline_platform.timeline_table import ROW_COLUMNS


class TimelineReader(Protocol):
    async def newest_first(
        self, instance_id: str, repo: str, until_seq: int, limit: int, kind: str | None = None
    ) -> list[BriefRow]:
        """Up to `limit` repo rows with seq <= until_seq (of one kind when given), newest first."""

    async def count(self, instance_id: str, repo: str, until_seq: int, kind: str) -> int:
        """How many repo rows of `kind` have seq <= until_seq."""


class PostgresTimelineReader:
    """Reads through the (instance_id, repo, seq) and (instance_id, repo, kind, seq) indexes."""

    def __init__(self, pool: AsyncConnectionPool) -> None:
        self._pool = pool

    async def newest_first(
        self, instance_id: str, repo: str, until_seq: int, limit: int, kind: str | None = None
    ) -> list[BriefRow]:
        where, params = _where(instance_id, repo, until_seq, kind)
        async with self._pool.connection() as conn:
            cur = await conn.execute(
                f"SELECT {ROW_COLUMNS} FROM timeline_entries WHERE {where}"
                " ORDER BY seq DESC LIMIT %s",
                (*params, limit),
            )
            rows = await cur.fetchall()
        return [
            BriefRow(seq=seq, session_id=sid, kind=kind, content=content, at=at, engine=engine)
            for seq, _entry_id, sid, kind, content, at, engine, _truncated in rows
        ]

    async def count(self, instance_id: str, repo: str, until_seq: int, kind: str) -> int:
        where, params = _where(instance_id, repo, until_seq, kind)
        async with self._pool.connection() as conn:
            cur = await conn.execute(f"SELECT count(*) FROM timeline_entries WHERE {where}", params)
            row = await cur.fetchone()
        return int(row[0])


def _where(
    instance_id: str, repo: str, until_seq: int, kind: str | None
) -> tuple[str, tuple[object, ...]]:
    where = "instance_id = %s AND repo = %s AND seq <= %s"
    if kind is None:
        return where, (instance_id, repo, until_seq)
    return where + " AND kind = %s", (instance_id, repo, until_seq, kind)


class InMemoryTimelineReader:
    """Rows given up front; records every read so tests can assert what was read."""

    def __init__(self, rows: list[tuple[str, str, BriefRow]] | None = None) -> None:
        self.rows = rows or []
        self.calls: list[tuple[str, str, int, int]] = []
        self.kind_calls: list[tuple[str, str, int, int, str]] = []
        self.counts: list[tuple[str, str, int, str]] = []

    async def newest_first(
        self, instance_id: str, repo: str, until_seq: int, limit: int, kind: str | None = None
    ) -> list[BriefRow]:
        if kind is None:
            self.calls.append((instance_id, repo, until_seq, limit))
        else:
            self.kind_calls.append((instance_id, repo, until_seq, limit, kind))
        matching = self._matching(instance_id, repo, until_seq, kind)
        return sorted(matching, key=lambda r: r.seq, reverse=True)[:limit]

    async def count(self, instance_id: str, repo: str, until_seq: int, kind: str) -> int:
        self.counts.append((instance_id, repo, until_seq, kind))
        return len(self._matching(instance_id, repo, until_seq, kind))

    def _matching(
        self, instance_id: str, repo: str, until_seq: int, kind: str | None
    ) -> list[BriefRow]:
        return [
            r for i, p, r in self.rows
            if i == instance_id and p == repo and r.seq <= until_seq
            and (kind is None or r.kind == kind)
        ]
