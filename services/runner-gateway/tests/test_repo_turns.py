"""Repo turns across copies: one launch per repo at a time, and never every connection held
by a turn (a launch needs connections of its own while it holds one)."""

from __future__ import annotations

import asyncio

import pytest

from seedline_platform import pg
from seedline_runner_gateway.repo_turns import PostgresRepoTurns

pytestmark = pytest.mark.servers


async def test_many_repos_at_once_leave_connections_for_the_launches_holding_turns(database_url):
    pool = await pg.open_pool(database_url, "repo-turns", max_size=4)
    turns = PostgresRepoTurns(pool)
    held_at_once = most_at_once = 0

    async def launch(n: int) -> None:
        nonlocal held_at_once, most_at_once
        async with turns.hold("inst", f"apps/repo-{n}"):
            held_at_once += 1
            most_at_once = max(most_at_once, held_at_once)
            # What a launch does while it holds its turn: reads and writes of its own.
            async with pool.connection() as conn:
                await conn.execute("SELECT 1")
            await asyncio.sleep(0.05)
            held_at_once -= 1

    try:
        await asyncio.wait_for(asyncio.gather(*(launch(n) for n in range(12))), 20)
    finally:
        await pool.close()
    assert most_at_once == 2  # half the pool


async def test_two_launches_on_one_repo_take_turns(database_url):
    pool = await pg.open_pool(database_url, "repo-turns", max_size=4)
    turns, order = PostgresRepoTurns(pool), []

    async def launch(name: str) -> None:
        async with turns.hold("inst", "apps/same"):
            order.append(f"{name} in")
            await asyncio.sleep(0.1)
            order.append(f"{name} out")

    try:
        await asyncio.gather(launch("a"), launch("b"))
    finally:
        await pool.close()
    assert order in (["a in", "a out", "b in", "b out"], ["b in", "b out", "a in", "a out"])
