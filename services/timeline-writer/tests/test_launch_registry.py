"""The launch registry in Postgres: what a machine's output is checked against."""

from __future__ import annotations

import asyncio

import pytest

from seedline_platform import pg
from seedline_timeline_writer.launches import Launch, PostgresLaunchRegistry
from seedline_timeline_writer.store import PostgresTimelineStore

MAC_A = Launch("mac", "inst-a", "apps/x", "csess_a")
MAC_B = Launch("mac", "inst-b", "apps/x", "csess_b")
PC_A = Launch("pc", "inst-a", "apps/x", "csess_a")


@pytest.mark.servers
async def test_a_launch_found_once_is_answered_from_memory_until_its_instance_is_forgotten(
        database_url):
    pool = await pg.open_pool(database_url, "launch-registry")
    try:
        await PostgresTimelineStore(pool).setup()  # the writer's schema: runner_launches
        registry = PostgresLaunchRegistry(pool, known_limit=2)
        await registry.record([MAC_A])
        async with pool.connection() as conn:  # another copy records inst-b's launch
            await conn.execute("INSERT INTO runner_launches VALUES (%s, %s, %s, %s)", MAC_B)
        assert await registry.permitted({MAC_A, MAC_B, PC_A}) == {MAC_A, MAC_B}
        async with pool.connection() as conn:  # gone from the table behind its back:
            await conn.execute("DELETE FROM runner_launches WHERE instance_id = 'inst-b'")
        # answered from memory, with no read (it would not find it now)
        assert await registry.permitted({MAC_B}) == {MAC_B}
        async with pool.connection() as conn, conn.transaction():
            await registry.forget(conn, "inst-a")
        assert await registry.permitted({MAC_A}) == set()
        await registry.record([MAC_A])  # the instance used again: asked for every time
        async with pool.connection() as conn:
            await conn.execute("DELETE FROM runner_launches WHERE instance_id = 'inst-a'")
        assert await registry.permitted({MAC_A}) == set()
    finally:
        await pool.close()


async def _rows(pool) -> set[Launch]:
    async with pool.connection() as conn:
        cur = await conn.execute("SELECT node_id, instance_id, repo, session_id"
                                 " FROM runner_launches")
        return {Launch(*row) for row in await cur.fetchall()}


@pytest.mark.servers
async def test_launches_learnt_together_are_held_at_once_and_written_in_one_statement(
        database_url):
    pool = await pg.open_pool(database_url, "launch-registry")
    try:
        await PostgresTimelineStore(pool).setup()
        registry = PostgresLaunchRegistry(pool, record_after=0.2)
        writes, record = [], registry.record

        async def counted(launches):
            writes.append(list(launches))
            await record(writes[-1])

        registry.record = counted
        registry.record_soon([MAC_A])
        registry.record_soon([MAC_B, PC_A])
        registry.record_soon([Launch("mac", "inst-c", "apps/x", "csess_c")])
        assert registry.held_here({MAC_A, MAC_B, PC_A}) == {MAC_A, MAC_B, PC_A}
        assert await _rows(pool) == set() and writes == []
        async with pool.connection() as conn, conn.transaction():
            await registry.forget(conn, "inst-c")  # before it was written: never written
        await asyncio.sleep(0.5)
        assert await _rows(pool) == {MAC_A, MAC_B, PC_A}
        assert [sorted(w) for w in writes] == [sorted([MAC_A, MAC_B, PC_A])]
        # What is kept when the service stops is written then (TimelineWriterApp.stop).
        late = Launch("pc", "inst-b", "apps/y", "csess_d")
        registry.record_soon([late])
        await registry.write_unwritten()
        assert late in await _rows(pool)
    finally:
        await pool.close()
