"""A projection's offset taken and moved in one statement, against a real Postgres: what it
returns is where the offset was, and two copies taking it at once apply each step once."""

from __future__ import annotations

import asyncio

import psycopg
import pytest

from seedline_platform.pg import Offsets

pytestmark = pytest.mark.servers

OFFSETS = Offsets("contract_offsets")


async def _connect(database_url: str) -> psycopg.AsyncConnection:
    conn = await psycopg.AsyncConnection.connect(database_url, autocommit=True)
    await conn.execute(OFFSETS.ddl)
    return conn


async def test_take_returns_where_the_offset_was_and_never_moves_it_back(database_url):
    conn = await _connect(database_url)
    try:
        async with conn.transaction():
            assert await OFFSETS.take(conn, "p", 5) == 0  # its first batch makes the row
        async with conn.transaction():
            assert await OFFSETS.take(conn, "p", 3) == 5  # a batch redelivered late
        assert await OFFSETS.read(conn, "p") == 5
        with pytest.raises(RuntimeError):
            async with conn.transaction():
                assert await OFFSETS.take(conn, "p", 9) == 5
                raise RuntimeError("the batch failed")
        assert await OFFSETS.read(conn, "p") == 5  # rolled back with it
    finally:
        await conn.close()


async def test_a_copy_taking_it_while_another_holds_it_sees_what_that_one_committed(
        database_url):
    first, second = await _connect(database_url), await _connect(database_url)
    try:
        async with first.transaction():
            assert await OFFSETS.take(first, "q", 0) == 0
        async with first.transaction():
            assert await OFFSETS.take(first, "q", 7) == 0
            waiting = asyncio.create_task(_take_in_transaction(second, "q", 6))
            await asyncio.sleep(0.2)
            assert not waiting.done()  # held until the first copy's batch commits
        assert await asyncio.wait_for(waiting, 5) == 7  # so it skips steps up to 7
        assert await OFFSETS.read(first, "q") == 7
    finally:
        await first.close()
        await second.close()


async def _take_in_transaction(conn: psycopg.AsyncConnection, projection: str, upto: int) -> int:
    async with conn.transaction():
        return await OFFSETS.take(conn, projection, upto)


ROWS = ("SELECT k, v FROM contract_rows WHERE k IN (SELECT u.k FROM unnest(%(keys)s::text[],"
        " %(seqs)s::bigint[]) AS u(k, seq) WHERE u.seq > moved.was_seq) ORDER BY k FOR UPDATE")


async def test_take_reading_takes_the_offset_then_reads_and_locks_only_what_is_new(database_url):
    first, second, third = [await _connect(database_url) for _ in range(3)]
    try:
        await first.execute("CREATE TABLE IF NOT EXISTS contract_rows (k text PRIMARY KEY, v int)")
        await first.execute("INSERT INTO contract_rows VALUES ('a', 1), ('b', 2), ('c', 3)"
                            " ON CONFLICT DO NOTHING")
        batch = {"keys": ["a", "b", "x"], "seqs": [1, 2, 3]}
        async with first.transaction():  # its first batch makes the offset's row
            assert await OFFSETS.take_reading(first, "r", 3, ROWS, batch) == (
                0, [("a", 1), ("b", 2)])
        async with first.transaction():  # delivered again in part: seq 3 alone is new
            assert await OFFSETS.take_reading(first, "r", 4, ROWS, {
                "keys": ["a", "b", "c"], "seqs": [2, 3, 4]}) == (3, [("c", 3)])
        assert await OFFSETS.read(first, "r") == 4
        async with first.transaction():  # another copy holds the offset
            await OFFSETS.take(first, "r", 5)
            waiting = asyncio.create_task(_take_reading_in_transaction(second, {
                "keys": ["a"], "seqs": [6]}))
            await asyncio.sleep(0.2)
            assert not waiting.done()
            # Waiting for the offset, it has locked no row yet.
            async with third.transaction():
                await third.execute("SELECT 1 FROM contract_rows WHERE k = 'a' FOR UPDATE NOWAIT")
        assert await asyncio.wait_for(waiting, 5) == (5, [("a", 1)])
    finally:
        for conn in (first, second, third):
            await conn.close()


async def _take_reading_in_transaction(conn: psycopg.AsyncConnection, batch: dict):
    async with conn.transaction():
        return await OFFSETS.take_reading(conn, "r", 6, ROWS, batch)
