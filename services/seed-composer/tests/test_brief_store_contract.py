"""One contract for the composer's BriefStore: the fake and Postgres."""

from __future__ import annotations

import pytest

from seedline_core.brief import compose_brief
from seedline_core.brief_rows import BriefRow
from seedline_platform import pg
from seedline_seed_composer.briefs import InMemoryBriefStore, PostgresBriefStore


def brief(text: str):
    rows = [BriefRow(1, "csess_1", "chat_user", text, "2026-12-01T10:00:00Z", None)]
    return compose_brief(rows, 1, 1)


class BriefStoreContract:
    store: object

    async def test_the_newest_decision_s_brief_is_kept_byte_for_byte(self):
        assert await self.store.latest("csess_1") is None
        first, second = brief("first"), brief("second")
        await self.store.save("csess_1", 5, first)
        await self.store.save("csess_1", 3, second)  # an older decision, replayed
        kept = await self.store.latest("csess_1")
        assert kept.text == first.text and kept.sha256 == first.sha256
        await self.store.save("csess_1", 9, second)
        assert (await self.store.latest("csess_1")).text == second.text


class TestInMemoryBriefStore(BriefStoreContract):
    @pytest.fixture(autouse=True)
    def _store(self):
        self.store = InMemoryBriefStore()


@pytest.mark.servers
class TestPostgresBriefStore(BriefStoreContract):
    @pytest.fixture(autouse=True)
    async def _store(self, database_url):
        pool = await pg.open_pool(database_url, "brief-store-contract")
        self.store = PostgresBriefStore(pool)
        await self.store.setup()
        yield
        await pool.close()
