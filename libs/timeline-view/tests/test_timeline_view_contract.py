"""One contract for every TimelineView adapter: the in-memory fake and Postgres.

Each adapter is filled through its owner's write path (the timeline-writer's store),
then asked the same questions.
"""

from __future__ import annotations

import asyncio

import pytest

from seedline_contracts.timeline import TimelineEntry
from seedline_platform import pg
from seedline_timeline_view import RepoHead, TimelineView
from seedline_timeline_writer.store import InMemoryTimelineStore, PostgresTimelineStore


def entry(n: int, repo: str = "apps/x", instance: str = "inst-a", kind: str = "terminal",
          session: str = "csess_1", at: str = "2026-12-01T10:00:00Z",
          engine: str | None = None) -> TimelineEntry:
    return TimelineEntry(f"e-{n}", instance, repo, session, kind, f"content {n}", at, engine,
                         None)


ROWS = [
    (1, entry(1)), (2, entry(2, kind="chat_user")), (3, entry(3, repo="apps/y")),
    (4, entry(4, instance="inst-b")), (5, entry(5)), (6, entry(6, kind="chat_user")),
    (7, entry(7, session="csess_2")),
]


class TimelineViewContract:
    """Subclasses provide `view` (a TimelineView) and `write(rows)` (the owner's write)."""

    view: TimelineView

    async def write(self, rows) -> None:
        raise NotImplementedError

    async def test_repo_head_is_the_newest_entry_of_that_instance_and_repo(self):
        await self.write(ROWS)
        assert await self.view.repo_head("inst-a", "apps/x") == RepoHead(7, 5)
        assert await self.view.repo_head("inst-a", "apps/x", before_seq=6) == RepoHead(5, 3)
        assert await self.view.repo_head("inst-b", "apps/x") == RepoHead(4, 1)
        assert await self.view.repo_head("inst-a", "apps/none") is None

    async def test_newest_first_stays_in_its_repo_and_honours_until_limit_and_kind(self):
        await self.write(ROWS)
        rows = await self.view.newest_first("inst-a", "apps/x", until_seq=6, limit=10)
        assert [r.seq for r in rows] == [6, 5, 2, 1]
        assert [r.seq for r in await self.view.newest_first("inst-a", "apps/x", 7, 2)] == [7, 6]
        users = await self.view.newest_first("inst-a", "apps/x", 7, 10, kind="chat_user")
        assert [(r.seq, r.kind) for r in users] == [(6, "chat_user"), (2, "chat_user")]
        assert rows[0].session_id == "csess_1" and rows[0].content == "content 6"

    async def test_newest_of_a_conversation_of_some_kinds_within_a_lookback_of_each(self):
        await self.write(ROWS)
        async def newest(instance, repo, session, until_seq, kinds, lookback):
            before = await self.view.conversation_before(instance, repo, session,
                                                         until_seq + 1, kinds, lookback)
            return before.newest_turn if before else None

        found = await newest("inst-a", "apps/x", "csess_1", 7, ("chat_user", "terminal"), 10)
        assert (found.seq, found.kind, found.content) == (6, "chat_user", "content 6")
        assert (await newest("inst-a", "apps/x", "csess_1", 5, ("chat_user",), 10)).seq == 2
        assert (await newest("inst-a", "apps/x", "csess_1", 7, ("terminal",), 10)).seq == 5
        # The newest terminal entry of the repo (seq 7) is another conversation's: a lookback
        # of one sees only it.
        assert await newest("inst-a", "apps/x", "csess_1", 7, ("terminal",), 1) is None
        assert await newest("inst-a", "apps/x", "csess_2", 7, ("chat_user",), 10) is None
        assert await newest("inst-b", "apps/x", "csess_1", 7, ("chat_user",), 10) is None

    async def test_count_of_one_kind_up_to_a_seq(self):
        await self.write(ROWS)
        assert await self.view.count("inst-a", "apps/x", 7, "chat_user") == 2
        assert await self.view.count("inst-a", "apps/x", 5, "chat_user") == 1
        assert await self.view.count("inst-b", "apps/x", 7, "chat_user") == 0

    async def test_a_conversation_before_a_seq_has_its_latest_time_seq_and_engine(self):
        await self.write([
            (1, entry(1, session="s1", at="2026-12-01T09:00:00.5Z", engine="claude")),
            (2, entry(2, session="s1", at="2026-12-01T09:00:00Z")),
            (3, entry(3, session="s1", instance="inst-b", at="2026-12-01T11:00:00Z", engine="x")),
            (4, entry(4, session="s1", at="2026-12-01T12:00:00Z", engine="codex")),
        ])
        before = await self.view.conversation_before("inst-a", "apps/x", "s1", before_seq=4)
        assert (before.last_at.isoformat(), before.last_seq, before.engine) == (
            "2026-12-01T09:00:00.500000+00:00", 2, "claude")
        assert (await self.view.conversation_before("inst-a", "apps/x", "s1", 5)).engine == "codex"
        assert await self.view.conversation_before("inst-a", "apps/x", "s1", 1) is None
        assert await self.view.conversation_before("inst-a", "apps/y", "s1", 5) is None
        assert before.newest_turn is None  # not asked for
        with_turn = await self.view.conversation_before("inst-a", "apps/x", "s1", 4,
                                                        ("chat_assistant", "terminal"), 10)
        assert with_turn.newest_turn.seq == 2 and with_turn.newest_turn.content == "content 2"
        assert (with_turn.last_seq, with_turn.engine) == (before.last_seq, before.engine)
        assert (await self.view.conversation_before("inst-a", "apps/x", "s1", 4,
                                                    ("chat_user",), 10)).newest_turn is None

    async def test_the_time_of_each_conversations_newest_entry(self):
        await self.write([
            (1, entry(1, session="s1", at="2026-12-01T09:00:00Z")),
            (2, entry(2, session="s2", at="2026-12-01T09:30:00Z")),
            (3, entry(3, session="s1", at="2026-12-01T10:00:00.25Z")),
            (4, entry(4, session="s1", instance="inst-b", at="2026-12-01T11:00:00Z")),
            # The newest by seq, though its clock was behind: what came last.
            (5, entry(5, session="s2", at="2026-12-01T09:20:00Z")),
        ])
        newest = await self.view.newest_at([("inst-a", "apps/x", "s1"), ("inst-a", "apps/x", "s2"),
                                            ("inst-a", "apps/y", "s3")])
        assert {s: at.isoformat() for s, at in newest.items()} == {
            "s1": "2026-12-01T10:00:00.250000+00:00", "s2": "2026-12-01T09:20:00+00:00"}
        assert (await self.view.newest_at([("inst-b", "apps/x", "s1")]))["s1"].hour == 11
        assert await self.view.newest_at([("inst-a", "apps/y", "s1")]) == {}
        assert await self.view.newest_at([]) == {}

    async def test_entry_by_seq_and_the_applied_seq(self):
        assert await self.view.applied_seq() == 0
        await self.write(ROWS)
        assert (await self.view.entry(3)).repo == "apps/y"
        assert await self.view.entry(99) is None
        assert await self.view.applied_seq() == 7

    async def test_wait_until_applied_returns_once_the_seq_is_there_and_times_out_otherwise(self):
        await self.write(ROWS[:2])
        assert not await self.view.wait_until_applied(3, timeout=0.05)
        waiting = asyncio.create_task(self.view.wait_until_applied(3, timeout=5))
        await asyncio.sleep(0.05)
        await self.write(ROWS[2:3])
        assert await waiting

    async def test_wait_for_entry_gives_the_entry_once_its_seq_is_there(self):
        await self.write(ROWS[:2])
        assert await self.view.wait_for_entry(3, timeout=0.05) == (False, None, None, None)
        waiting = asyncio.create_task(self.view.wait_for_entry(3, timeout=5))
        await asyncio.sleep(0.05)
        assert not waiting.done()
        await self.write(ROWS[2:3])
        applied, entry, head_before, own_before = await waiting
        assert applied and entry == await self.view.entry(3) and entry.repo == "apps/y"
        assert head_before is None  # the first of its repo
        await self.write(ROWS[3:])
        for seq in (2, 5, 6, 7):  # each with its repo's head below it, read with it
            found = await self.view.wait_for_entry(seq, timeout=0.05)
            assert found.head_before == await self.view.repo_head(
                "inst-a", "apps/x", before_seq=seq)
        assert (await self.view.wait_for_entry(6, timeout=0.05)).head_before == RepoHead(5, 3)

    async def test_wait_for_entry_reads_its_own_conversation_before_it_with_it(self):
        await self.write([*ROWS, (8, entry(8, kind="chat_user", session="csess_2",
                                            engine="codex", at="2026-12-01T11:00:00Z")),
                          (9, entry(9, kind="chat_user", session="csess_2"))])
        for seq, kinds in ((6, ("chat_user", "chat_assistant")), (7, ()), (9, ("chat_user",)),
                           (9, ("terminal",)), (3, ("chat_user",))):
            entry_there = await self.view.entry(seq)
            found = await self.view.wait_for_entry(seq, 0.05, kinds, 10)
            assert found.own_before == await self.view.conversation_before(
                entry_there.instance_id, entry_there.repo, entry_there.session_id, seq, kinds,
                10), seq
        # What they are: csess_1 before 6 (its turn the chat_user at 2), csess_2 before 7
        # (nothing), csess_2 before 9 (8, codex, itself a turn).
        mid = (await self.view.wait_for_entry(6, 0.05, ("chat_user",), 10)).own_before
        assert (mid.last_seq, mid.newest_turn.seq, mid.newest_turn.content) == (
            5, 2, "content 2")
        assert (await self.view.wait_for_entry(7, 0.05)).own_before is None
        late = (await self.view.wait_for_entry(9, 0.05, ("chat_user",), 10)).own_before
        assert (late.last_seq, late.engine, late.newest_turn.seq) == (8, "codex", 8)
        assert late.last_at.hour == 11

    async def test_wait_until_stored_finds_an_entry_by_its_id_once_it_is_written(self):
        await self.write(ROWS[:2])
        assert await self.view.wait_until_stored("e-2", timeout=0.05)
        assert await self.view.wait_until_stored("e-2", timeout=0.05) == 2
        assert not await self.view.wait_until_stored("e-3", timeout=0.05)
        waiting = asyncio.create_task(self.view.wait_until_stored("e-3", timeout=5))
        await asyncio.sleep(0.05)
        assert not waiting.done()
        await self.write(ROWS[2:3])
        assert await waiting


class TestInMemoryTimelineView(TimelineViewContract):
    @pytest.fixture(autouse=True)
    def _view(self):
        self.view = InMemoryTimelineStore()

    async def write(self, rows) -> None:
        await self.view.append(rows)


@pytest.mark.servers
class TestPostgresTimelineView(TimelineViewContract):
    @pytest.fixture(autouse=True)
    async def _view(self, database_url):
        pool = await pg.open_pool(database_url, "view-contract")
        store = PostgresTimelineStore(pool)
        await store.setup()
        self.view = store
        yield
        await pool.close()

    async def write(self, rows) -> None:
        await self.view.append(rows)
