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
