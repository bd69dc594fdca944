"""Where the timeline projection lives: a port, its Postgres adapter and a fake.

Both adapters pass the same contract tests (tests/test_store_contract.py).
"""

from __future__ import annotations

import asyncio
from typing import Protocol, Sequence

import psycopg
from psycopg_pool import AsyncConnectionPool

from seedline_contracts.timeline import TimelineEntry, TimelineReadRequest, TimelineRow
from seedline_platform import pg, timeline_table

Stored = tuple[int, TimelineEntry]  # (seq, entry)


class TimelineStore(Protocol):
    async def applied_seq(self) -> int: ...

    async def known(self, entry_ids: Sequence[str]) -> dict[str, int]:
        """The seq of each entry_id already stored."""

    async def append(self, stored: Sequence[Stored]) -> None:
        """Store entries in seq order; seqs at or below applied_seq are ignored."""

    async def read(self, request: TimelineReadRequest, limit: int) -> tuple[list[TimelineRow], bool]:
        """The newest `limit` rows below before_seq, ascending, and whether older ones exist."""


def _row(seq: int, e: TimelineEntry) -> TimelineRow:
    return TimelineRow(seq, e.entry_id, e.session_id, e.kind, e.content, e.at, e.engine, e.truncated_from)


class InMemoryTimelineStore:
    """For unit tests: same behaviour as the Postgres adapter, in a dict."""

    def __init__(self) -> None:
        self.rows: dict[int, TimelineEntry] = {}
        self.by_entry_id: dict[str, int] = {}
        self._applied = 0

    async def applied_seq(self) -> int:
        return self._applied

    async def known(self, entry_ids: Sequence[str]) -> dict[str, int]:
        return {e: self.by_entry_id[e] for e in entry_ids if e in self.by_entry_id}

    async def append(self, stored: Sequence[Stored]) -> None:
        for seq, entry in sorted(stored, key=lambda p: p[0]):
            if seq <= self._applied:
                continue
            self.rows[seq] = entry
            self.by_entry_id[entry.entry_id] = seq
            self._applied = seq

    async def read(self, request: TimelineReadRequest, limit: int) -> tuple[list[TimelineRow], bool]:
        matching = [
            (seq, e)
            for seq, e in sorted(self.rows.items())
            if e.instance_id == request.instance_id
            and e.repo == request.repo
            and (request.session_id is None or e.session_id == request.session_id)
            and (request.before_seq is None or seq < request.before_seq)
        ]
        page = matching[-limit:] if limit else []
        return [_row(s, e) for s, e in page], len(matching) > len(page)


class PostgresTimelineStore:
    def __init__(self, pool: AsyncConnectionPool) -> None:
        self._pool = pool

    async def setup(self) -> None:
        await pg.apply_schema(self._pool, "timeline", timeline_table.DDL)

    async def applied_seq(self) -> int:
        async with self._pool.connection() as conn:
            return await pg.read_offset(conn, timeline_table.PROJECTION)

    async def known(self, entry_ids: Sequence[str]) -> dict[str, int]:
        if not entry_ids:
            return {}
        async with self._pool.connection() as conn:
            cur = await conn.execute(
                "SELECT entry_id, seq FROM timeline_entries WHERE entry_id = ANY(%s)", (list(entry_ids),)
            )
            return {e: int(s) for e, s in await cur.fetchall()}

    async def append(self, stored: Sequence[Stored]) -> None:
        async with self._pool.connection() as conn, conn.transaction():
            applied = await pg.lock_offset(conn, timeline_table.PROJECTION)
            fresh = sorted((p for p in stored if p[0] > applied), key=lambda p: p[0])
            if not fresh:
                return
            await copy_entries(conn, fresh)
            await pg.set_offset(conn, timeline_table.PROJECTION, fresh[-1][0])

    async def read(self, request: TimelineReadRequest, limit: int) -> tuple[list[TimelineRow], bool]:
        clauses = ["instance_id = %s", "repo = %s"]
        params: list = [request.instance_id, request.repo]
        if request.session_id is not None:
            clauses.append("session_id = %s")
            params.append(request.session_id)
        if request.before_seq is not None:
            clauses.append("seq < %s")
            params.append(request.before_seq)
        params.append(limit + 1)
        async with self._pool.connection() as conn:
            cur = await conn.execute(
                f"SELECT {timeline_table.ROW_COLUMNS} FROM timeline_entries"
                f" WHERE {' AND '.join(clauses)} ORDER BY seq DESC LIMIT %s",
                params,
            )
            rows = await cur.fetchall()
        has_more = len(rows) > limit
        rows = rows[:limit]
        rows.reverse()
        return [TimelineRow(*r) for r in rows], has_more


async def copy_entries(
    conn: psycopg.AsyncConnection,
    fresh: Sequence[Stored],
    ordinals: dict[tuple[str, str], int] | None = None,
) -> None:
    """COPY entries, in ascending seq above every stored row, numbering each within its repo.

    ``ordinals`` carries each repo's last ordinal between calls in one transaction
    (a rebuild); repos it lacks are looked up in the table.
    """
    ordinals = {} if ordinals is None else ordinals
    for key in {(e.instance_id, e.repo) for _, e in fresh} - ordinals.keys():
        head = await timeline_table.repo_head(conn, *key)
        ordinals[key] = head.entries if head else 0
    async with conn.cursor() as cur:
        async with cur.copy(
            f"COPY timeline_entries ({', '.join(timeline_table.COLUMNS)}) FROM STDIN"
        ) as copy:
            for seq, e in fresh:
                key = (e.instance_id, e.repo)
                ordinals[key] += 1
                await copy.write_row(
                    (seq, e.entry_id, e.instance_id, e.repo, e.session_id, e.kind,
                     e.content, e.at, e.engine, e.truncated_from, ordinals[key])
                )


async def wait_until_applied(store: TimelineStore, seq: int, timeout: float) -> bool:
    """Read-your-writes: poll the projection until it has reached seq."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while True:
        if await store.applied_seq() >= seq:
            return True
        if loop.time() >= deadline:
            return False
        await asyncio.sleep(0.01)
