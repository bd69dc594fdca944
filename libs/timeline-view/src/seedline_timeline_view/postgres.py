"""TimelineView over the timeline-writer's Postgres table, read-only.

The reading services' roles hold SELECT on `timeline_entries` and on the writer's
offset row and nothing else (deploy/postgres-roles.sql). ``repo_ordinal`` is each
entry's position within its repo, so "how many repo entries up to seq N" is one index
lookup, not a count over a large repo.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from datetime import datetime, timezone
from typing import TYPE_CHECKING

import psycopg
from psycopg_pool import AsyncConnectionPool

from seedline_contracts.timeline import TimelineEntry, TimelineRow

if TYPE_CHECKING:  # the view opens content with the caller's sealer; it needs no import
    from seedline_platform.sealing import Sealer

from .port import NO_UPPER_SEQ, AppliedEntry, ConversationBefore, RepoHead

TABLE = "timeline_entries"
OFFSETS_TABLE = "timeline_offsets"
PROJECTION = "timeline"
ROW_COLUMNS = "seq, entry_id, session_id, kind, content, at, engine, truncated_from"
_ENTRY_COLUMNS = "entry_id, instance_id, repo, session_id, kind, content, at, engine, truncated_from"
_ENTRY_WIDTH = len(_ENTRY_COLUMNS.split(", "))

REPO_HEAD_SQL = (
    f"SELECT seq, repo_ordinal FROM {TABLE} WHERE instance_id = %s AND repo = %s"
    " AND seq < %s ORDER BY seq DESC LIMIT 1"
)


def _summed_before(instance: str, repo: str, session: str, before: str) -> str:
    """A conversation's entries below a seq, summed up: the latest `at`, the highest seq and
    the newest engine named (each NULL when it has none). Arguments are SQL expressions."""
    return ("SELECT max(at::timestamptz), max(seq),"
            " (array_agg(engine ORDER BY seq DESC) FILTER (WHERE engine IS NOT NULL))[1]"
            f" FROM {TABLE} WHERE instance_id = {instance} AND repo = {repo}"
            f" AND session_id = {session} AND seq < {before}")


def _turn_before(instance: str, repo: str, session: str, before: str) -> str:
    """A conversation's newest turn below a seq: the newest `lookback` of each turn kind
    asked for, each an index range of its own, the conversation's newest among them (none
    when no kinds are asked for). Only the turn's content is opened."""
    return ("SELECT recent.* FROM unnest(%(kinds)s::text[]) AS wanted(kind) CROSS JOIN LATERAL"
            f" (SELECT {ROW_COLUMNS} FROM {TABLE} t WHERE t.instance_id = {instance}"
            f" AND t.repo = {repo} AND t.kind = wanted.kind AND t.seq < {before}"
            " ORDER BY t.seq DESC LIMIT %(lookback)s) AS recent"
            f" WHERE recent.session_id = {session} ORDER BY recent.seq DESC LIMIT 1")


_NAMED = ("%(instance)s", "%(repo)s", "%(session)s", "%(before)s")
CONVERSATION_BEFORE_SQL = (f"SELECT b.*, turn.* FROM ({_summed_before(*_NAMED)}) AS b"
                           f" LEFT JOIN ({_turn_before(*_NAMED)}) AS turn ON true")
ENTRY_SQL = f"SELECT {_ENTRY_COLUMNS} FROM {TABLE} WHERE seq = %s"
# An entry, the newest entry of its repo below it (its RepoHead before it), and its own
# conversation before it (CONVERSATION_BEFORE_SQL of its session_id): what a wake needs of
# the message that woke it, in one read.
_OF_ENTRY = ("e.instance_id", "e.repo", "e.session_id", "e.seq")
ENTRY_AND_BEFORE_SQL = (
    f"SELECT {', '.join('e.' + c for c in _ENTRY_COLUMNS.split(', '))}, h.seq, h.repo_ordinal,"
    " b.*, turn.*"
    f" FROM {TABLE} e LEFT JOIN LATERAL (SELECT seq, repo_ordinal FROM {TABLE}"
    " WHERE instance_id = e.instance_id AND repo = e.repo AND seq < e.seq"
    " ORDER BY seq DESC LIMIT 1) h ON true"
    f" LEFT JOIN LATERAL ({_summed_before(*_OF_ENTRY)}) AS b ON true"
    f" LEFT JOIN LATERAL ({_turn_before(*_OF_ENTRY)}) AS turn ON true"
    " WHERE e.seq = %(seq)s"
)
# Each conversation's newest entry: one probe of the session index apiece. The session is
# found by a row comparison on the index's columns, which only that index orders: asked as
# equalities, the planner does not know the sessions until it runs (they come from the
# array), and walked the primary key down from the newest entry of the whole table, past
# every entry of busier conversations, for one that was quiet.
NEWEST_AT_SQL = (
    "SELECT w.session_id, newest.at::timestamptz FROM unnest(%s::text[], %s::text[], %s::text[])"
    " AS w(instance_id, repo, session_id) CROSS JOIN LATERAL"
    f" (SELECT t.instance_id, t.repo, t.session_id, t.at FROM {TABLE} t"
    " WHERE (t.instance_id, t.repo, t.session_id) <= (w.instance_id, w.repo, w.session_id)"
    " ORDER BY t.instance_id DESC, t.repo DESC, t.session_id DESC, t.seq DESC LIMIT 1) AS newest"
    " WHERE (newest.instance_id, newest.repo, newest.session_id)"
    " = (w.instance_id, w.repo, w.session_id)"
)
# Each timeline-writer partition keeps its own offset ("timeline", "timeline.p1", ...).
APPLIED_SQL = f"SELECT max(applied_seq) FROM {OFFSETS_TABLE} WHERE projection LIKE 'timeline%%'"
PRESENT_SQL = f"SELECT seq FROM {TABLE} WHERE seq = %s"
STORED_SQL = f"SELECT seq FROM {TABLE} WHERE entry_id = %s"


class PostgresTimelineView:
    """Content is stored sealed (seedline_platform.sealing); with a sealer the view opens
    it, and leaves out rows of an instance whose key was destroyed."""

    def __init__(self, pool: AsyncConnectionPool, sealer: Sealer | None = None) -> None:
        self._pool = pool
        self._sealer = sealer

    async def _opened(self, instance_id: str, rows: list) -> list:
        """Rows whose content (column 4) is opened with the instance's key."""
        if self._sealer is None:
            return rows
        out = []
        for row in rows:
            content = await self._sealer.open_or_none(instance_id, row[4])
            if content is not None:
                out.append((*row[:4], content, *row[5:]))
        return out

    async def repo_head(
        self, instance_id: str, repo: str, before_seq: int | None = None
    ) -> RepoHead | None:
        upper = NO_UPPER_SEQ if before_seq is None else before_seq
        async with self._pool.connection() as conn:
            cur = await conn.execute(REPO_HEAD_SQL, (instance_id, repo, upper))
            row = await cur.fetchone()
        return RepoHead(int(row[0]), int(row[1])) if row else None

    async def newest_first(
        self, instance_id: str, repo: str, until_seq: int, limit: int, kind: str | None = None
    ) -> list[TimelineRow]:
        if kind is None:
            sql = (f"SELECT {ROW_COLUMNS} FROM {TABLE} WHERE instance_id = %s AND repo = %s"
                   " AND seq <= %s ORDER BY seq DESC LIMIT %s")
            params: tuple = (instance_id, repo, until_seq, max(0, limit))
        else:
            sql = (f"SELECT {ROW_COLUMNS} FROM {TABLE} WHERE instance_id = %s AND repo = %s"
                   " AND kind = %s AND seq <= %s ORDER BY seq DESC LIMIT %s")
            params = (instance_id, repo, kind, until_seq, max(0, limit))
        async with self._pool.connection() as conn:
            cur = await conn.execute(sql, params)
            rows = await cur.fetchall()
        return [TimelineRow(*row) for row in await self._opened(instance_id, rows)]

    async def count(self, instance_id: str, repo: str, until_seq: int, kind: str) -> int:
        async with self._pool.connection() as conn:
            cur = await conn.execute(
                f"SELECT count(*) FROM {TABLE} WHERE instance_id = %s AND repo = %s"
                " AND kind = %s AND seq <= %s",
                (instance_id, repo, kind, until_seq),
            )
            return int((await cur.fetchone())[0])

    async def conversation_before(
        self, instance_id: str, repo: str, session_id: str, before_seq: int,
        turn_kinds: tuple[str, ...] = (), lookback: int = 0,
    ) -> ConversationBefore | None:
        async with self._pool.connection() as conn:
            cur = await conn.execute(CONVERSATION_BEFORE_SQL, {
                "instance": instance_id, "repo": repo, "session": session_id,
                "before": before_seq, "kinds": list(turn_kinds), "lookback": max(0, lookback)})
            return await self._before(instance_id, await cur.fetchone())

    async def _before(self, instance_id: str, columns: Sequence) -> ConversationBefore | None:
        """CONVERSATION_BEFORE_SQL's columns read: the summary, then the turn's row."""
        last_at, last_seq, engine, *turn = columns
        if last_seq is None:
            return None
        opened = await self._opened(instance_id, [turn]) if turn[0] is not None else []
        return ConversationBefore(last_at.astimezone(timezone.utc), int(last_seq), engine,
                                  TimelineRow(*opened[0]) if opened else None)

    async def entry(self, seq: int) -> TimelineEntry | None:
        row = await self._entry_row((seq,))
        return None if row is None else await self._opened_entry(row)

    async def newest_at(
        self, conversations: Sequence[tuple[str, str, str]]
    ) -> dict[str, datetime]:
        if not conversations:
            return {}
        async with self._pool.connection() as conn:
            try:
                cur = await conn.execute(NEWEST_AT_SQL, [list(c) for c in zip(*conversations)])
            except psycopg.errors.UndefinedTable:
                return {}  # the timeline-writer has not made its table yet: nothing written
            return {session_id: at.astimezone(timezone.utc)
                    for session_id, at in await cur.fetchall()}

    async def _entry_row(self, params: tuple | dict, sql: str = ENTRY_SQL) -> tuple | None:
        async with self._pool.connection() as conn:
            cur = await conn.execute(sql, params)
            return await cur.fetchone()

    async def _opened_entry(self, row: tuple) -> TimelineEntry | None:
        if self._sealer is not None:
            content = await self._sealer.open_or_none(row[1], row[5])
            if content is None:
                return None
            row = (*row[:5], content, *row[6:])
        return TimelineEntry(*row)

    async def applied_seq(self) -> int:
        async with self._pool.connection() as conn:
            cur = await conn.execute(APPLIED_SQL)
            row = await cur.fetchone()
        return int(row[0]) if row and row[0] is not None else 0

    async def _seq(self, sql: str, key) -> int | None:
        async with self._pool.connection() as conn:
            row = await (await conn.execute(sql, (key,))).fetchone()
            return None if row is None else int(row[0])

    async def wait_until_applied(self, seq: int, timeout: float) -> bool:
        """The entry at `seq` is readable (with several writers, each projects its own
        partition, so the question is about that entry, not a common offset)."""
        return await self._wait_for(lambda: self._seq(PRESENT_SQL, seq), timeout) is not None

    async def wait_for_entry(self, seq: int, timeout: float,
                             turn_kinds: tuple[str, ...] = (), lookback: int = 0) -> AppliedEntry:
        params = {"seq": seq, "kinds": list(turn_kinds), "lookback": max(0, lookback)}
        row = await self._wait_for(lambda: self._entry_row(params, ENTRY_AND_BEFORE_SQL),
                                   timeout)
        if row is None:
            return AppliedEntry(False, None)
        entry, (head_seq, head_entries), before = (
            row[:_ENTRY_WIDTH], row[_ENTRY_WIDTH:_ENTRY_WIDTH + 2], row[_ENTRY_WIDTH + 2:])
        instance_id = entry[1]
        return AppliedEntry(
            True, await self._opened_entry(entry),
            None if head_seq is None else RepoHead(int(head_seq), int(head_entries)),
            await self._before(instance_id, before))

    async def wait_until_stored(self, entry_id: str, timeout: float) -> int | None:
        return await self._wait_for(lambda: self._seq(STORED_SQL, entry_id), timeout)

    async def _wait_for(self, look, timeout: float):
        """What `look` finds, asked again after 1, 2, 4 ... up to 20 ms: a write a moment
        old is there within a few ms, and a slow one is not asked for more than 50 times a
        second. None when `timeout` passes first."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        pause = 0.001
        while True:
            found = await look()
            if found is not None:
                return found
            if loop.time() >= deadline:
                return None
            await asyncio.sleep(pause)
            pause = min(pause * 2, 0.02)
