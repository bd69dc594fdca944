"""One contract for the writer's own port, TimelineStore: the fake and Postgres."""

from __future__ import annotations

import pytest

from seedline_contracts.timeline import TimelineEntry, TimelineReadRequest
from seedline_platform import pg
from seedline_timeline_writer.store import InMemoryTimelineStore, PostgresTimelineStore


def entry(n: int, session: str = "csess_1", repo: str = "apps/x") -> TimelineEntry:
    return TimelineEntry(f"e-{n}", "inst", repo, session, "chat_user", f"c{n}",
                         "2026-12-01T10:00:00Z", None, None)


def read(session=None, before=None, repo="apps/x") -> TimelineReadRequest:
    return TimelineReadRequest("inst", repo, session_id=session, before_seq=before)


class TimelineStoreContract:
    store: object

    async def test_append_ignores_seqs_already_applied_and_known_finds_entry_ids(self):
        await self.store.append([(1, entry(1)), (2, entry(2))])
        await self.store.append([(2, entry(99)), (3, entry(3))])
        assert await self.store.applied_seq() == 3
        assert await self.store.known(["e-1", "e-3", "e-99", "nope"]) == {"e-1": 1, "e-3": 3}

    async def test_read_pages_newest_first_ascending_with_has_more(self):
        await self.store.append([(n, entry(n, session=f"csess_{n % 2}")) for n in range(1, 8)])
        await self.store.append([(8, entry(8, repo="apps/y"))])
        rows, more = await self.store.read(read(), 3)
        assert [r.seq for r in rows] == [5, 6, 7] and more
        rows, more = await self.store.read(read(before=5), 10)
        assert [r.seq for r in rows] == [1, 2, 3, 4] and not more
        rows, _ = await self.store.read(read(session="csess_0"), 10)
        assert [r.seq for r in rows] == [2, 4, 6]
        rows, more = await self.store.read(read(repo="apps/y"), 10)
        assert [r.seq for r in rows] == [8] and not more


class TestInMemoryTimelineStore(TimelineStoreContract):
    @pytest.fixture(autouse=True)
    def _store(self):
        self.store = InMemoryTimelineStore()


@pytest.mark.servers
class TestPostgresTimelineStore(TimelineStoreContract):
    @pytest.fixture(autouse=True)
    async def _store(self, database_url):
        pool = await pg.open_pool(database_url, "store-contract")
        self.store = PostgresTimelineStore(pool)
        await self.store.setup()
        yield
        await pool.close()
