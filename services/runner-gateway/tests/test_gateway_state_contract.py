"""One contract for GatewayState: the fake and Postgres."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest

from seedline_core import lifecycle as lc
from seedline_devtools.testing import between_read_and_write, statements_sent
from seedline_platform import erasure, pg
from seedline_contracts.instances import Erasure
from seedline_runner_gateway.app import FORGET_FIRST, FORGET_STATEMENTS
from seedline_runner_gateway.postgres_state import OFFSETS, PostgresGatewayState
from seedline_runner_gateway.state import AtLaunch, InMemoryGatewayState, RepoNow


def requested(seq, session, repo="apps/x"):
    return (seq, session, lc.Requested(session, "inst-a", repo, seq, "mac", "claude"))


def opened(seq, session, node="mac", at="2026-12-01T10:00:00Z"):
    return (seq, session, lc.Opened(node, "claude", None, at))


class GatewayStateContract:
    state: object

    async def test_the_fold_holds_what_is_live_where_and_the_repo_s_last_open(self):
        await self.state.apply_lifecycle([
            requested(1, "csess_a"), opened(2, "csess_a"),
            requested(3, "csess_b"), opened(4, "csess_b", node="pc"),
            (5, "csess_a", lc.Stopped("superseded")),
            requested(6, "csess_c", repo="apps/y"),
        ], 6)
        assert [h.session_id for h in await self.state.all_live()] == ["csess_b"]
        assert [h.session_id for h in await self.state.live_in_repo("inst-a", "apps/x")] == [
            "csess_b"]
        x, y = await self.state.repo_now("inst-a", "apps/x"), await self.state.repo_now(
            "inst-a", "apps/y")
        assert (x.current.session_id, x.last_open) == ("csess_b", ("pc", "claude"))
        assert (y.current.state, y.last_open) == (lc.State.OPENING, None)
        assert x.current == await self.state.held("csess_b")
        assert await self.state.repo_now("inst-b", "apps/x") == RepoNow(None, None, 6)
        assert await self.state.applied() == 6
        await self.state.apply_lifecycle([(5, "csess_b", lc.Stopped("again"))], 6)
        assert (await self.state.held("csess_b")).state is lc.State.LIVE  # already applied
        await self.state.apply_lifecycle([(7, "csess_b", lc.Stopped("requested"))], 7)
        assert await self.state.repo_now("inst-a", "apps/x") == RepoNow(None, ("pc", "claude"),
                                                                         7)

    async def test_of_the_conversations_named_those_of_the_repo_in_one_read(self):
        await self.state.apply_lifecycle([
            requested(1, "csess_a"), opened(2, "csess_a"),
            requested(3, "csess_b", repo="apps/y"), opened(4, "csess_b"),
            requested(5, "csess_c"), (6, "csess_a", lc.Stopped("requested")),
        ], 6)
        found = await self.state.of_repo("inst-a", "apps/x", {"csess_a", "csess_b", "csess_z"})
        assert [(h.session_id, h.state) for h in found] == [("csess_a", lc.State.STOPPED)]
        assert await self.state.of_repo("inst-b", "apps/x", {"csess_a"}) == []
        assert await self.state.of_repo("inst-a", "apps/x", set()) == []

    async def test_a_fold_tells_how_it_left_each_conversation_it_applied_a_step_to(self):
        folded = await self.state.apply_lifecycle([
            requested(1, "csess_a"), opened(2, "csess_a"), requested(3, "csess_b"),
            (4, "csess_z", lc.Stopped("requested")),  # of no conversation held
        ], 4)
        assert set(folded) == {"csess_a", "csess_b", "csess_z"}
        assert folded["csess_a"] == await self.state.held("csess_a")
        assert folded["csess_a"].state is lc.State.LIVE
        assert folded["csess_b"].state is lc.State.OPENING
        assert folded["csess_z"] is None
        again = await self.state.apply_lifecycle(
            [opened(2, "csess_a"), (5, "csess_b", lc.OpenFailed())], 5)
        assert set(again) == {"csess_b"}  # the step at 2 was applied before: not vouched for
        assert again["csess_b"].state is lc.State.FAILED
        assert await self.state.apply_lifecycle([], 6) == {}

    async def test_a_batch_of_requests_alone_makes_only_the_conversations_not_held(self):
        made = await self.state.apply_lifecycle([requested(1, "csess_a")], 1)  # the first ever
        assert made["csess_a"] == await self.state.held("csess_a")
        await self.state.apply_lifecycle([opened(2, "csess_a")], 2)
        made = await self.state.apply_lifecycle(
            [requested(3, "csess_a"), requested(4, "csess_b"), requested(5, "csess_b")], 5)
        live = await self.state.held("csess_a")
        assert live.state is lc.State.LIVE and live.conversation.created_seq == 1  # unchanged
        assert made.get("csess_a", live) == live  # one held may be left out, never misstated
        b = await self.state.held("csess_b")
        assert made["csess_b"] == b and (b.state, b.conversation.created_seq) == (
            lc.State.OPENING, 4)
        assert await self.state.applied() == 5
        # Delivered again, whole or in part: nothing applied twice, nothing made.
        assert await self.state.apply_lifecycle([requested(5, "csess_c")], 5) == {}
        await self.state.apply_lifecycle([requested(5, "csess_c"), requested(6, "csess_d")], 6)
        assert await self.state.held("csess_c") is None
        assert (await self.state.held("csess_d")).conversation.created_seq == 6
        assert await self.state.applied() == 6

    async def test_a_batch_with_no_step_moves_only_the_offset(self):
        assert await self.state.applied() == 0
        await self.state.apply_lifecycle([], 3)  # a fresh projection: decisions, receipts
        assert await self.state.applied() == 3
        await self.state.apply_lifecycle([requested(4, "csess_a")], 4)
        await self.state.apply_lifecycle([], 9)
        await self.state.apply_lifecycle([], 7)  # a batch redelivered late
        assert await self.state.applied() == 9
        await self.state.apply_lifecycle([opened(5, "csess_a")], 9)  # already past it
        assert (await self.state.held("csess_a")).state is lc.State.OPENING

    async def test_what_each_machine_hosts_live(self):
        await self.state.apply_lifecycle([
            requested(1, "csess_a"), opened(2, "csess_a", node="mac"),
            requested(3, "csess_b", repo="apps/y"), opened(4, "csess_b", node="pc"),
            requested(5, "csess_c", repo="apps/z"), opened(6, "csess_c", node="mac"),
            requested(7, "csess_d", repo="apps/w"),  # still opening: hosted nowhere yet
            (8, "csess_b", lc.Stopped("requested")),
        ], 8)
        assert [h.session_id for h in await self.state.live_on("mac")] == ["csess_a", "csess_c"]
        assert await self.state.live_on("pc") == []
        # Those a machine's presence lists left out: what it may have lost.
        assert [h.session_id for h in await self.state.live_on(
            "mac", besides={"csess_a", "csess_b", "csess_z"})] == ["csess_c"]
        assert await self.state.live_on("mac", besides={"csess_a", "csess_c"}) == []
        assert await self.state.hosting_nodes() == {"mac"}

    async def test_the_outcome_is_the_machine_s_final_word(self):
        await self.state.apply_lifecycle([
            requested(1, "csess_a"),
            (2, "csess_a", lc.Opened("mac", "claude", "k1", "2026-12-01T10:00:00Z", "resumed")),
        ], 2)
        assert (await self.state.held("csess_a")).conversation.outcome == "resumed"
        await self.state.apply_lifecycle([
            (3, "csess_a", lc.ResumeLost("mac", "resume_unconfirmed_briefed"))], 3)
        held = await self.state.held("csess_a")
        assert held.conversation.outcome == "resume_unconfirmed_briefed"
        assert held.state is lc.State.LIVE

    async def test_a_launch_reads_its_conversation_and_its_repo_s_newest_and_live_at_once(self):
        nothing = await self.state.at_launch("csess_a", "inst-a", "apps/x")
        assert nothing == AtLaunch(None, None, None, [])
        await self.state.apply_lifecycle([
            requested(1, "csess_a"), opened(2, "csess_a"), requested(3, "csess_b"),
            (4, "csess_b", lc.OpenFailed()), requested(5, "csess_c", repo="apps/y"),
            opened(6, "csess_c"), requested(7, "csess_d"), opened(8, "csess_d", node="pc"),
            requested(9, "csess_e"),
        ], 9)
        found = await self.state.at_launch("csess_e", "inst-a", "apps/x")
        assert found.held == await self.state.held("csess_e")
        assert found.held.state is lc.State.OPENING
        assert found.newest_requested == 9
        assert [h.session_id for h in found.live] == ["csess_a", "csess_d"]  # oldest first
        assert found.live == await self.state.live_in_repo("inst-a", "apps/x")
        await self.state.apply_lifecycle([(10, "csess_e", lc.OpenFailed())], 10)
        found = await self.state.at_launch("csess_b", "inst-a", "apps/x")
        assert found.held.state is lc.State.FAILED
        assert (found.newest_requested, found.newest_not_failed) == (9, 7)  # failed counts once
        # A conversation of another repo is no part of this one.
        elsewhere = await self.state.at_launch("csess_c", "inst-a", "apps/x")
        assert elsewhere.held.conversation.repo == "apps/y" and len(elsewhere.live) == 2
        assert await self.state.at_launch("csess_a", "inst-b", "apps/x") == AtLaunch(
            await self.state.held("csess_a"), None, None, [])

    async def test_activity_and_idleness(self):
        await self.state.apply_lifecycle([
            requested(1, "csess_a"), opened(2, "csess_a"),
            requested(3, "csess_b", repo="apps/y"), opened(4, "csess_b"),
            (5, "csess_b", lc.Stopped("requested")),
        ], 5)
        later = datetime(2026, 12, 1, 15, 0, tzinfo=timezone.utc)
        # One batch: a live one moves, a stopped one and an unknown one do not.
        await self.state.touch({"csess_a": later, "csess_b": later, "csess_unknown": later})
        await self.state.touch({"csess_a": later - timedelta(hours=1)})  # never back
        held = await self.state.held("csess_a")
        assert held.last_activity == later
        assert (await self.state.held("csess_b")).last_activity != later
        cutoff = datetime(2026, 12, 1, 16, 0, tzinfo=timezone.utc)
        assert [h.session_id for h in await self.state.idle_since(cutoff)] == ["csess_a"]
        assert await self.state.idle_since(later) == []

    async def test_machine_labels(self):
        await self.state.record_machine("mac", "Mac mini")
        await self.state.record_machine("mac", "Office Mac")
        assert await self.state.label("mac") == "Office Mac"
        assert await self.state.label("pc") is None

    async def test_one_not_woken_per_burst_and_the_same_message_again_tells_again(self):
        def at(minute):
            return datetime(2026, 12, 1, 10, minute, tzinfo=timezone.utc)

        window = timedelta(minutes=10)
        tell = self.state.tell_not_woken
        assert await tell("inst-a", "apps/x", at(0), "m-1", window)
        assert not await tell("inst-a", "apps/x", at(3), "m-2", window)  # the same burst
        # The message that told, delivered again (a restarted or second gateway copy): its
        # notice goes out again under the same id, which the notices stream keeps once.
        assert await tell("inst-a", "apps/x", at(0), "m-1", window)
        assert await tell("inst-a", "apps/y", at(3), "m-3", window)  # another repo
        assert await tell("inst-b", "apps/x", at(3), "m-4", window)  # another instance
        assert await tell("inst-a", "apps/x", at(10), "m-5", window)  # a later burst
        assert not await tell("inst-a", "apps/x", at(12), "m-6", window)


class TestInMemoryGatewayState(GatewayStateContract):
    @pytest.fixture(autouse=True)
    def _state(self):
        self.state = InMemoryGatewayState()


@pytest.mark.servers
class TestPostgresGatewayState(GatewayStateContract):
    @pytest.fixture(autouse=True)
    async def _state(self, database_url):
        # As the gateway runs it: its fold on a pool of its own (GatewayApp.keyed_pool_size).
        pool = await pg.open_pool(database_url, "gateway-state-contract")
        self.keyed = await pg.open_pool(database_url, "gateway-state-contract", 1, keyed=True)
        self.state = PostgresGatewayState(pool, self.keyed)
        await self.state.setup()
        self.database_url = database_url
        yield
        await self.keyed.close()
        await pool.close()

    async def test_the_folds_statements_are_planned_once_on_its_own_pool_only(self):
        """Postgres keeps a plan for the fold's statements on the keyed pool; the same
        statements on a service's other connections are planned with their values each
        time (pg.CONNECTION_OPTIONS), as every other query is."""
        plain = await pg.open_pool(self.database_url, "gateway-state-contract", 1)
        try:
            on_plain = PostgresGatewayState(plain)
            for n in range(20):
                for state, name in ((self.state, f"csess_k{n}"), (on_plain, f"csess_p{n}")):
                    seq = await state.applied()
                    await state.apply_lifecycle([requested(seq + 1, name)], seq + 1)
                    await state.apply_lifecycle([opened(seq + 2, name)], seq + 2)
            plans = "SELECT coalesce(sum(generic_plans), 0) FROM pg_prepared_statements"
            async with self.keyed.connection() as conn:
                generic_keyed = (await (await conn.execute(plans)).fetchone())[0]
            async with plain.connection() as conn:
                generic_plain = (await (await conn.execute(plans)).fetchone())[0]
        finally:
            await plain.close()
        assert generic_keyed > 0 and generic_plain == 0
        assert (await self.state.held("csess_p19")).state is lc.State.LIVE


@pytest.mark.servers
class TestPostgresFoldWithoutALock:
    """The Postgres fold reads a batch's rows with the offset and writes what it folded in
    a second statement, with no transaction, when the offset's row is as it read it; when
    another copy's batch, a rebuild or an erasure wrote it in between, the batch is read
    and written again under the offset's lock."""

    @pytest.fixture(autouse=True)
    async def _states(self, database_url, monkeypatch):
        self.pool = await pg.open_pool(database_url, "gateway-fold")
        self.state = PostgresGatewayState(self.pool)
        self.other_copy = PostgresGatewayState(self.pool)
        await self.state.setup()
        self.monkeypatch = monkeypatch
        yield
        await self.pool.close()

    async def test_a_batch_is_read_and_written_in_two_statements_and_no_transaction(self):
        await self.other_copy.apply_lifecycle([requested(1, "csess_a")], 1)
        statements = statements_sent(self.monkeypatch)
        folded = await self.state.apply_lifecycle([opened(2, "csess_a")], 2)
        assert statements == ["SELECT", "WITH"]
        assert folded["csess_a"] == await self.state.held("csess_a")
        assert folded["csess_a"].state is lc.State.LIVE
        assert await self.state.applied() == 2

    async def test_a_batch_read_before_another_copy_s_commit_is_folded_again_under_the_lock(self):
        await self.other_copy.apply_lifecycle([requested(1, "csess_a")], 1)

        async def other_copy_fails_it():
            await self.other_copy.apply_lifecycle([(3, "csess_a", lc.OpenFailed())], 3)
        between_read_and_write(self.monkeypatch, OFFSETS, other_copy_fails_it)
        folded = await self.state.apply_lifecycle([opened(2, "csess_a")], 2)
        # The step at 2 lies behind what the other copy applied: not applied over it.
        assert folded == {}
        assert (await self.state.held("csess_a")).state is lc.State.FAILED
        assert await self.state.applied() == 3

    async def test_no_row_of_an_instance_forgotten_after_the_read_is_put_back(self):
        await self.other_copy.apply_lifecycle([requested(1, "csess_a")], 1)

        async def forgotten():
            await erasure.dropping(self.pool, FORGET_STATEMENTS, first=FORGET_FIRST)(
                Erasure(instance_id="inst-a", at="2026-12-01T10:00:00Z", reason="left",
                        by="ops", entries=1, through_seq=1))
        between_read_and_write(self.monkeypatch, OFFSETS, forgotten)
        await self.state.apply_lifecycle([opened(2, "csess_a")], 2)
        assert await self.state.held("csess_a") is None
        assert await self.state.applied() == 2

    async def _kept_live(self) -> list[str]:
        """csess_a made and opened by this copy (the offset's row made by another's first
        batch): the statements sent from then on."""
        await self.other_copy.apply_lifecycle([requested(1, "csess_z")], 1)
        await self.state.apply_lifecycle([requested(2, "csess_a")], 2)
        statements = statements_sent(self.monkeypatch)
        folded = await self.state.apply_lifecycle([opened(3, "csess_a")], 3)
        assert folded["csess_a"].state is lc.State.LIVE
        return statements

    async def test_conversations_this_copy_wrote_last_are_folded_again_with_no_read(self):
        statements = await self._kept_live()
        await self.state.apply_lifecycle([], 4)  # a batch of nothing to fold keeps them
        stopped = await self.state.apply_lifecycle([(5, "csess_a", lc.Stopped("requested"))], 5)
        assert statements == ["WITH", "WITH", "WITH"]  # no read
        assert stopped["csess_a"] == await self.state.held("csess_a")
        assert stopped["csess_a"].state is lc.State.STOPPED
        assert await self.state.applied() == 5

    async def test_what_is_kept_is_let_go_once_another_copy_wrote_the_offset(self):
        statements = await self._kept_live()
        await self.other_copy.apply_lifecycle([(4, "csess_a", lc.Stopped("requested"))], 4)
        del statements[:]
        # As kept here it is live; the table says stopped: an open of it changes nothing.
        folded = await self.state.apply_lifecycle([opened(5, "csess_a", node="pc")], 5)
        # The offset's row not as kept: nothing moved, the row read again, the offset moved.
        assert statements == ["WITH", "SELECT", "WITH"]
        held = await self.state.held("csess_a")
        assert held.state is lc.State.STOPPED and held.node_id == "mac"
        assert folded["csess_a"] == held
        # Copies folding in turn keep little that holds: the next batches are read.
        del statements[:]
        await self.state.apply_lifecycle([(6, "csess_a", lc.Stopped("again"))], 6)
        assert statements[0] == "SELECT"


    async def test_a_change_folded_from_what_is_kept_is_written_only_where_the_row_is_as_kept(
            self):
        await self._kept_live()
        moved = lc.Relocated("pc", "claude", None, "2026-12-01T10:05:00Z")
        await self.other_copy.apply_lifecycle([(4, "csess_a", moved)], 4)
        # Kept here: live on mac. The stop is written to the row as it is: live on pc.
        folded = await self.state.apply_lifecycle([(5, "csess_a", lc.Stopped("requested"))], 5)
        held = await self.state.held("csess_a")
        assert (held.state, held.node_id) == (lc.State.STOPPED, "pc")
        assert folded["csess_a"] == held

    async def test_no_row_of_an_instance_forgotten_after_this_copy_kept_it_is_put_back(self):
        await self._kept_live()
        await erasure.dropping(self.pool, FORGET_STATEMENTS, first=FORGET_FIRST)(
            Erasure(instance_id="inst-a", at="2026-12-01T10:00:00Z", reason="left",
                    by="ops", entries=1, through_seq=3))
        await self.state.apply_lifecycle([(4, "csess_a", lc.Stopped("requested"))], 4)
        assert await self.state.held("csess_a") is None
        assert await self.state.applied() == 4

    async def test_what_was_kept_before_another_copy_wrote_is_not_kept_past_a_fresh_read(self):
        await self._kept_live()
        moved = lc.Relocated("pc", "claude", None, "2026-12-01T10:05:00Z")
        await self.other_copy.apply_lifecycle([(4, "csess_a", moved)], 4)
        # A batch of another conversation, read and written here: the line of this copy's
        # writes starts again from that read, without csess_a as kept before it.
        await self.state.apply_lifecycle([opened(5, "csess_z")], 5)
        folded = await self.state.apply_lifecycle([(6, "csess_a", lc.Stopped("requested"))], 6)
        held = await self.state.held("csess_a")
        assert (held.state, held.node_id) == (lc.State.STOPPED, "pc")
        assert folded["csess_a"] == held
