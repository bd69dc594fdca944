"""A connection a task holds in a transaction serves that task's reads (pg.lending and
pg.reading), against a real Postgres: the reads see what others commit as they run, writes
keep to the pool, and a task that outlives the loan reads from the pool."""

from __future__ import annotations

import asyncio

import psycopg
import pytest

from seedline_platform import pg
from seedline_platform.outage import DatabaseUnavailable

pytestmark = pytest.mark.servers


async def _backend(conn) -> int:
    return (await (await conn.execute("SELECT pg_backend_pid()")).fetchone())[0]


async def test_a_task_reads_over_the_connection_it_lends_and_sees_what_others_commit(database_url):
    pool = await pg.open_pool(database_url, "lending-test", max_size=4)
    try:
        async with pool.connection() as conn:
            await conn.execute("CREATE TABLE things (n int)")
        async with pool.connection() as held, held.transaction():
            lender = await _backend(held)
            async with pg.lending(pool, held):
                async with pg.reading(pool) as conn:
                    assert await _backend(conn) == lender
                    assert (await (await conn.execute("SELECT count(*) FROM things"))
                            .fetchone()) == (0,)
                async with pool.connection() as other:  # a write: its own connection
                    assert await _backend(other) != lender
                    await other.execute("INSERT INTO things VALUES (1)")
                async with pg.reading(pool) as conn:  # committed by another: seen
                    assert (await (await conn.execute("SELECT count(*) FROM things"))
                            .fetchone()) == (1,)

                async def elsewhere() -> int:
                    async with pg.reading(pool) as conn:
                        return await _backend(conn)

                later = asyncio.Event()

                async def outlives() -> int:
                    await later.wait()
                    return await elsewhere()

                task = asyncio.create_task(outlives())  # started inside, runs on after it
            later.set()
            assert await task != lender
        async with pg.reading(pool) as conn:  # after the block, from the pool
            assert isinstance(conn, psycopg.AsyncConnection)
    finally:
        await pool.close()


async def test_a_read_the_database_ends_on_a_lent_connection_is_database_unavailable(
        database_url):
    pool = await pg.open_pool(database_url, "lending-test", max_size=2)
    try:
        with pytest.raises(DatabaseUnavailable):
            async with pool.connection() as held, held.transaction():
                async with pg.lending(pool, held), pg.reading(pool) as conn:
                    await conn.execute("SELECT pg_terminate_backend(pg_backend_pid())")
    finally:
        await pool.close()


async def test_a_connection_lent_from_one_pool_serves_no_read_of_another(database_url):
    first = await pg.open_pool(database_url, "lending-test", max_size=2)
    second = await pg.open_pool(database_url, "lending-test", max_size=2)
    try:
        async with first.connection() as held, held.transaction():
            async with pg.lending(first, held), pg.reading(second) as conn:
                assert await _backend(conn) != await _backend(held)
    finally:
        await first.close()
        await second.close()
