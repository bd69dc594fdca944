"""Where the timeline projection is written: the port, its Postgres adapter and a fake.

Both adapters pass the same contract tests (tests/test_store_contract.py). Reads for
other services go through seedline_timeline_view; this port is the owner's.
"""

from __future__ import annotations

import hashlib
from typing import Protocol, Sequence

import psycopg
from psycopg_pool import AsyncConnectionPool

from seedline_contracts.timeline import TimelineEntry, TimelineReadRequest, TimelineRow
from seedline_platform import pg
from seedline_platform.sealing import Sealer
from seedline_timeline_view import InMemoryTimelineView, PostgresTimelineView
from seedline_timeline_view.memory import row_of
from seedline_timeline_view.postgres import ROW_COLUMNS, TABLE

from .schema import COLUMNS, DDL, OFFSETS, timeline_projection

# Each repo's last ordinal, for every repo of a batch at once (its newest row by seq); an
# append reads them with its offset (pg.Offsets.take_reading puts its gate in).
_REPO_ORDINALS = (
    "SELECT k.instance_id, k.repo, (SELECT t.repo_ordinal FROM " + TABLE + " t"
    " WHERE t.instance_id = k.instance_id AND t.repo = k.repo ORDER BY t.seq DESC LIMIT 1)"
    " FROM unnest(%s::text[], %s::text[]) AS k(instance_id, repo) WHERE true{gate}"
)
REPO_ORDINALS_SQL = _REPO_ORDINALS.format(gate="")
# A batch none of which is stored, appended in one autocommitted statement: the offset moved
# past it, each entry numbered within its repo after the repo's last stored ordinal. Only
# when no other copy's batch or a rebuild committed after the statement began
# (pg.Offsets.moved_past, in_view), so the last ordinals it reads are the newest; moved?
_APPEND_FRESH = OFFSETS.moved_past(in_view=True) + f"""
, appended AS (
    INSERT INTO {TABLE} ({', '.join(COLUMNS)})
    SELECT b.*, coalesce((SELECT t.repo_ordinal FROM {TABLE} t WHERE t.instance_id = b.instance_id
                          AND t.repo = b.repo ORDER BY t.seq DESC LIMIT 1), 0)
               + row_number() OVER (PARTITION BY b.instance_id, b.repo ORDER BY b.seq)
    FROM unnest(%s::bigint[], %s::text[], %s::text[], %s::text[], %s::text[], %s::text[],
                %s::text[], %s::text[], %s::text[], %s::integer[])
         AS b({', '.join(COLUMNS[:-1])})
    WHERE EXISTS (SELECT 1 FROM moved)
)
SELECT EXISTS (SELECT 1 FROM moved)
"""

Stored = tuple[int, TimelineEntry]  # (seq, entry)


class TimelineStore(Protocol):
    async def applied_seq(self) -> int: ...

    async def known(self, entry_ids: Sequence[str]) -> dict[str, int]:
        """The seq of each entry_id already stored."""
        ...

    async def append(self, stored: Sequence[Stored]) -> None:
        """Store entries in seq order; seqs at or below applied_seq are ignored."""
        ...

    async def read(self, request: TimelineReadRequest, limit: int) -> tuple[list[TimelineRow], bool]:
        """The newest `limit` rows below before_seq, ascending, and whether older ones exist."""
        ...

    async def wait_until_applied(self, seq: int, timeout: float) -> bool: ...

    async def wait_until_stored(self, entry_id: str, timeout: float) -> int | None: ...


class InMemoryTimelineStore(InMemoryTimelineView):
    """For unit tests: the writer's port and the readers' view over one dict."""

    async def known(self, entry_ids: Sequence[str]) -> dict[str, int]:
        by_id = {e.entry_id: s for s, e in self.entries.items()}
        return {e: by_id[e] for e in entry_ids if e in by_id}

    async def append(self, stored: Sequence[Stored]) -> None:
        for seq, entry in sorted(stored, key=lambda p: p[0]):
            self.apply(seq, entry)

    async def read(self, request: TimelineReadRequest, limit: int) -> tuple[list[TimelineRow], bool]:
        matching = [
            (s, e) for s, e in sorted(self.entries.items())
            if e.instance_id == request.instance_id and e.repo == request.repo
            and (request.session_id is None or e.session_id == request.session_id)
            and (request.before_seq is None or s < request.before_seq)
        ]
        page = matching[-limit:] if limit else []
        return [row_of(s, e) for s, e in page], len(matching) > len(page)


class PostgresTimelineStore(PostgresTimelineView):
    """The writer of one ingest partition: it projects the entries it appended."""

    def __init__(
        self, pool: AsyncConnectionPool, partition: int = 0, sealer: Sealer | None = None
    ) -> None:
        super().__init__(pool, sealer)
        self._pool = pool
        self._projection = timeline_projection(partition)

    async def applied_seq(self) -> int:
        """The highest seq this partition has projected (the view's is over all of them)."""
        async with self._pool.connection() as conn:
            return await OFFSETS.read(conn, self._projection)

    async def setup(self) -> None:
        await pg.apply_schema(self._pool, "timeline-writer", DDL)

    async def known(self, entry_ids: Sequence[str]) -> dict[str, int]:
        if not entry_ids:
            return {}
        async with self._pool.connection() as conn:
            cur = await conn.execute(
                f"SELECT entry_id, seq FROM {TABLE} WHERE entry_id = ANY(%s)", (list(entry_ids),)
            )
            return {e: int(s) for e, s in await cur.fetchall()}

    async def append(self, stored: Sequence[Stored]) -> None:
        if not stored:
            return
        seqs = [seq for seq, _ in stored]
        async with self._pool.connection() as conn:
            cur = await conn.execute(_APPEND_FRESH, (
                self._projection, max(seqs), self._projection, min(seqs), self._projection,
                *pg.columns([(seq, e.entry_id, e.instance_id, e.repo, e.session_id, e.kind,
                              e.content, e.at, e.engine, e.truncated_from)
                             for seq, e in stored], 10)))
            if (await cur.fetchone())[0]:
                return
        # Part of it stored before, the projection's first batch, or another copy's batch
        # or a rebuild committed meanwhile: under the offset's lock.
        repos = sorted({(entry.instance_id, entry.repo) for _, entry in stored})
        async with self._pool.connection() as conn, conn.transaction():
            applied, found = await OFFSETS.take_reading(
                conn, self._projection, max(seqs), _REPO_ORDINALS,
                ([i for i, _ in repos], [r for _, r in repos]))
            fresh = sorted((p for p in stored if p[0] > applied), key=lambda p: p[0])
            if fresh:
                await copy_entries(conn, fresh, _ordinals(found))

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
                f"SELECT {ROW_COLUMNS} FROM {TABLE}"
                f" WHERE {' AND '.join(clauses)} ORDER BY seq DESC LIMIT %s",
                params,
            )
            rows = await cur.fetchall()
        has_more = len(rows) > limit
        rows = rows[:limit]
        rows.reverse()
        rows = await self._opened(request.instance_id, rows)
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
    unknown = sorted({(e.instance_id, e.repo) for _, e in fresh} - ordinals.keys())
    if unknown:  # every repo of the batch in one statement
        cur = await conn.execute(REPO_ORDINALS_SQL, ([i for i, _ in unknown],
                                                     [r for _, r in unknown]))
        ordinals.update(_ordinals(await cur.fetchall()))
    async with conn.cursor() as cur:
        async with cur.copy(f"COPY {TABLE} ({', '.join(COLUMNS)}) FROM STDIN") as copy:
            for seq, e in fresh:
                key = (e.instance_id, e.repo)
                ordinals[key] += 1
                await copy.write_row(
                    (seq, e.entry_id, e.instance_id, e.repo, e.session_id, e.kind,
                     e.content, e.at, e.engine, e.truncated_from, ordinals[key])
                )


def _ordinals(found: Sequence[tuple]) -> dict[tuple[str, str], int]:
    """REPO_ORDINALS_SQL's rows: each repo's last ordinal, 0 for a repo with no entry yet."""
    return {(instance_id, repo): int(last) if last is not None else 0
            for instance_id, repo, last in found}


async def digest(conn: psycopg.AsyncConnection) -> tuple[str, int]:
    """sha256 over every row in seq order, and the row count: equal digests, equal projections."""
    h = hashlib.sha256()
    count = 0
    async with conn.cursor() as cur:
        async with cur.copy(
            f"COPY (SELECT {', '.join(COLUMNS)} FROM {TABLE} ORDER BY seq) TO STDOUT"
        ) as copy:
            async for chunk in copy:
                h.update(chunk)
                count += bytes(chunk).count(b"\n")
    return h.hexdigest(), count
