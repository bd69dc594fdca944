"""The launch registry in Postgres: what a machine's output is checked against."""

from __future__ import annotations

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
