"""One launch at a time per (instance, repo), across every copy of the gateway (CONTRACT.md 4).

The fence (the decision's place in SEEDLINE_SESSIONS) says which launch of a repo may
go out; this turn says when. A launch checks the fence, stops what it replaces and
reaches its machine while holding its repo's turn, so two copies never launch on one
repo at once and an older decision never lands after a newer one.

Across copies the turn is a Postgres transaction advisory lock on the gateway's own
database: it is released when its holder's transaction or connection ends (a copy that
dies lets the next one go), and a copy that waits longer than LOCK_WAIT (a holder paused) gives the
message back to be tried again instead of holding a worker for ever.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import Protocol

import psycopg
from psycopg import sql
from psycopg_pool import AsyncConnectionPool

from seedline_platform import pg
from seedline_platform.outage import Outage

LOCK_WAIT = "30s"
# The offset is read by a statement of its own after the lock's: each statement of one
# query takes its own snapshot, so it reads the offset as it is once the turn is held.
TAKE_TURN = sql.SQL(f"SET LOCAL lock_timeout = '{LOCK_WAIT}';"
                    " SELECT pg_advisory_xact_lock(hashtextextended({key}, 0));"
                    " SELECT applied_seq FROM {offsets} WHERE projection = {projection}")


class RepoTurns(Protocol):
    def hold(self, instance_id: str, repo: str) -> AbstractAsyncContextManager[int | None]:
        """Hold the repo's turn; yields the fold's stored offset as the turn began (None:
        not read)."""
        ...


class LocalRepoTurns:
    """One process's turns (and the fake for tests that run one copy)."""

    def __init__(self) -> None:
        # Each repo's lock, and how many hold it or wait for it: the map keeps a repo only
        # while someone does.
        self._turns: dict[tuple[str, str], tuple[asyncio.Lock, list[int]]] = {}

    @asynccontextmanager
    async def hold(self, instance_id: str, repo: str) -> AsyncIterator[int | None]:
        key = (instance_id, repo)
        lock, users = self._turns.setdefault(key, (asyncio.Lock(), [0]))
        users[0] += 1
        try:
            async with lock:
                yield None
        finally:
            users[0] -= 1
            if not users[0]:
                del self._turns[key]


class PostgresRepoTurns:
    def __init__(self, pool: AsyncConnectionPool, offsets: pg.Offsets, projection: str) -> None:
        self._pool = pool
        self._offsets = sql.Identifier(offsets.table)
        self._projection = sql.Literal(projection)
        self._local = LocalRepoTurns()  # one connection per repo per copy, not per waiter
        # A turn holds a connection for the whole launch, and the launch may need others
        # (its reads go over the turn's own): with every connection held by a turn, no
        # launch could go on (seen with 50 repos opened at once on a pool of 8). Half the
        # pool, at most, holds turns.
        self._slots = asyncio.Semaphore(max(1, pool.max_size // 2))

    @asynccontextmanager
    async def hold(self, instance_id: str, repo: str) -> AsyncIterator[int | None]:
        key = f"launch:{instance_id}\n{repo}"  # names never hold control characters
        async with (self._local.hold(instance_id, repo), self._slots,
                    self._pool.connection() as conn):
            # A transaction's lock: it ends with the transaction whatever ends the launch
            # (an error, a cancel, the connection dropped), never left on a pooled connection.
            async with conn.transaction():
                try:
                    # One round trip: without parameters the statements go as one query.
                    cur = await conn.execute(TAKE_TURN.format(
                        key=sql.Literal(key), offsets=self._offsets,
                        projection=self._projection))
                except psycopg.errors.LockNotAvailable:
                    raise Outage(f"another copy holds the launch turn of {repo}") from None
                while cur.nextset():  # to the last statement's rows
                    pass
                row = await cur.fetchone()
                # The launch's reads of the gateway's state go over this connection: part
                # of the turn's transaction, not one transaction each.
                async with pg.lending(self._pool, conn):
                    yield int(row[0]) if row else 0
