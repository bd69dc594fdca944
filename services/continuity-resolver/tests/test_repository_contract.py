"""One contract for the resolver's ConversationRepository: the fake and Postgres."""

from __future__ import annotations

import asyncio

import psycopg
import pytest

from seedline_continuity_resolver.postgres_repository import (
    FORGET_FIRST,
    FORGET_STATEMENTS,
    OFFSETS,
    PostgresConversationRepository,
)
from seedline_continuity_resolver.repository import InMemoryConversationRepository
from seedline_contracts.instances import Erasure
from seedline_core import lifecycle as lc
from seedline_devtools.testing import between_read_and_write, statements_sent
from seedline_platform import erasure, pg

AT = "2026-12-01T10:00:00Z"


def requested(seq, session, instance="inst-a", repo="apps/x"):
    return (seq, session, lc.Requested(session, instance, repo, seq, "mac", "claude"), None, None)


class ConversationRepositoryContract:
    repo: object

    async def test_the_same_session_id_in_two_instances_is_two_conversations(self):
        await self.repo.apply_timeline([
            (1, "inst-a", "apps/x", "s1", "2026-12-01T09:00:00Z", "claude"),
            (2, "inst-b", "apps/y", "s1", "2026-12-01T10:00:00Z", "codex"),
            (3, "inst-a", "apps/x", "s2", "2026-12-01T08:00:00Z", None),
        ])
        a = await self.repo.previous("inst-a", "apps/x")
        b = await self.repo.previous("inst-b", "apps/y")
        assert (a.session_id, a.engine) == ("s1", "claude")
        assert (b.session_id, b.engine) == ("s1", "codex")
        assert a.last_activity_at.hour == 9 and b.last_activity_at.hour == 10
        assert await self.repo.previous("inst-b", "apps/x") is None
        assert await self.repo.applied("timeline") == 3

    async def test_a_batch_of_one_conversations_entries_leaves_its_newest_of_each(self):
        await self.repo.apply_timeline([
            (1, "inst-a", "apps/x", "s1", "2026-12-01T09:00:00Z", None, "chat_user", "Go"),
            (2, "inst-a", "apps/x", "s1", "2026-12-01T09:05:00.5Z", "claude", "chat_assistant",
             "Done"),
            (3, "inst-a", "apps/x", "s2", "2026-12-01T08:00:00Z", "codex", "terminal", ""),
            (4, "inst-a", "apps/x", "s1", "2026-12-01T09:01:00Z", None, "terminal", ""),
        ])
        rows = {r.session_id: r for r in await self.repo.rows()}
        one = rows["s1"]
        assert (one.activity_seq, one.entry_engine) == (4, "claude")
        assert one.last_entry_at.minute == 5 and one.last_entry_at.microsecond == 500000
        assert (one.newest_turn.seq, one.newest_turn.kind, one.newest_turn.excerpt) == (
            2, "chat_assistant", "Done")
        assert (rows["s2"].entry_engine, rows["s2"].newest_turn) == ("codex", None)
        # A later batch: an older time moves nothing back, a newer turn replaces the turn.
        await self.repo.apply_timeline([
            (5, "inst-a", "apps/x", "s1", "2026-12-01T08:00:00Z", None, "chat_user", "More"),
        ])
        one = {r.session_id: r for r in await self.repo.rows()}["s1"]
        assert one.last_entry_at.minute == 5 and one.newest_turn.seq == 5
        assert one.entry_engine == "claude"

    async def test_a_timeline_batch_delivered_again_whole_or_in_part_applies_only_what_is_new(
            self):
        go = (1, "inst-a", "apps/x", "s1", "2026-12-01T09:00:00Z", "claude", "chat_user", "Go")
        first = [go, (2, "inst-a", "apps/x", "s1", "2026-12-01T09:01:00Z", "codex",
                      "chat_assistant", "Done")]
        await self.repo.apply_timeline(first)
        await self.repo.apply_timeline(first)  # the same batch again
        # Part applied, part new: the entry at seq 1, applied, takes nothing back.
        await self.repo.apply_timeline([
            go, (3, "inst-a", "apps/x", "s2", "2026-12-01T09:02:00Z", "codex", "terminal", "")])
        rows = {r.session_id: r for r in await self.repo.rows()}
        assert (rows["s1"].activity_seq, rows["s1"].newest_turn.seq) == (2, 2)
        assert rows["s1"].entry_engine == "codex"
        assert rows["s2"].activity_seq == 3 and rows["s2"].entry_engine == "codex"
        assert await self.repo.applied("timeline") == 3
        await self.repo.apply_timeline([
            (3, "inst-a", "apps/x", "s1", "2026-12-01T10:00:00Z", None, "chat_user", "Late")])
        assert {r.session_id: r for r in await self.repo.rows()}["s1"].activity_seq == 2

    async def test_the_lifecycle_is_folded_and_a_confirmed_open_counts_as_activity(self):
        await self.repo.apply_lifecycle([
            requested(1, "csess_a"),
            (2, "csess_a", lc.Opened("mac", "claude", "k1", "2026-12-01T11:00:00Z"),
             b'{"ok":true}', None),
            (3, "csess_a", lc.EngineBound("mac", "k2"), None, None),
        ], 3)
        row = await self.repo.platform("csess_a")
        assert row.platform.state is lc.State.LIVE and row.last_reply == b'{"ok":true}'
        previous = await self.repo.previous("inst-a", "apps/x")
        assert (previous.resume_key, previous.resume_node_id) == ("k2", "mac")
        assert previous.last_activity_at.hour == 11
        await self.repo.apply_lifecycle([(3, "csess_a", lc.Stopped("x"), None, None)], 3)
        assert (await self.repo.platform("csess_a")).platform.state is lc.State.LIVE  # applied

    async def test_a_batch_with_no_step_moves_only_the_sessions_offset(self):
        await self.repo.apply_lifecycle([], 2)  # a fresh projection: decisions, receipts
        assert await self.repo.applied("sessions") == 2
        await self.repo.apply_lifecycle([requested(3, "csess_a")], 3)
        await self.repo.apply_lifecycle([], 8)
        await self.repo.apply_lifecycle([], 5)  # a batch redelivered late
        assert await self.repo.applied("sessions") == 8
        assert await self.repo.applied("timeline") == 0
        await self.repo.apply_lifecycle([(4, "csess_a", lc.OpenFailed(), None, None)], 8)
        assert (await self.repo.platform("csess_a")).platform.state is lc.State.OPENING

    async def test_the_rows_of_a_repo_are_its_timeline_and_platform_conversations_alone(self):
        await self.repo.apply_timeline([
            (1, "inst-a", "apps/x", "s1", AT, "claude"),
            (2, "inst-b", "apps/x", "s1", AT, None),
            (3, "inst-a", "apps/y", "s2", AT, None),
        ])
        await self.repo.apply_lifecycle([requested(1, "csess_a")], 1)
        first, rows = await self.repo.claim_reading_repo("inst-a", "apps/x", "wake:1",
                                                         "csess_w")
        assert first is None  # claimed now
        assert [(r.session_id, r.entry_engine, r.platform is not None) for r in rows] == [
            ("csess_a", None, True), ("s1", "claude", False)]
        # Claimed before: the first claim's conversation, and the rows all the same.
        again, rows_again = await self.repo.claim_reading_repo("inst-a", "apps/x", "wake:1",
                                                               "csess_other")
        assert again == "csess_w" and rows_again == rows
        assert await self.repo.claim_reading_repo("inst-a", "apps/none", "wake:2", "csess_n") \
            == (None, [])
        assert await self.repo.session_for_request("inst-a", "wake:2") == "csess_n"

    async def test_a_failed_open_is_a_platform_conversation_with_no_engine(self):
        await self.repo.apply_lifecycle([requested(1, "csess_f"),
                                         (2, "csess_f", lc.OpenFailed(), None, None)], 2)
        (conversation,) = await self.repo.platform_of_repo("inst-a", "apps/x")
        assert conversation.state is lc.State.FAILED and conversation.engine is None

    async def test_a_conversation_whose_only_open_failed_is_never_the_previous_one(self):
        await self.repo.apply_timeline([
            (1, "inst-a", "apps/x", "s1", "2026-12-01T09:00:00Z", "claude"),
            (2, "inst-a", "apps/x", "csess_f", "2026-12-01T10:00:00Z", None),
        ])
        await self.repo.apply_lifecycle([requested(1, "csess_f"),
                                         (2, "csess_f", lc.OpenFailed(), None, None)], 2)
        assert (await self.repo.previous("inst-a", "apps/x")).session_id == "s1"

    async def test_a_batch_of_several_conversations_folds_each_to_its_last_step(self):
        await self.repo.claim_request("inst-a", "r-b", "csess_b")
        await self.repo.apply_lifecycle([
            requested(1, "csess_a"), requested(2, "csess_b"),
            (3, "csess_a", lc.Opened("mac", "claude", None, AT), b"a-open", None),
            (4, "csess_b", lc.Opened("pc", "codex", None, AT), b"b-open", "r-b"),
            (5, "csess_a", lc.Stopped("requested"), None, None),
        ], 5)
        a, b = await self.repo.platform("csess_a"), await self.repo.platform("csess_b")
        assert (a.platform.state, a.platform.node_id, a.last_reply) == (
            lc.State.STOPPED, "mac", b"a-open")
        assert (b.platform.state, b.platform.node_id, b.last_reply) == (
            lc.State.LIVE, "pc", b"b-open")
        assert await self.repo.reply_for_request("csess_b") == b"b-open"
        await self.repo.apply_lifecycle([(5, "csess_b", lc.Stopped("again"), None, None)], 5)
        assert (await self.repo.platform("csess_b")).platform.state is lc.State.LIVE

    async def test_a_batch_of_requests_alone_makes_only_what_the_platform_does_not_hold(self):
        await self.repo.apply_lifecycle([requested(1, "csess_a")], 1)  # the first ever
        await self.repo.apply_lifecycle(
            [(2, "csess_a", lc.Opened("mac", "claude", None, AT), None, None)], 2)
        await self.repo.apply_timeline([  # the conversation b's first words, before its open
            (1, "inst-a", "apps/x", "csess_b", "2026-12-01T09:00:00Z", None, "chat_user", "Go")])
        await self.repo.apply_lifecycle(
            [requested(3, "csess_a"), requested(4, "csess_b"), requested(5, "csess_b")], 5)
        a = await self.repo.platform("csess_a")
        assert a.platform.state is lc.State.LIVE and a.platform.created_seq == 1  # unchanged
        b = await self.repo.platform("csess_b")
        assert (b.platform.state, b.platform.created_seq) == (lc.State.OPENING, 4)
        assert (b.activity_seq, b.newest_turn.seq) == (1, 1)  # its timeline columns kept
        # Delivered again, in part: nothing applied twice.
        await self.repo.apply_lifecycle([requested(5, "csess_c"), requested(6, "csess_d")], 6)
        assert await self.repo.platform("csess_c") is None
        assert (await self.repo.platform("csess_d")).platform.created_seq == 6
        assert await self.repo.applied("sessions") == 6

    async def test_request_claims_and_their_replies(self):
        assert await self.repo.claim_request("inst-a", "r-1", "csess_a") is None
        assert await self.repo.claim_request("inst-a", "r-1", "csess_b") == "csess_a"
        assert await self.repo.claim_request("inst-b", "r-1", "csess_c") is None
        await self.repo.apply_lifecycle([
            requested(1, "csess_a"),
            (2, "csess_a", lc.Opened("mac", "claude", None, AT), b"first", "r-1"),
        ], 2)
        assert await self.repo.reply_for_request("csess_a") == b"first"
        assert await self.repo.reply_for_request("csess_c") is None

    async def test_a_batch_of_several_opens_keeps_each_request_s_first_reply(self):
        for request_id, session_id in (("r-1", "csess_a"), ("r-2", "csess_b"),
                                       ("r-3", "csess_c")):
            await self.repo.claim_request("inst-a", request_id, session_id)
        await self.repo.apply_lifecycle([
            requested(1, "csess_c"),
            (2, "csess_c", lc.Opened("mac", "claude", None, AT), b"c-first", "r-3")], 2)
        await self.repo.apply_lifecycle([
            requested(3, "csess_a"), requested(4, "csess_b"),
            (5, "csess_a", lc.Opened("mac", "claude", None, AT), b"a-first", "r-1"),
            (6, "csess_b", lc.Opened("pc", "codex", None, AT), b"b-first", "r-2"),
            # Answered again in the batch, and answered before it: each keeps its first.
            (7, "csess_a", lc.Relocated("pc", "claude", None, AT), b"a-moved", "r-1"),
            (8, "csess_c", lc.Opened("mac", "claude", None, AT), b"c-again", "r-3"),
        ], 8)
        for session_id, first in (("csess_a", b"a-first"), ("csess_b", b"b-first"),
                                  ("csess_c", b"c-first")):
            assert await self.repo.reply_for_request(session_id) == first
        a, b = await self.repo.platform("csess_a"), await self.repo.platform("csess_b")
        assert (a.platform.node_id, a.last_reply) == ("pc", b"a-moved")  # its last confirmed
        assert (b.platform.state, b.platform.engine, b.last_reply) == (
            lc.State.LIVE, "codex", b"b-first")

    async def test_a_resume_lost_corrects_the_reply_every_later_read_gets(self):
        await self.repo.claim_request("inst-a", "r-1", "csess_a")
        await self.repo.apply_lifecycle([
            requested(1, "csess_a"),
            (2, "csess_a", lc.Opened("mac", "claude", "k1", AT, "resumed"), b"resumed", "r-1"),
            (3, "csess_a", lc.ResumeLost("mac", "resume_unconfirmed_briefed"), b"briefed", None),
        ], 3)
        assert await self.repo.reply_for_request("csess_a") == b"briefed"
        row = await self.repo.platform("csess_a")
        assert row.last_reply == b"briefed" and row.platform.state is lc.State.LIVE

    async def test_reset_forgets_rows_and_offsets_but_not_claims(self):
        await self.repo.claim_request("inst-a", "r-1", "csess_a")
        await self.repo.apply_timeline([(1, "inst-a", "apps/x", "s1", AT, None)])
        await self.repo.reset()
        assert await self.repo.rows() == [] and await self.repo.applied("timeline") == 0
        assert await self.repo.claim_request("inst-a", "r-1", "csess_z") == "csess_a"


class TestInMemoryConversationRepository(ConversationRepositoryContract):
    @pytest.fixture(autouse=True)
    def _repo(self):
        self.repo = InMemoryConversationRepository()


@pytest.mark.servers
class TestPostgresConversationRepository(ConversationRepositoryContract):
    @pytest.fixture(autouse=True)
    async def _repo(self, database_url):
        # As the resolver runs it: its folds on a pool of their own (keyed_pool_size).
        pool = await pg.open_pool(database_url, "repository-contract")
        keyed = await pg.open_pool(database_url, "repository-contract", 2, keyed=True)
        self.repo = PostgresConversationRepository(pool, keyed=keyed)
        await self.repo.setup()
        yield
        await keyed.close()
        await pool.close()

    async def test_a_request_folded_while_another_copy_holds_the_offset_keeps_what_it_made(
            self, database_url):
        # Another copy's batch holds the offset and makes the conversation live; this copy's
        # batch, the conversation's next request alone, waits for it and changes nothing.
        await self.repo.apply_lifecycle([requested(1, "csess_z")], 1)
        other = await psycopg.AsyncConnection.connect(database_url)
        try:
            await other.execute("SELECT applied_seq FROM resolver_offsets"
                                " WHERE projection = 'sessions' FOR UPDATE")
            await other.execute("UPDATE resolver_offsets SET applied_seq = 3"
                                " WHERE projection = 'sessions'")
            await other.execute(
                "INSERT INTO conversations (instance_id, repo, session_id, state, created_seq,"
                " node_id, engine) VALUES ('inst-a', 'apps/x', 'csess_a', 'live', 2, 'mac',"
                " 'claude')")
            waiting = asyncio.create_task(self.repo.apply_lifecycle([requested(4, "csess_a")], 4))
            await asyncio.sleep(0.2)
            assert not waiting.done()  # held by the other copy's batch
            await other.commit()
            await asyncio.wait_for(waiting, 5)
        finally:
            await other.close()
        row = await self.repo.platform("csess_a")
        assert (row.platform.state, row.platform.created_seq) == (lc.State.LIVE, 2)
        assert await self.repo.applied("sessions") == 4


@pytest.mark.servers
class TestPostgresLifecycleFoldWithoutALock:
    """The Postgres lifecycle fold reads a batch's rows with the offset and writes what it
    folded in a second statement, with no transaction, when the offset's row is as it read
    it; when another copy's batch or an erasure wrote it in between, the batch is read and
    written again under the offset's lock."""

    @pytest.fixture(autouse=True)
    async def _repos(self, database_url, monkeypatch):
        self.pool = await pg.open_pool(database_url, "resolver-fold")
        self.repo = PostgresConversationRepository(self.pool)
        self.other_copy = PostgresConversationRepository(self.pool)
        await self.repo.setup()
        self.monkeypatch = monkeypatch
        yield
        await self.pool.close()

    async def test_a_batch_is_read_and_written_in_two_statements_and_no_transaction(self):
        await self.other_copy.apply_lifecycle([requested(1, "csess_a")], 1)
        statements = statements_sent(self.monkeypatch)
        await self.repo.apply_lifecycle([(2, "csess_a", lc.Opened("mac", "claude", "k1", AT),
                                          b"reply", "r-1")], 2)
        assert statements == ["SELECT", "WITH"]
        assert (await self.repo.platform("csess_a")).platform.state is lc.State.LIVE
        assert await self.repo.applied("sessions") == 2

    async def test_a_batch_read_before_another_copy_s_commit_is_folded_again_under_the_lock(self):
        await self.other_copy.apply_lifecycle([requested(1, "csess_a")], 1)

        async def other_copy_fails_it():
            await self.other_copy.apply_lifecycle(
                [(3, "csess_a", lc.OpenFailed(), None, None)], 3)
        between_read_and_write(self.monkeypatch, OFFSETS, other_copy_fails_it)
        await self.repo.apply_lifecycle(
            [(2, "csess_a", lc.Opened("mac", "claude", "k1", AT), None, None)], 2)
        # The step at 2 lies behind what the other copy applied: not applied over it.
        assert (await self.repo.platform("csess_a")).platform.state is lc.State.FAILED
        assert await self.repo.applied("sessions") == 3

    async def test_no_row_of_an_instance_forgotten_after_the_read_is_put_back(self):
        await self.other_copy.apply_lifecycle([requested(1, "csess_a")], 1)

        async def forgotten():
            await erasure.dropping(self.pool, FORGET_STATEMENTS, first=FORGET_FIRST)(
                Erasure(instance_id="inst-a", at=AT, reason="left", by="ops", entries=1,
                        through_seq=1))
        between_read_and_write(self.monkeypatch, OFFSETS, forgotten)
        await self.repo.apply_lifecycle(
            [(2, "csess_a", lc.Opened("mac", "claude", "k1", AT), None, None)], 2)
        assert await self.repo.platform("csess_a") is None
        assert await self.repo.applied("sessions") == 2

    async def _kept_live(self) -> list[str]:
        """csess_a made and opened by this copy (the offset's row made by another's first
        batch): the statements sent from then on."""
        await self.other_copy.apply_lifecycle([requested(1, "csess_z")], 1)
        await self.repo.apply_lifecycle([requested(2, "csess_a")], 2)
        statements = statements_sent(self.monkeypatch)
        await self.repo.apply_lifecycle(
            [(3, "csess_a", lc.Opened("mac", "claude", "k1", AT), b"reply", "r-1")], 3)
        return statements

    async def test_conversations_this_copy_wrote_last_are_folded_again_with_no_read(self):
        statements = await self._kept_live()
        await self.repo.apply_lifecycle([], 4)  # a batch of nothing to fold keeps them
        await self.repo.apply_lifecycle([(5, "csess_a", lc.Stopped("requested"), None, None)], 5)
        assert statements == ["WITH", "WITH", "WITH"]  # no read
        row = await self.repo.platform("csess_a")
        assert (row.platform.state, row.platform.resume_key) == (lc.State.STOPPED, "k1")
        assert row.last_reply == b"reply"
        assert await self.repo.applied("sessions") == 5

    async def test_a_change_folded_from_what_is_kept_is_written_only_where_the_row_is_as_kept(
            self):
        await self._kept_live()
        moved = lc.Relocated("pc", "claude", "k2", AT)
        await self.other_copy.apply_lifecycle([(4, "csess_a", moved, None, None)], 4)
        # Kept here: live on mac. The stop is written to the row as it is: live on pc.
        await self.repo.apply_lifecycle([(5, "csess_a", lc.Stopped("requested"), None, None)], 5)
        platform = (await self.repo.platform("csess_a")).platform
        assert (platform.state, platform.node_id, platform.resume_key) == (
            lc.State.STOPPED, "pc", "k2")

    async def test_what_was_kept_before_another_copy_wrote_is_not_kept_past_a_fresh_read(self):
        await self._kept_live()
        moved = lc.Relocated("pc", "claude", "k2", AT)
        await self.other_copy.apply_lifecycle([(4, "csess_a", moved, None, None)], 4)
        # A batch of another conversation, read and written here: the line of this copy's
        # writes starts again from that read, without csess_a as kept before it.
        await self.repo.apply_lifecycle(
            [(5, "csess_z", lc.Opened("mac", "claude", "kz", AT), None, None)], 5)
        await self.repo.apply_lifecycle([(6, "csess_a", lc.Stopped("requested"), None, None)], 6)
        platform = (await self.repo.platform("csess_a")).platform
        assert (platform.state, platform.node_id) == (lc.State.STOPPED, "pc")

    async def test_no_row_of_an_instance_forgotten_after_this_copy_kept_it_is_put_back(self):
        await self._kept_live()
        await erasure.dropping(self.pool, FORGET_STATEMENTS, first=FORGET_FIRST)(
            Erasure(instance_id="inst-a", at=AT, reason="left", by="ops", entries=1,
                    through_seq=3))
        await self.repo.apply_lifecycle([(4, "csess_a", lc.Stopped("requested"), None, None)], 4)
        assert await self.repo.platform("csess_a") is None
        assert await self.repo.applied("sessions") == 4
