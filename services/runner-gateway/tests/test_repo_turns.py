"""Repo turns across copies: one launch per repo at a time, and never every connection held
by a turn (a launch needs connections of its own while it holds one)."""

from __future__ import annotations

import asyncio

import pytest

from seedline_platform import pg
from seedline_runner_gateway.repo_turns import PostgresRepoTurns

pytestmark = pytest.mark.servers

OFFSETS = pg.Offsets("turn_test_offsets")


async def _turns(pool, applied: int = 0) -> PostgresRepoTurns:
    """Turns that read a fold's offset standing at `applied`."""
    async with pool.connection() as conn:
        await conn.execute(OFFSETS.ddl)
        await conn.execute("INSERT INTO turn_test_offsets VALUES ('sessions', %s)"
                           " ON CONFLICT (projection) DO UPDATE SET applied_seq = %s",
                           (applied, applied))
    return PostgresRepoTurns(pool, OFFSETS, "sessions")


async def test_many_repos_at_once_leave_connections_for_the_launches_holding_turns(database_url):
    pool = await pg.open_pool(database_url, "repo-turns", max_size=4)
    turns = await _turns(pool)
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
    turns, order = await _turns(pool), []

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


async def test_a_turn_reads_the_fold_s_stored_offset_as_it_stands_once_the_turn_is_held(
        database_url):
    """The launch's first wait (for the fold) takes the offset the turn's own round trip
    read: as stored after the turn was waited for, not before."""
    pool = await pg.open_pool(database_url, "repo-turns", max_size=4)
    turns = await _turns(pool, applied=7)
    other_copy = await _turns(pool, applied=7)
    seen = []

    async def first() -> None:
        async with turns.hold("inst", "apps/same") as stored:
            seen.append(stored)
            await asyncio.sleep(0.1)
            # Another copy's fold commits while this launch holds the turn.
            async with pool.connection() as conn:
                await conn.execute("UPDATE turn_test_offsets SET applied_seq = 9")

    async def second() -> None:
        await asyncio.sleep(0.02)
        async with other_copy.hold("inst", "apps/same") as stored:
            seen.append(stored)

    try:
        await asyncio.gather(first(), second())
    finally:
        await pool.close()
    assert seen == [7, 9]
