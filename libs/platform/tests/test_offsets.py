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


ROWS_DDL = "CREATE TABLE IF NOT EXISTS contract_rows (id text PRIMARY KEY, v int NOT NULL)"
SELECT_ROWS = "SELECT id, v FROM contract_rows WHERE id = ANY(%s){gate} ORDER BY id FOR UPDATE"


async def _take_reading(conn: psycopg.AsyncConnection, projection: str, upto: int,
                        ids: list[str]) -> tuple[int, list[tuple]]:
    async with conn.transaction():
        return await OFFSETS.take_reading(conn, projection, upto, SELECT_ROWS, (ids,))


async def test_take_reading_takes_the_offset_and_reads_the_rows_in_one_statement(database_url):
    conn = await _connect(database_url)
    try:
        await conn.execute(ROWS_DDL)
        await conn.execute("INSERT INTO contract_rows VALUES ('a', 1), ('b', 2), ('c', 3)")
        assert await _take_reading(conn, "r", 4, ["a", "c", "x"]) == (0, [("a", 1), ("c", 3)])
        statements: list[str] = []
        execute = conn.execute

        async def counted(query, params=None, **kw):
            statements.append(query)
            return await execute(query, params, **kw)

        conn.execute = counted
        assert await _take_reading(conn, "r", 9, ["b"]) == (4, [("b", 2)])
        assert await _take_reading(conn, "r", 2, ["zz"]) == (9, [])  # redelivered late
        assert len(statements) == 2  # one each: the offset row is made
        assert await OFFSETS.read(conn, "r") == 9
    finally:
        await conn.close()


async def test_take_reading_behind_a_copy_holding_the_offset_reads_the_rows_it_committed(
        database_url):
    """The statement waits for the lock with a snapshot from before the other copy's commit:
    the row that copy made is read all the same, in a second statement."""
    first, second = await _connect(database_url), await _connect(database_url)
    try:
        await first.execute(ROWS_DDL)
        assert await _take_reading(first, "s", 1, []) == (0, [])
        async with first.transaction():
            assert await OFFSETS.take(first, "s", 7) == 1
            await first.execute("INSERT INTO contract_rows VALUES ('made', 7)")
            waiting = asyncio.create_task(_take_reading(second, "s", 8, ["made"]))
            await asyncio.sleep(0.2)
            assert not waiting.done()  # held until the first copy's batch commits
        assert await asyncio.wait_for(waiting, 5) == (7, [("made", 7)])
        assert await OFFSETS.read(first, "s") == 8
    finally:
        await first.close()
        await second.close()


async def test_take_reading_behind_a_rebuild_that_leaves_the_offset_where_it_was_reads_again(
        database_url):
    """A rebuild writes the offset back to the value it had: the row's version tells."""
    first, second = await _connect(database_url), await _connect(database_url)
    try:
        await first.execute(ROWS_DDL)
        assert await _take_reading(first, "t", 5, []) == (0, [])
        async with first.transaction():
            await OFFSETS.lock(first, "t")
            await first.execute("UPDATE contract_offsets SET applied_seq = 0 WHERE projection = 't'")
            await first.execute("INSERT INTO contract_rows VALUES ('rebuilt', 5)")
            await first.execute("UPDATE contract_offsets SET applied_seq = 5 WHERE projection = 't'")
            waiting = asyncio.create_task(_take_reading(second, "t", 6, ["rebuilt"]))
            await asyncio.sleep(0.2)
            assert not waiting.done()
        assert await asyncio.wait_for(waiting, 5) == (5, [("rebuilt", 5)])
    finally:
        await first.close()
        await second.close()


APPLY_IN_VIEW = OFFSETS.moved_past(in_view=True) + (
    ", made AS (INSERT INTO contract_rows SELECT 'seen-' || n, 0"
    " FROM (SELECT count(*) AS n FROM contract_rows) AS c WHERE EXISTS (SELECT 1 FROM moved))"
    " SELECT EXISTS (SELECT 1 FROM moved)")


async def test_a_batch_applied_in_view_changes_nothing_behind_another_copy_s_commit(
        database_url):
    """What the statement read of other rows is older than the commit it waited for: it
    changes nothing then, and says so."""
    first, second = await _connect(database_url), await _connect(database_url)
    try:
        await first.execute(ROWS_DDL)
        assert await _take_reading(first, "u", 1, []) == (0, [])
        applied = await second.execute(APPLY_IN_VIEW, ("u", 3, "u", 2, "u"))
        assert (await applied.fetchone())[0]  # nothing in the way: applied
        async with first.transaction():
            assert await OFFSETS.take(first, "u", 5) == 3
            await first.execute("INSERT INTO contract_rows VALUES ('other', 5)")
            waiting = asyncio.create_task(second.execute(APPLY_IN_VIEW, ("u", 7, "u", 6, "u")))
            await asyncio.sleep(0.2)
        assert not (await (await asyncio.wait_for(waiting, 5)).fetchone())[0]
        assert await OFFSETS.read(first, "u") == 5  # not moved: the caller takes it
        made = await first.execute("SELECT id FROM contract_rows WHERE id LIKE 'seen-%%'")
        assert [row[0] for row in await made.fetchall()] == ["seen-0"]
    finally:
        await first.close()
        await second.close()


async def _write_unmoved(conn: psycopg.AsyncConnection, projection: str, upto: int,
                         version: str, row: tuple[str, int]) -> bool:
    cur = await conn.execute(
        OFFSETS.unmoved_since() + ", written AS (INSERT INTO contract_rows"
        " SELECT %s, %s WHERE EXISTS (SELECT 1 FROM moved)"
        " ON CONFLICT (id) DO UPDATE SET v = EXCLUDED.v RETURNING 1)"
        " SELECT EXISTS (SELECT 1 FROM moved)", (projection, upto, projection, version, *row))
    return (await cur.fetchone())[0]


async def test_a_fold_read_without_a_lock_writes_only_while_the_offset_s_row_is_as_read(
        database_url):
    conn = await _connect(database_url)
    try:
        await conn.execute(ROWS_DDL)
        unlocked = "SELECT id, v FROM contract_rows WHERE id = ANY(%s)"
        assert await OFFSETS.read_with_rows(conn, "u", unlocked, (["a"],)) is None  # no row
        await OFFSETS.advance(conn, "u", 2)
        await conn.execute("INSERT INTO contract_rows VALUES ('a', 1)")
        applied, version, rows = await OFFSETS.read_with_rows(conn, "u", unlocked, (["a", "x"],))
        assert (applied, rows) == (2, [("a", 1)])
        assert await _write_unmoved(conn, "u", 4, version, ("a", 4))
        assert await OFFSETS.read(conn, "u") == 4
        # Read again; then a transaction writes the offset's row without moving it (an
        # erasure): the write after it changes nothing.
        applied, version, _ = await OFFSETS.read_with_rows(conn, "u", unlocked, (["a"],))
        await conn.execute(OFFSETS.touch_statement("u"))
        assert not await _write_unmoved(conn, "u", 6, version, ("a", 6))
        assert await OFFSETS.read(conn, "u") == 4
        assert (await (await conn.execute(
            "SELECT v FROM contract_rows WHERE id = 'a'")).fetchone())[0] == 4
    finally:
        await conn.close()
