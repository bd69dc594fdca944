"""The gateway's handlers on fakes: launches, supersede, tenancy, reconciliation, turns,
wakes, idle stops and the stop API, with no servers."""

from __future__ import annotations

import asyncio
import json
from datetime import timedelta

from seedline_contracts.runner import LaunchReply
from seedline_contracts.timeline import TimelineEntry
from seedline_contracts.times import format_utc, parse_rfc3339
from seedline_core import lifecycle as lc
from seedline_devtools.fakes import FakeMsg
from seedline_runner_gateway.api import GatewayApi

AT = "2026-12-01T10:00:00Z"  # the harness's clock (conftest.py)
INSTANCE, REPO = "inst-a", "apps/x"


async def test_a_launch_records_opened_with_what_the_machine_confirmed(gw):
    gw.online("mac")
    await gw.open("csess_a")
    (opened,) = gw.events("opened")
    assert opened["reply"]["outcome"] == "briefed" and opened["reply"]["seeded"] is True
    assert opened["reply"]["brief"]["spent"] is True
    (node, request), = gw.machines.launches
    assert node == "mac" and request.seed.text == "the brief" and request.instruction
    assert (await gw.state.held("csess_a")).state is lc.State.LIVE


async def test_opening_another_conversation_on_the_repo_supersedes_the_live_one(gw):
    gw.online("mac")
    await gw.open("csess_a")
    await gw.open("csess_b")
    stopped = gw.events("stopped")
    assert [(e["session_id"], e["reason"]) for e in stopped] == [("csess_a", "superseded")]
    assert ("mac", "csess_a", "superseded") in gw.machines.stops
    assert [h.session_id for h in await gw.state.all_live()] == ["csess_b"]


async def test_an_offline_machine_fails_the_open_by_its_label(gw):
    gw.state.labels["mac"] = "Mac mini"
    await gw.open("csess_a")
    (failed,) = gw.events("open_failed")
    assert failed["error"] == {"code": "runner_offline", "message": "Your Mac mini is offline."}
    assert gw.machines.launches == []
    assert (await gw.state.held("csess_a")).state is lc.State.FAILED


async def test_a_machine_that_serves_other_instances_is_never_sent_the_launch(gw):
    gw.online("mac", instances=["inst-b"])
    await gw.open("csess_a")
    (failed,) = gw.events("open_failed")
    assert failed["error"]["code"] == "launch_refused" and "Mac mini" in failed["error"]["message"]
    assert gw.machines.launches == []


async def test_a_refused_launch_passes_on_the_machines_reason(gw):
    gw.online("mac")
    gw.machines.answer_launch = lambda node, request: LaunchReply(accepted=False, reason="no engine")
    await gw.open("csess_a")
    (failed,) = gw.events("open_failed")
    assert failed["error"]["code"] == "launch_refused" and "no engine" in failed["error"]["message"]


async def test_a_launch_lost_because_nats_was_away_blames_nats_not_the_machine(gw):
    from seedline_runner_gateway.machine_calls import NatsAway

    gw.online("mac")

    def nats_away(node, request):
        raise NatsAway("NATS was away")

    gw.machines.answer_launch = nats_away
    await gw.open("csess_a")
    (failed,) = gw.events("open_failed")
    assert failed["error"]["code"] == "unavailable"
    assert failed["error"]["message"].startswith("The launch did not reach your Mac mini "
                                                 "because the connection to NATS was lost")
    assert "did not answer" not in failed["error"]["message"]


async def test_an_open_offered_no_brief_says_why_in_its_reply(gw):
    gw.online("mac")
    await gw.open("csess_a", text=None)
    (opened,) = gw.events("opened")
    assert opened["reply"]["brief"] is None and opened["reply"]["no_brief"] == "no_entries"


async def test_a_redelivered_seed_composed_launches_nothing_twice(gw):
    gw.online("mac")
    await gw.open("csess_a")
    await gw.launcher.launch(gw.composed("csess_a"))
    assert len(gw.machines.launches) == 1 and len(gw.events("opened")) == 1


async def test_a_relocation_records_relocated_with_the_reply_and_stops_the_old_machine(gw):
    gw.online("mac")
    gw.online("pc", label="PC")
    await gw.open("csess_a")
    await gw.launcher.launch(gw.composed("csess_a", "pc", relocation=True, relocation_from="mac"))
    await gw.fold()
    (moved,) = gw.events("relocated")
    assert (moved["from_node_id"], moved["to_node_id"]) == ("mac", "pc")
    assert moved["reply"]["node_id"] == "pc" and ("mac", "csess_a", "relocated") in gw.machines.stops
    assert (await gw.state.held("csess_a")).node_id == "pc"


async def test_a_relocation_stops_the_engine_it_moves_before_the_new_machine_starts_one(gw):
    gw.online("mac")
    gw.online("pc", label="PC")
    await gw.open("csess_a")
    hosting_at_launch = []

    def answer(node, request):
        hosting_at_launch.append({n: set(s) for n, s in gw.machines.hosting.items()})
        return LaunchReply(accepted=True, resumed_conversation=False, seeded=True)

    gw.machines.answer_launch = answer
    await gw.launcher.launch(gw.composed("csess_a", "pc", relocation=True, relocation_from="mac"))
    # At no moment do two machines run the repo's conversation (CONTRACT.md 4, 1.2).
    assert hosting_at_launch == [{"mac": set()}]
    assert [s for s in gw.machines.stops if s[1] == "csess_a"] == [("mac", "csess_a", "relocated")]


async def test_a_relocation_refused_after_its_engine_was_stopped_records_the_stop(gw):
    gw.online("mac")
    gw.online("pc", label="PC")
    await gw.open("csess_a")
    gw.machines.answer_launch = lambda node, request: LaunchReply(accepted=False, reason="full")
    await gw.launcher.launch(gw.composed("csess_a", "pc", relocation=True, relocation_from="mac"))
    await gw.fold()
    (stopped,) = gw.events("stopped")
    assert (stopped["session_id"], stopped["reason"]) == ("csess_a", "relocation_failed")
    assert gw.events("open_failed")[0]["error"]["code"] == "launch_refused"
    assert (await gw.state.held("csess_a")).state is lc.State.STOPPED


async def _relocated_after_a_newer_open(gw, newer_fails: bool) -> list[str]:
    """csess_a live on mac; a newer open of its repo (csess_b), refused by its machine or
    still opening; then csess_a's move to pc, decided after both. What was recorded for a."""
    gw.online("mac")
    gw.online("pc", label="PC")
    await gw.open("csess_a")
    await gw.requested("csess_b")
    if newer_fails:
        accept = gw.machines.answer_launch
        gw.machines.answer_launch = lambda node, request: LaunchReply(accepted=False,
                                                                      reason="full")
        await gw.launcher.launch(gw.composed("csess_b", "mac"))
        await gw.fold()
        gw.machines.answer_launch = accept
    await gw.launcher.launch(gw.composed("csess_a", "pc", relocation=True,
                                         relocation_from="mac", decided_seq=10))
    await gw.fold()
    return [e["type"] for e in map(json.loads, (p for _, p, _ in gw.publisher.messages))
            if e.get("session_id") == "csess_a" and e["type"] in ("relocated", "open_failed")]


async def test_a_move_after_a_newer_open_of_the_repo_failed_goes_ahead(gw):
    """The newer open never runs: it does not stand in the move's way (model-based test,
    seed 1627730389, refused as superseded)."""
    assert await _relocated_after_a_newer_open(gw, newer_fails=True) == ["relocated"]
    assert (await gw.state.held("csess_a")).node_id == "pc"


async def test_a_move_after_a_newer_open_of_the_repo_that_may_still_open_is_superseded(gw):
    """Both would run once the newer one opens: the newer one is the repo's."""
    assert await _relocated_after_a_newer_open(gw, newer_fails=False) == ["open_failed"]
    (failed,) = [e for e in gw.events("open_failed") if e["session_id"] == "csess_a"]
    assert failed["error"]["code"] == "superseded"


def reads_of_live_on(gw) -> list[str]:
    """The machines the gateway reads its live conversations of, from now on, in order."""
    reads: list[str] = []
    live_on = gw.state.live_on

    async def counted(node_id, besides=()):
        reads.append(node_id)
        return await live_on(node_id, besides)

    gw.state.live_on = counted
    return reads


async def test_two_presence_puts_after_the_launch_without_it_stop_it_as_restarted(gw):
    gw.online("mac", revision=5)
    await gw.open("csess_a")
    for revision in (5, 6):
        await gw.reconciler.seen("mac", gw.presence.put("mac", "Mac mini", [], revision))
    await gw.fold()
    assert gw.events("stopped") == []  # revision 5 was before the launch was accepted
    await gw.reconciler.seen("mac", gw.presence.put("mac", "Mac mini", [], 7))
    await gw.fold()
    (stopped,) = gw.events("stopped")
    assert stopped["reason"] == "runner_restarted"
    (_, notice), = gw.notifier.sent
    assert notice.session_id == "csess_a" and "restarted" in notice.text
    assert await gw.state.all_live() == []


async def test_a_put_repeating_the_last_is_read_against_the_state_only_after_a_launch_there(gw):
    gw.online("mac", revision=5)
    gw.online("pc", label="PC", revision=5)
    reads = reads_of_live_on(gw)
    for revision in (6, 7):
        await gw.reconciler.seen("mac", gw.presence.put("mac", "Mac mini", [], revision))
    assert reads == ["mac"]  # the second put says what the first said
    await gw.open("csess_p", node_id="pc")  # live on another machine: no news for this one
    await gw.reconciler.seen("mac", gw.presence.put("mac", "Mac mini", [], 8))
    assert reads == ["mac"]
    await gw.open("csess_m")  # live here now: a repeated put is news
    await gw.reconciler.seen("mac", gw.presence.put("mac", "Mac mini", [], 9))
    assert reads == ["mac", "mac"]


async def test_a_put_reads_only_the_conversations_it_leaves_out(gw):
    """A machine hosting many conversations is not read whole at every put: the read is
    of those held live there that the put does not list, and stops them as before."""
    gw.online("mac", revision=5)
    for session_id in ("csess_a", "csess_b", "csess_c"):
        await gw.open(session_id, repo=f"apps/{session_id}")
    live_on, rows = gw.state.live_on, []

    async def read(node_id, besides=()):
        found = await live_on(node_id, besides)
        rows.extend(h.session_id for h in found)
        return found

    gw.state.live_on = read
    everything = ["csess_a", "csess_b", "csess_c"]
    await gw.reconciler.seen("mac", gw.presence.put("mac", "Mac mini", everything, 9))
    assert rows == []
    for revision in (10, 11):
        await gw.reconciler.seen("mac", gw.presence.put("mac", "Mac mini", everything[:2],
                                                        revision))
    await gw.fold()
    assert rows == ["csess_c", "csess_c"]
    (stopped,) = gw.events("stopped")
    assert (stopped["session_id"], stopped["reason"]) == ("csess_c", "runner_restarted")


async def test_the_reconciler_keeps_nothing_of_a_conversation_done_with(gw):
    """What it keeps per conversation (the put its launch was accepted at) goes at the
    machine's next put once the conversation is neither listed nor live there, and all of
    a machine's with the machine: a gateway's memory does not grow with every launch."""
    gw.online("mac", revision=5)
    await gw.open("csess_a")
    await gw.reconciler.seen("mac", gw.presence.put("mac", "Mac mini", ["csess_a"], 6))
    assert set(gw.reconciler._accepted["mac"]) == {"csess_a"}
    await gw.open("csess_b")  # supersedes csess_a on the same repo
    await gw.reconciler.seen("mac", gw.presence.put("mac", "Mac mini", ["csess_b"], 8))
    assert set(gw.reconciler._accepted["mac"]) == {"csess_b"}
    assert [e["session_id"] for e in gw.events("stopped")] == ["csess_a"]  # as superseded
    await gw.reconciler.gone("mac")
    assert "mac" not in gw.reconciler._accepted


async def test_a_launch_goes_out_while_a_machine_seen_before_has_no_presence_left(gw):
    gw.online("mac")
    gw.online("pc", label="PC")
    read = gw.presence.get

    async def expired(node_id):  # its key gone past its TTL, still among the machines seen
        return None if node_id == "pc" else await read(node_id)

    gw.presence.get = expired
    await gw.open("csess_a")
    assert (await gw.state.held("csess_a")).state is lc.State.LIVE


async def test_a_wait_on_one_conversation_wakes_at_its_fold_not_at_anothers(gw):
    gw.online("mac")
    fold = gw.parts.fold
    reads = gw.count_reads()
    with fold.watching("csess_a", timeout=30.0) as watch:
        assert await watch.now() is None and reads == ["csess_a"]
        await gw.requested("csess_a")  # folded after the watch began, before the wait
        seen = await asyncio.wait_for(watch.next(), 1.0)  # not missed
        assert seen.state is lc.State.OPENING
        assert reads == ["csess_a"]  # handed over by the fold, not read again
    with fold.watching("csess_a", timeout=30.0) as watch, \
            fold.watching("csess_a", timeout=30.0) as beside:
        waiting = asyncio.create_task(watch.next())
        await gw.requested("csess_c")  # another conversation's event, folded
        await asyncio.sleep(0.01)
        assert not waiting.done()
        await gw.launcher.launch(gw.composed("csess_a"))  # its launch: every watch is told
        await gw.fold()
        assert (await asyncio.wait_for(waiting, 1.0)).state is lc.State.LIVE
        assert (await asyncio.wait_for(beside.next(), 1.0)).state is lc.State.LIVE
    # Folded by another copy, it is never told: it reads the row after its timeout.
    with fold.watching("csess_z", timeout=0.05) as watch:
        assert await asyncio.wait_for(watch.next(), 1.0) is None
    assert reads[-1] == "csess_z"
    assert fold._watches == {}  # nothing left behind


async def test_a_repeated_request_of_a_conversation_is_folded_as_an_offset_move_alone(gw):
    # A wake records wake_requested, then the decision's open_requested: the second
    # changes nothing, and costs the fold no transaction.
    applied = []
    apply = gw.state.apply_lifecycle

    async def recorded(steps, last_seq):
        applied.append([step.session_id for step in steps])
        return await apply(steps, last_seq)

    gw.state.apply_lifecycle = recorded
    await gw.requested("csess_a")
    await gw.requested("csess_a")
    assert applied == [["csess_a"], []]
    assert (await gw.state.held("csess_a")).state is lc.State.OPENING


async def test_puts_made_before_the_launch_and_seen_after_it_stop_nothing(gw):
    # Under load the watch lags: the machine had put revisions 6 and 7 (both without the
    # conversation, made before it took the launch) when the launch was accepted.
    gw.online("mac", revision=5)
    gw.presence.stored["mac"] = 7
    await gw.open("csess_a")
    for revision in (6, 7):
        await gw.reconciler.seen("mac", gw.presence.put("mac", "Mac mini", [], revision))
    await gw.fold()
    assert gw.events("stopped") == [] and gw.notifier.sent == []
    assert [h.session_id for h in await gw.state.all_live()] == ["csess_a"]


async def test_a_protocol_1_machine_is_never_reconciled(gw):
    gw.online("mac", revision=1)
    await gw.open("csess_a")
    for revision in range(2, 6):
        await gw.reconciler.seen("mac", gw.presence.put("mac", "Mac mini", None, revision))
    assert gw.events("stopped") == []


async def test_a_machine_that_is_gone_ends_what_it_hosted_and_is_still_asked_to_stop(gw):
    gw.online("mac")
    gw.online("pc", label="PC")
    await gw.open("csess_a")
    await gw.reconciler.gone("mac")
    await gw.fold()
    (stopped,) = gw.events("stopped")
    assert stopped["reason"] == "runner_offline"
    assert ("mac", "csess_a", "runner_offline") in gw.machines.stops
    (instance, notice), = gw.notifier.sent
    assert instance == INSTANCE and notice.text.startswith("Your Mac mini is offline.")


def person_message(seq: int, content: str, at: str = AT, entry_id: str | None = None,
                   repo: str = REPO) -> FakeMsg:
    body = {"entry_id": entry_id or f"e-{seq}", "instance_id": INSTANCE, "repo": repo,
            "session_id": "csess_any", "kind": "chat_user", "content": content, "at": at,
            "engine": None, "truncated_from": None}
    # It reached the timeline now: only its own `at` says whether it is fresh.
    return FakeMsg(json.dumps(body).encode(), stream_seq=seq, timestamp=parse_rfc3339(AT))


async def handle(gw, msg: FakeMsg) -> None:
    await gw.person(msg)


async def test_a_message_reaches_the_live_conversation_as_a_turn(gw):
    gw.online("mac")
    await gw.open("csess_a")
    await handle(gw, person_message(10, "next step"))
    (node, turn), = gw.machines.turns
    assert (node, turn.session_id, turn.seq, turn.content) == ("mac", "csess_a", 10, "next step")
    assert gw.events("wake_requested") == []


async def test_a_machine_that_no_longer_hosts_it_stops_it_and_the_message_wakes_a_new_one(gw):
    gw.online("mac")
    await gw.open("csess_a")
    gw.machines.hosting["mac"].clear()  # the runner restarted
    await handle(gw, person_message(10, "next step"))
    assert [e["reason"] for e in gw.events("stopped")] == ["runner_restarted"]
    # Told, as when its presence says so (fault harness, seed 16).
    assert gw.notifier.kinds() == ["runner_restarted"]
    (wake,) = gw.events("wake_requested")
    assert (wake["node_id"], wake["engine"], wake["wake_seq"]) == ("mac", "scripted", 10)
    assert wake["session_id"] == "csess_woken" and wake["request_id"] == "wake:e-10"


def reads_of_repo_now(gw, stale=None) -> list[int]:
    """The offsets each GatewayState.repo_now found, from now on; `stale` (a RepoNow) is what
    the first one finds instead, as a read made before a sibling copy's fold committed."""
    reads, read = [], gw.state.repo_now

    async def counted(instance_id, repo):
        found = stale if stale is not None and not reads else await read(instance_id, repo)
        reads.append(found.applied)
        return found

    gw.state.repo_now = counted
    return reads


async def test_a_wake_reads_its_repo_once_when_the_read_holds_all_the_fold_took(gw):
    gw.online("mac")
    await gw.open("csess_a")
    await gw.stopper.end(await gw.state.held("csess_a"), "requested")
    await gw.fold()
    reads = reads_of_repo_now(gw)
    await handle(gw, person_message(10, "next step"))
    (wake,) = gw.events("wake_requested")
    assert wake["node_id"] == "mac" and len(reads) == 1


async def test_a_read_older_than_what_the_fold_took_is_read_again_before_a_wake(gw):
    """The fold's consumer has nothing left, but its last event is past the offset the read
    found (a sibling copy folded it after the read): read again, and the message is a turn
    of the conversation that event made live, not a wake."""
    from seedline_runner_gateway.state import RepoNow

    gw.online("mac")
    await gw.open("csess_a")
    reads = reads_of_repo_now(gw, stale=RepoNow(None, None, applied=1))
    await handle(gw, person_message(10, "next step"))
    assert reads == [1, await gw.state.applied()] and reads[1] > 1
    assert gw.events("wake_requested") == [] and gw.notifier.sent == []
    (node, turn), = gw.machines.turns
    assert (node, turn.session_id) == ("mac", "csess_a")


async def a_read_finds_the_fold_behind(gw) -> None:
    """A message to a stopped repo read while another repo's stop is recorded but not folded:
    the read is made again once the fold caught up, and the message wakes the repo."""
    await gw.open("csess_x", repo="apps/x")
    await gw.stopper.end(await gw.state.held("csess_x"), "requested")
    await gw.fold()
    await gw.open("csess_other", repo="apps/other")
    await gw.stopper.end(await gw.state.held("csess_other"), "requested")  # not folded
    reads = reads_of_repo_now(gw)
    await handle(gw, person_message(10, "first", repo="apps/x"))
    assert len(reads) == 2 and len(gw.events("wake_requested")) == 1


async def test_after_a_read_found_the_fold_behind_the_next_is_made_once_it_caught_up(gw):
    gw.online("mac")
    await gw.open("csess_y", repo="apps/y")
    await gw.stopper.end(await gw.state.held("csess_y"), "requested")
    await gw.fold()
    await a_read_finds_the_fold_behind(gw)  # its wake_requested is not folded yet
    reads = reads_of_repo_now(gw)
    await handle(gw, person_message(11, "second", repo="apps/y"))
    assert reads == [await gw.state.applied()]  # one read, after the wake was folded
    assert [(w["repo"], w["node_id"]) for w in gw.events("wake_requested")] == [
        ("apps/x", "mac"), ("apps/y", "mac")]


async def test_a_read_made_after_the_fold_caught_up_finds_a_stop_it_had_not_folded(gw):
    """The conversation the message is for was stopped and its stop not folded: the one read
    is made once the fold holds it, so the message wakes the repo rather than going as a
    turn to a machine that no longer runs it."""
    gw.online("mac")
    await a_read_finds_the_fold_behind(gw)
    await gw.fold()
    await gw.open("csess_y", repo="apps/y")
    await gw.stopper.end(await gw.state.held("csess_y"), "requested")  # not folded
    reads = reads_of_repo_now(gw)
    await handle(gw, person_message(11, "second", repo="apps/y"))
    assert len(reads) == 1 and gw.machines.turns == [] and gw.notifier.sent == []
    assert [w["repo"] for w in gw.events("wake_requested")] == ["apps/x", "apps/y"]


async def test_a_message_for_a_repo_never_opened_wakes_nothing_and_says_so(gw):
    await handle(gw, person_message(10, "hello"))
    assert gw.events("wake_requested") == []
    (_, notice), = gw.notifier.sent
    assert type(notice).__struct_config__.tag == "not_woken" and REPO in notice.text


async def test_a_backfilled_message_wakes_nothing(gw):
    gw.online("mac")
    await gw.open("csess_a")
    await gw.stopper.end(await gw.state.held("csess_a"), "requested")
    await gw.fold()
    await handle(gw, person_message(10, "old", at="2026-01-01T00:00:00Z"))
    assert gw.events("wake_requested") == [] and gw.notifier.sent == []


async def test_an_idle_conversation_is_reaped_and_the_person_told(gw):
    gw.online("mac")
    await gw.open("csess_a")
    await gw.parts.reaper.stop_idle(now=parse_rfc3339(AT) + timedelta(hours=7))
    await gw.fold()
    (reaped,) = gw.events("reaped")
    assert reaped["idle_seconds"] == 7 * 3600
    (_, notice), = gw.notifier.sent
    assert "7 hours" in notice.text and "next message" in notice.text


async def test_an_engines_output_is_activity_read_from_the_timeline_when_the_sweep_looks(gw):
    """The gateway takes only a person's messages; what an engine wrote is activity too,
    read from the timeline's projection by the idle sweep and the list."""
    gw.online("mac")
    await gw.open("csess_a")
    await gw.open("csess_b", repo="apps/y")
    written = parse_rfc3339(AT) + timedelta(hours=5)
    gw.timeline.apply(1, TimelineEntry("e-1", INSTANCE, REPO, "csess_a", "chat_assistant",
                                       "done", format_utc(written), "scripted", None))
    # An entry naming csess_b in a repo it does not live in is not its activity.
    gw.timeline.apply(2, TimelineEntry("e-2", INSTANCE, REPO, "csess_b", "chat_assistant",
                                       "done", format_utc(written), "scripted", None))
    listed = (await gw.ask(GatewayApi.list_live, b"{}"))["conversations"]
    assert {c["session_id"]: c["last_activity_at"] for c in listed} == {
        "csess_a": format_utc(written), "csess_b": AT}
    await gw.parts.reaper.stop_idle(now=parse_rfc3339(AT) + timedelta(hours=7))
    await gw.fold()
    assert [e["session_id"] for e in gw.events("reaped")] == ["csess_b"]
    await gw.parts.reaper.stop_idle(now=written + timedelta(hours=7))
    await gw.fold()
    assert [(e["session_id"], e["idle_seconds"]) for e in gw.events("reaped")] == [
        ("csess_b", 7 * 3600), ("csess_a", 7 * 3600)]


async def test_stop_says_whether_it_was_live_and_engine_bound_only_from_its_machine(
        gw, monkeypatch):
    # A word from a machine the conversation is not on is ignored once the wait for a
    # relocation to it is over (api.SETTLE_SECONDS): short here, the same rule.
    monkeypatch.setattr("seedline_runner_gateway.api.SETTLE_SECONDS", 0.1)
    gw.online("mac")
    await gw.open("csess_a")
    stop = {"session_id": "csess_a", "reason": "done"}
    assert await gw.ask(GatewayApi.stop, stop) == {"stopped": True, "ok": True}
    assert await gw.ask(GatewayApi.stop, stop) == {"stopped": False, "ok": True}
    unknown = {"session_id": "csess_nobody"}
    assert (await gw.ask(GatewayApi.stop, unknown))["error"]["code"] == "not_found"
    await gw.open("csess_b")
    await gw.report("pc", {"type": "engine_bound", "session_id": "csess_b", "at": AT,
                           "engine_session_id": "stolen"})
    assert gw.events("engine_bound") == []


async def test_a_stop_asked_before_this_copy_folded_the_open_stops_what_it_started(
        gw, monkeypatch):
    # The open's reply follows `opened` into the stream; a fold more than its catch-up
    # behind still held the conversation opening, and the stop answered `stopped: false`
    # while the conversation ran on (a storm of opens each stopped at once).
    monkeypatch.setattr("seedline_runner_gateway.fold.CATCH_UP_SECONDS", 0.05)
    gw.online("mac")
    await gw.launched_unfolded("csess_a")
    assert (await gw.state.held("csess_a")).state is lc.State.OPENING
    gave_up = asyncio.Event()
    catch_up = gw.parts.fold.caught_up

    async def caught_up(upto=None):
        reached = await catch_up(upto)
        gave_up.set()
        return reached

    gw.api._caught_up = caught_up
    stop = asyncio.create_task(gw.ask(GatewayApi.stop, {"session_id": "csess_a"}))
    await asyncio.wait_for(gave_up.wait(), 10)
    await asyncio.sleep(0.1)
    assert not stop.done()
    gw.lagging = False
    await gw.fold()
    assert await stop == {"stopped": True, "ok": True}
    assert ("mac", "csess_a", "requested") in gw.machines.stops
    await gw.fold()
    assert await gw.state.all_live() == []


async def test_a_stop_the_fold_cannot_answer_in_time_says_so_and_never_stopped_false(
        gw, monkeypatch):
    monkeypatch.setattr("seedline_runner_gateway.fold.CATCH_UP_SECONDS", 0.05)
    monkeypatch.setattr("seedline_runner_gateway.api.STOP_WAIT_SECONDS", 0.3)
    gw.online("mac")
    await gw.requested("csess_a")  # decided, and its launch not yet confirmed
    reply = await gw.ask(GatewayApi.stop, {"session_id": "csess_a"})
    assert reply["error"]["code"] == "unavailable"
    assert "still opening" in reply["error"]["message"]
    gw.lagging = True
    await gw.requested("csess_b")
    reply = await gw.ask(GatewayApi.stop, {"session_id": "csess_b"})
    assert reply["error"]["code"] == "unavailable"  # not yet folded: not `not_found`
    assert gw.machines.stops == [] and gw.events("stopped") == []


async def test_a_report_on_a_launch_a_lagging_fold_has_not_folded_is_kept_once_it_catches_up(
        gw, monkeypatch):
    # The fold here moves only when asked to catch up: past the settle's two seconds, the
    # report waits for it to hold what is recorded and looks again. It was dropped
    # (`engine_bound_ignored`), and for an engine whose id comes after its launch reply
    # that is the only record of the id a later resume needs.
    monkeypatch.setattr("seedline_runner_gateway.api.SETTLE_SECONDS", 0.1)
    gw.online("mac")
    await gw.launched_unfolded("csess_a")
    reported = asyncio.create_task(gw.report("mac", {
        "type": "engine_bound", "session_id": "csess_a", "at": AT,
        "engine_session_id": "key-after-launch"}))
    await asyncio.sleep(0)
    gw.lagging = False
    await reported
    (bound,) = gw.events("engine_bound")
    assert (bound["engine_session_id"], bound["node_id"]) == ("key-after-launch", "mac")


async def test_engine_bound_from_the_machine_a_relocation_launched_on_waits_for_the_relocation(gw):
    # The machine reports right after its launch reply, before `relocated` is recorded:
    # the report is kept, not ignored as coming from a machine the conversation is not on.
    gw.online("mac")
    gw.online("pc", label="PC")
    await gw.open("csess_a")
    reported = asyncio.create_task(gw.report("pc", {
        "type": "engine_bound", "session_id": "csess_a", "at": AT,
        "engine_session_id": "key-on-pc"}))
    await asyncio.sleep(0.1)
    await gw.launcher.launch(gw.composed("csess_a", "pc", relocation=True, relocation_from="mac"))
    await gw.fold()
    await reported
    (bound,) = [e for e in gw.events("engine_bound") if e["node_id"] == "pc"]
    assert bound["engine_session_id"] == "key-on-pc"


async def test_what_a_machine_reports_together_on_a_launch_waits_for_its_fold_with_no_read(gw):
    # engine_bound and brief_given come right after the launch reply, before `relocated`
    # is folded: both wait for it, together, and the fold hands it over: no read at all.
    gw.online("mac")
    gw.online("pc", label="PC")
    await gw.open("csess_a")
    reads = gw.count_reads()
    reported = [asyncio.create_task(gw.report("pc", body)) for body in (
        {"type": "engine_bound", "session_id": "csess_a", "at": AT,
         "engine_session_id": "key-on-pc"},
        {"type": "brief_given", "session_id": "csess_a", "at": AT, "brief_sha256": "ab" * 32},
    )]
    await asyncio.sleep(0.1)
    assert not any(task.done() for task in reported)
    await gw.launcher.launch(gw.composed("csess_a", "pc", relocation=True, relocation_from="mac"))
    await gw.fold()
    await asyncio.gather(*reported)
    assert reads == []  # the fold handed the relocated conversation over
    assert [e["node_id"] for e in gw.events("engine_bound")][-1:] == ["pc"]
    assert [e["node_id"] for e in gw.events("brief_given")] == ["pc"]
    assert gw.api._settling == {}


async def test_a_conversation_the_gateway_just_stopped_is_not_reported_lost_by_later_puts(gw):
    # Superseded: its stop is recorded, and the machine's next puts leave it out before the
    # gateway has folded that stop. It is not stopped again, and nobody is told it was lost.
    gw.online("mac", revision=1)
    await gw.open("csess_a")
    await gw.stopper.end(await gw.state.held("csess_a"), "superseded")
    for revision in (2, 3):
        await gw.reconciler.seen("mac", gw.presence.put("mac", "Mac mini", [], revision))
    assert gw.notifier.sent == []
    assert [e["reason"] for e in gw.events("stopped")] == ["superseded"]


async def test_a_resume_launch_carries_what_the_engine_record_must_hold(gw):
    from msgspec.structs import replace

    from seedline_contracts.runner import ResumeExpect
    from seedline_contracts.sessions import Continuity

    gw.online("mac")
    await gw.requested("csess_r")
    composed = gw.composed("csess_r")
    expect = ResumeExpect(seq=41, kind="chat_assistant", excerpt="Castling added")
    plan = replace(composed.plan, resume_key="claude-k1", resume_expect=expect,
                   continuity=Continuity("resume", "csess_a", "resume", "touched 1 hour ago"))
    await gw.launcher.launch(replace(composed, plan=plan))
    (_, request), = gw.machines.launches
    assert request.resume.engine_session_id == "claude-k1" and request.resume.expect == expect


async def test_a_resumed_engine_s_receipt_says_the_brief_was_not_spent(gw):
    from seedline_contracts.runner import LaunchReply

    gw.online("mac")
    gw.machines.answer_launch = lambda node, request: LaunchReply(
        accepted=True, resumed_conversation=True, seeded=False, engine_session_id="k1")
    await gw.open("csess_a")
    (opened,) = gw.events("opened")
    assert opened["reply"]["outcome"] == "resumed"
    assert opened["reply"]["brief"]["spent"] is False and opened["reply"]["seeded"] is False


async def test_a_resume_lost_is_recorded_corrects_every_read_and_tells_the_person(
        gw, monkeypatch):
    # A word from a machine the conversation is not on is ignored once the wait for a
    # relocation to it is over (api.SETTLE_SECONDS): short here, the same rule.
    monkeypatch.setattr("seedline_runner_gateway.api.SETTLE_SECONDS", 0.1)
    from msgspec.structs import replace

    from seedline_contracts.sessions import Continuity
    from seedline_core.notices import wording_violations

    gw.online("mac")
    gw.machines.answer_launch = lambda node, request: LaunchReply(
        accepted=True, resumed_conversation=True, seeded=False, engine_session_id="k1")
    await gw.requested("csess_a")
    composed = gw.composed("csess_a")
    plan = replace(composed.plan, resume_key="k0",
                   continuity=Continuity("resume", "csess_0", "resume", "touched 1 hour ago"))
    await gw.launcher.launch(replace(composed, plan=plan))
    await gw.fold()
    lost = {"type": "resume_lost", "session_id": "csess_a", "at": AT,
            "reason": "No conversation found"}
    await gw.report("pc", lost)  # not the machine it runs on: ignored
    assert gw.events("resume_lost") == []
    await gw.report("mac", lost)
    await gw.fold()
    await gw.report("mac", lost)  # told twice, recorded once
    await gw.fold()
    (recorded,) = gw.events("resume_lost")
    reply = recorded["reply"]
    assert (reply["outcome"], reply["resumed"], reply["seeded"]) == (
        "resume_unconfirmed_briefed", False, True)
    assert reply["brief"]["spent"] is True and "was given a brief" in reply["notice"]["chat"]
    listed = (await gw.ask(GatewayApi.list_live, b"{}"))["conversations"]
    assert [(c["session_id"], c["outcome"]) for c in listed] == [
        ("csess_a", "resume_unconfirmed_briefed")]
    (instance, notice), = gw.notifier.sent
    assert instance == INSTANCE and notice.session_id == "csess_a"
    assert "could not continue its earlier conversation" in notice.text
    assert wording_violations(notice.text) == []


async def test_a_burst_to_a_repo_never_opened_gives_one_not_woken_notice(gw):
    f = gw
    for seq in range(10, 60):
        await handle(f, person_message(seq, f"message {seq}"))
    # Past the window, the people are told again (a message that arrived then).
    later = person_message(60, "later", at="2026-12-01T10:30:00Z")
    await handle(f, FakeMsg(later.data, stream_seq=60,
                            timestamp=parse_rfc3339("2026-12-01T10:30:00Z")))
    assert [type(n).__struct_config__.tag for _, n in gw.notifier.sent] == ["not_woken"] * 2


async def test_a_wake_on_an_offline_machine_says_the_message_is_kept_and_what_comes_next(gw):
    from seedline_core.notices import wording_violations

    gw.state.labels["mac"] = "Mac mini"
    await gw.open("csess_w", wake_seq=10)
    (_, notice), = gw.notifier.sent
    assert type(notice).__struct_config__.tag == "runner_offline"
    assert notice.text.startswith("Your Mac mini is offline.")
    assert "kept" in notice.text and "next message" in notice.text
    assert not wording_violations(notice.text)


# -- one live engine per repo (CONTRACT.md 4, 1.2) ----------------------------------------


async def test_a_launch_decided_before_the_repos_newest_open_is_never_sent(gw):
    gw.online("mac")
    await gw.requested("csess_a")  # seq 1
    await gw.requested("csess_b")  # seq 2: opened after a's decision
    await gw.launcher.launch(gw.composed("csess_a", decided_seq=1))
    await gw.fold()
    (failed,) = gw.events("open_failed")
    assert failed["session_id"] == "csess_a" and failed["error"]["code"] == "superseded"
    assert "later open" in failed["error"]["message"]
    assert gw.machines.launches == []
    await gw.launcher.launch(gw.composed("csess_b", decided_seq=3))
    (node, request), = gw.machines.launches
    assert request.session_id == "csess_b" and request.fence == 3


async def test_what_a_launch_replaces_is_stopped_before_the_launch_reaches_the_machine(gw):
    gw.online("mac")
    hosted_at_launch = []

    def answer(node, request):
        hosted_at_launch.append(set(gw.machines.hosting.get(node, set())))
        return LaunchReply(accepted=True, resumed_conversation=False, seeded=True)

    gw.machines.answer_launch = answer
    await gw.open("csess_a", decided_seq=2)
    await gw.requested("csess_b")
    await gw.launcher.launch(gw.composed("csess_b", decided_seq=5))
    await gw.fold()
    assert hosted_at_launch == [set(), set()]  # a had ended before b's launch was sent
    stopped = gw.events("stopped")
    assert [(e["session_id"], e["reason"]) for e in stopped] == [("csess_a", "superseded")]
    assert gw.machines.stops == [("mac", "csess_a", "superseded")]  # told once
    assert [h.session_id for h in await gw.state.all_live()] == ["csess_b"]


async def test_a_launch_the_machine_cannot_take_leaves_the_live_conversation_alone(gw):
    gw.online("mac")
    await gw.open("csess_a", decided_seq=2)
    await gw.requested("csess_b")
    refused = gw.composed("csess_b", decided_seq=5)
    refused.plan.engine = "not-offered"
    gw.machines.answer_launch = lambda node, request: LaunchReply(
        accepted=False, reason="no engine called not-offered")
    await gw.launcher.launch(refused)
    await gw.fold()
    assert gw.events("stopped") == []
    assert [h.session_id for h in await gw.state.all_live()] == ["csess_a"]


async def test_a_stop_two_copies_record_at_once_tells_the_machine_and_the_person_once(gw):
    gw.online("mac")
    await gw.open("csess_a")
    held = await gw.state.held("csess_a")
    notice = lambda at: ("told", at)  # noqa: E731 - what the person would be sent
    for _ in range(2):  # both copies saw the machine go, before either's stop was folded
        await gw.stopper.end(held, "runner_offline", notice=notice)
    assert len(gw.events("stopped")) == 1
    assert gw.machines.stops == [("mac", "csess_a", "runner_offline")]
    assert len(gw.notifier.sent) == 1


async def test_a_put_that_repeats_the_last_one_reads_nothing_until_something_is_folded(gw):
    gw.online("mac", revision=5)
    await gw.open("csess_a")
    reads = reads_of_live_on(gw)
    for revision in (6, 7, 8):
        await gw.reconciler.seen("mac", gw.presence.put("mac", "Mac mini", ["csess_a"], revision))
    assert reads == ["mac"]  # the machine hosts what the gateway holds: the rest repeat it
    await gw.reconciler.seen("mac", gw.presence.put("mac", "Mac mini", [], 9))
    await gw.reconciler.seen("mac", gw.presence.put("mac", "Mac mini", [], 10))
    await gw.fold()
    (stopped,) = gw.events("stopped")  # a put that differs is held against the state again
    assert stopped["reason"] == "runner_restarted" and reads == ["mac"] * 3


async def test_a_put_listing_what_the_fold_made_live_there_since_it_last_agreed_reads_nothing(gw):
    """In a storm each launch's put lists one more: taken without a read while it lists
    all it listed and all the fold made live there since; one leaving out either is read."""
    gw.online("mac", revision=5)
    reads = reads_of_live_on(gw)
    await gw.reconciler.seen("mac", gw.presence.put("mac", "Mac mini", [], 6))
    listed: list[str] = []
    for revision, session_id in enumerate(("csess_a", "csess_b", "csess_c"), start=7):
        await gw.open(session_id, repo=f"apps/{session_id}")
        listed.append(session_id)
        await gw.reconciler.seen("mac", gw.presence.put("mac", "Mac mini", listed, revision))
    assert reads == ["mac"]
    await gw.open("csess_d", repo="apps/d")  # made live here, and the puts leave it out
    for revision in (10, 11, 12):
        await gw.reconciler.seen("mac", gw.presence.put("mac", "Mac mini", listed, revision))
    await gw.fold()
    assert reads == ["mac"] * 4
    (stopped,) = gw.events("stopped")
    assert (stopped["session_id"], stopped["reason"]) == ("csess_d", "runner_restarted")
    # A put leaving out one it listed before is read, though the fold made nothing live.
    await gw.reconciler.seen("mac", gw.presence.put("mac", "Mac mini", listed, 13))
    assert reads == ["mac"] * 5  # it agreed again (csess_d is stopped)
    await gw.reconciler.seen("mac", gw.presence.put("mac", "Mac mini", listed[1:], 14))
    assert reads == ["mac"] * 6


# One live engine per repo across a network that fails (fault harness, seed 7) ------------


async def test_a_relocation_waits_for_a_machine_cut_off_while_it_may_run_the_conversation(gw):
    gw.online("mac", live=["csess_a"])
    gw.online("pc", label="PC")
    await gw.open("csess_a")
    gw.machines.online.discard("mac")  # cut off: it answers nothing, its presence stays
    await gw.launcher.launch(gw.composed("csess_a", "pc", relocation=True, relocation_from="mac"))
    await gw.fold()
    (failed,) = gw.events("open_failed")
    assert failed["error"]["code"] == "runner_unreachable"
    assert failed["error"]["message"].startswith("Your Mac mini may still run this repo's")
    assert [node for node, _ in gw.machines.launches] == ["mac"]  # never sent to the PC


async def test_an_open_elsewhere_waits_when_the_machine_it_replaces_did_not_answer_the_stop(gw):
    gw.online("mac", live=["csess_a"])
    gw.online("pc", label="PC")
    await gw.open("csess_a", decided_seq=2)
    gw.machines.online.discard("mac")
    await gw.requested("csess_b", "pc")
    await gw.launcher.launch(gw.composed("csess_b", "pc", decided_seq=5))
    await gw.fold()
    assert gw.events("open_failed")[0]["error"]["code"] == "runner_unreachable"
    assert [node for node, _ in gw.machines.launches] == ["mac"]
    # Once that machine's presence is gone (it counts as offline: it has ended its engines
    # by then), the repo can move.
    del gw.presence.machines["mac"]
    await gw.requested("csess_c", "pc")
    await gw.launcher.launch(gw.composed("csess_c", "pc", decided_seq=9))
    await gw.fold()
    assert [node for node, _ in gw.machines.launches] == ["mac", "pc"]


async def test_a_machine_that_lists_one_of_the_repos_conversations_stops_it_before_a_launch_elsewhere(
    gw,
):
    gw.online("mac")
    gw.online("pc", label="PC")
    await gw.open("csess_a")
    await gw.launcher.launch(gw.composed("csess_a", "pc", relocation=True, relocation_from="mac"))
    await gw.fold()
    gw.machines.hosting["mac"] = {"csess_a"}  # a launch it took late, say: it says so
    gw.presence.put("mac", "Mac mini", ["csess_a"], 7)
    await gw.requested("csess_b", "pc")
    await gw.launcher.launch(gw.composed("csess_b", "pc", decided_seq=9))
    await gw.fold()
    assert ("mac", "csess_a", "superseded") in gw.machines.stops
    assert gw.machines.hosting["mac"] == set()
    assert [h.session_id for h in await gw.state.all_live()] == ["csess_b"]


async def test_a_move_decided_after_a_newer_conversation_was_asked_for_is_refused(gw):
    """Fault harness, seed 50704078: a conversation moved while the repo's next one was
    opening, and both ran."""
    gw.online("mac")
    gw.online("pc", label="PC")
    await gw.open("csess_a", decided_seq=1)
    await gw.requested("csess_b", "mac")  # the repo's newer conversation, still opening
    await gw.launcher.launch(gw.composed("csess_a", "pc", relocation=True,
                                         relocation_from="mac", decided_seq=99))
    await gw.fold()
    (failed,) = gw.events("open_failed")
    assert (failed["session_id"], failed["error"]["code"]) == ("csess_a", "superseded")
    assert [node for node, _ in gw.machines.launches] == ["mac"]  # never sent to the PC
    assert not gw.events("relocated")
    # The repo's own conversation still opens.
    await gw.launcher.launch(gw.composed("csess_b", "mac", decided_seq=99))
    await gw.fold()
    assert [h.session_id for h in await gw.state.all_live()] == ["csess_b"]
