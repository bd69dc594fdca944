"""Rebuilding the timeline projection from the stream: same rows, drift repaired."""

from __future__ import annotations

import asyncio
import json

import nats
import psycopg
import pytest

from seedline_contracts import subjects
from seedline_devtools.testing import request, running
from seedline_devtools.testing_load import wait_until
from seedline_platform.sealing import KvKeyStore, Sealer
from seedline_timeline_writer.app import create_app
from seedline_timeline_writer.rebuild import rebuild_timeline

pytestmark = pytest.mark.servers

REPOS = ("apps/chess-academy", "apps/ledger", "tools/cli")


def entry(n: int, repo: str) -> dict:
    return {
        "entry_id": f"e-{n}",
        "instance_id": "bd43f4de",
        "repo": repo,
        "session_id": f"csess_{n % 2}",
        "kind": "chat_assistant" if n % 3 else "terminal",
        "content": f"message {n} in {repo}",
        "at": "2026-08-17T10:00:00Z",
        "engine": "claude" if n % 4 else None,
    }


async def append_all(nc, count: int) -> int:
    """Append count entries spread over REPOS; returns the last seq."""
    return await append_all_from(nc, 1, count)


async def append_all_from(nc, first: int, last_n: int) -> int:
    """Append entries first..last_n spread over REPOS; returns the last seq."""
    last = 0
    for n in range(first, last_n + 1):
        reply = await request(nc, subjects.API_TIMELINE_APPEND, entry(n, REPOS[n % len(REPOS)]))
        assert reply["ok"], reply
        last = reply["seq"]
    return last


async def projection(url: str) -> list[tuple]:
    async with await psycopg.AsyncConnection.connect(url) as conn:
        cur = await conn.execute("SELECT * FROM timeline_entries ORDER BY seq")
        return await cur.fetchall()


async def projected_at_least(url: str, count: int, timeout: float = 30.0) -> list[tuple]:
    deadline = asyncio.get_running_loop().time() + timeout
    while True:
        rows = await projection(url)
        if len(rows) >= count or asyncio.get_running_loop().time() > deadline:
            return rows
        await asyncio.sleep(0.1)


async def applied(url: str) -> int:
    async with await psycopg.AsyncConnection.connect(url) as conn:
        cur = await conn.execute(
            "SELECT applied_seq FROM timeline_offsets WHERE projection = 'timeline'"
        )
        return (await cur.fetchone())[0]


async def test_rebuild_yields_the_same_rows_and_digest_while_the_writer_runs(settings):
    async with running(create_app(settings)):
        nc = await nats.connect(settings.nats_url)
        last = await append_all(nc, 60)
        original = await projection(settings.database_url)
        calls: list[tuple[int, int]] = []

        result = await rebuild_timeline(settings, lambda done, total: calls.append((done, total)))

        assert result.before_digest == result.after_digest and result.identical
        assert result.rows == 60
        assert await projection(settings.database_url) == original
        assert await applied(settings.database_url) == last
        assert calls and calls[-1] == (60, last)
        # The running writer appends after the rebuilt offset, numbering on within its repo.
        reply = await request(nc, subjects.API_TIMELINE_APPEND, entry(61, REPOS[0]))
        read = await request(nc, subjects.API_TIMELINE_READ, {
            "instance_id": "bd43f4de", "repo": REPOS[0], "min_seq": reply["seq"], "limit": 1000})
        assert [r["entry_id"] for r in read["entries"]][-1] == "e-61"
        rows = await projection(settings.database_url)
        ordinals = [r[-1] for r in rows if r[3] == REPOS[0]]
        assert ordinals == list(range(1, len(ordinals) + 1))
        await nc.close()


async def test_rebuild_repairs_a_row_that_drifted_from_the_stream(settings):
    async with running(create_app(settings)):
        nc = await nats.connect(settings.nats_url)
        await append_all(nc, 30)
        original = await projection(settings.database_url)
        clean = await rebuild_timeline(settings, None)
        target = original[10][0]
        async with await psycopg.AsyncConnection.connect(settings.database_url) as conn:
            await conn.execute(
                "UPDATE timeline_entries SET content = 'tampered' WHERE seq = %s", (target,)
            )
            await conn.commit()

        result = await rebuild_timeline(settings, None)

        assert result.before_digest != result.after_digest
        assert result.after_digest == clean.after_digest
        repaired = await projection(settings.database_url)
        assert repaired == original
        # Content is stored sealed (CONTRACT.md Erasure, 1.2): the repaired row opens again.
        stored = [r for r in repaired if r[0] == target][0][6]
        sealer = Sealer(KvKeyStore(nc.jetstream()))
        assert await sealer.open("bd43f4de", stored) == "message 11 in " + REPOS[11 % 3]
        await nc.close()


async def test_rebuild_of_an_empty_timeline_is_empty(settings):
    result = await rebuild_timeline(settings, None)
    assert result.rows == 0 and result.identical
    assert await projection(settings.database_url) == []


async def test_rebuild_during_ingest_loses_nothing_and_numbers_repos_contiguously(settings):
    async with running(create_app(settings)):
        nc = await nats.connect(settings.nats_url)
        js = nc.jetstream()
        await append_all(nc, 20)

        async def ingest() -> None:
            for start in range(21, 421, 50):
                futures = [
                    await js.publish_async(
                        subjects.INGEST_TIMELINE,
                        json.dumps(entry(n, REPOS[n % len(REPOS)])).encode(),
                        headers={"Nats-Msg-Id": f"e-{n}"},
                    )
                    for n in range(start, start + 50)
                ]
                await asyncio.gather(*futures)

        feeding = asyncio.create_task(ingest())
        while not feeding.done():
            # A writer mid-batch is behind the stream's end, which is not drift.
            assert (await rebuild_timeline(settings, None)).identical
        await feeding
        rows = await projected_at_least(settings.database_url, 420)
        assert sorted(int(r[1][2:]) for r in rows) == list(range(1, 421))
        for repo in REPOS:
            ordinals = [r[-1] for r in rows if r[3] == repo]
            assert ordinals == list(range(1, len(ordinals) + 1))
        final = await rebuild_timeline(settings, None)
        assert final.identical and final.rows == 420
        await nc.close()


async def test_entries_stored_but_not_yet_projected_are_not_drift(settings):
    """A writer killed between its publish and its projection: the rebuild compares at
    the offsets the writers had reached, then projects the rest."""
    from seedline_contracts.timeline import TimelineEntry
    from seedline_timeline_writer.stream import JetStreamTimeline

    def stored(n: int, repo: str) -> TimelineEntry:
        return TimelineEntry(**entry(n, repo), truncated_from=None)

    nc = await nats.connect(settings.nats_url)
    js = nc.jetstream()
    try:
        async with running(create_app(settings)):
            await append_all(nc, 6)
            # A partition-1 writer that died before projecting anything (no offset row),
            # below entries partition 0 then projected.
            [(stray, _)] = await JetStreamTimeline(js, partition=1).append([stored(7, "apps/p1")])
            last = await append_all_from(nc, 8, 12)
        # As the stopped partition-0 writer's own publish would have left them.
        seqs = [seq for seq, _ in await JetStreamTimeline(js).append(
            [stored(n, REPOS[0]) for n in (13, 14)])]
        assert await applied(settings.database_url) == last < seqs[0]
        assert stray not in [r[0] for r in await projection(settings.database_url)]

        result = await rebuild_timeline(settings, None)

        assert result.identical and result.rows == 14
        rows = await projection(settings.database_url)
        assert [r[0] for r in rows] == list(range(1, seqs[-1] + 1))
        assert await applied(settings.database_url) == seqs[-1]
        for repo in (*REPOS, "apps/p1"):
            ordinals = [r[-1] for r in rows if r[3] == repo]
            assert ordinals == list(range(1, len(ordinals) + 1))
    finally:
        await nc.close()


async def test_a_rebuild_waits_for_an_append_that_holds_the_table_and_takes_no_offset_first(
        settings):
    """An append opens the table, then locks its offset's row: a rebuild that locked the
    offsets first and then the table to empty it waited for the append while the append
    waited for it (a deadlock Postgres ended by failing the rebuild)."""
    from seedline_timeline_writer.rebuild import _rebuild
    from seedline_timeline_writer.schema import OFFSETS, TIMELINE_PROJECTION

    async with running(create_app(settings)):
        nc = await nats.connect(settings.nats_url)
        await append_all(nc, 5)
        await projected_at_least(settings.database_url, 5)
        connect = psycopg.AsyncConnection.connect
        async with await connect(settings.database_url) as appending, \
                await connect(settings.database_url, autocommit=True) as rebuilding, \
                await connect(settings.database_url, autocommit=True) as watch:
            async with appending.transaction():
                # Where an append stands once it has opened the table.
                await appending.execute("LOCK TABLE timeline_entries IN ROW EXCLUSIVE MODE")
                rebuild = asyncio.create_task(_rebuild(rebuilding, nc.jetstream(), None))

                async def waits_for_a_lock() -> bool:
                    cur = await watch.execute(
                        "SELECT wait_event_type FROM pg_stat_activity WHERE pid = %s",
                        (rebuilding.info.backend_pid,))
                    return (await cur.fetchone())[0] == "Lock"

                await wait_until(waits_for_a_lock, 5, "the rebuild waiting for the append")
                # ...and its offset's row is there to take: the rebuild holds none of it.
                await appending.execute(
                    f"SELECT applied_seq FROM {OFFSETS.table} WHERE projection = %s"
                    " FOR UPDATE NOWAIT", (TIMELINE_PROJECTION,))
            before, after, rows = await rebuild
        assert before == after and rows == 5
        await nc.close()
