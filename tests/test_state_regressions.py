"""Conversation-state defects once seen on the running system, each reproduced against the
real services (CONTRACT.md Conventions, 3.1, 4.1): tenants that share a conversation id,
a failed open that made engine facts, the relocation rules, machines and tenants, presence
that cannot be read, and a restart that left conversations listed live that no machine hosts.

Those already reproduced elsewhere are not repeated here: year-one times and NUL in a
read (services/timeline-writer/tests/test_ingest_integration.py), runner-scoped ingest
(same file), and the data-folder lock of `seedline up` (libs/supervisor/tests/test_lock.py).
"""

from __future__ import annotations

import asyncio
import sys
from datetime import timedelta
from pathlib import Path

import nats
import pytest

from seedline_contracts import subjects
from seedline_contracts.times import format_utc, utc_now
from seedline_core.notices import wording_violations
from seedline_platform.consumer import BatchConsumer, Consumption
from seedline_runner.engines.scripted import ScriptedEngine
from seedline_runner.runner import Runner

sys.path.insert(0, str(Path(__file__).parent))
from model.processes import Machine, Platform, servers  # noqa: E402

pytestmark = pytest.mark.servers


def hours_ago(hours: float) -> str:
    return format_utc(utc_now() - timedelta(hours=hours))


async def read(system, instance_id: str, repo: str) -> list[dict]:
    reply = await system.request(subjects.API_TIMELINE_READ,
                                 {"instance_id": instance_id, "repo": repo})
    assert reply["ok"], reply
    return reply["entries"]


async def live(system, instance_id: str) -> list[tuple[str, str]]:
    reply = await system.request(subjects.API_SESSIONS_LIST, {"instance_id": instance_id})
    return [(c["session_id"], c["node_id"]) for c in reply["conversations"]]


async def test_two_instances_sharing_a_conversation_id_on_other_repos_never_read_each_other(
    system,
):
    await system.start_runner()
    await system.append(1, instance_id="inst-a", repo="apps/one", session_id="s1",
                        engine="claude", content="the work of inst-a", at=hours_ago(1.5))
    await system.append(2, instance_id="inst-b", repo="apps/two", session_id="s1",
                        engine="codex", content="the work of inst-b", at=hours_ago(3.5))
    a = await system.open(instance_id="inst-a", repo="apps/one")
    b = await system.open(instance_id="inst-b", repo="apps/two")
    assert a["continuity"]["reason_code"] == b["continuity"]["reason_code"] == "engine_changed"
    assert "ran on claude" in a["continuity"]["reason"] and "1 hour ago" in a["continuity"]["reason"]
    assert "ran on codex" in b["continuity"]["reason"] and "3 hours ago" in b["continuity"]["reason"]
    assert a["brief"]["rows"] == b["brief"]["rows"] == 1
    brief_a = await system.request(subjects.API_BRIEFS_GET, {"session_id": a["session_id"]})
    assert "the work of inst-a" in brief_a["text"] and "inst-b" not in brief_a["text"]
    assert [e["content"] for e in await read(system, "inst-a", "apps/one")] == [
        "the work of inst-a"]
    assert await live(system, "inst-a") == [(a["session_id"], "mac-mini-1")]
    assert await live(system, "inst-b") == [(b["session_id"], "mac-mini-1")]


async def test_a_failed_open_makes_no_engine_fact_and_keeps_the_persons_instruction(system):
    await system.start_runner()  # offers scripted only
    refused = await system.open(engine="claude", instruction="Add castling")
    assert refused["error"]["code"] == "launch_refused", refused
    opened = await system.open(engine="scripted")
    assert opened["ok"], opened
    # A conversation whose only open failed is never the earlier conversation (CONTRACT.md
    # 3.1, 1.2; under 1.1 its instruction made it that, no_resume_key): never "ran on claude".
    assert opened["continuity"]["reason_code"] == "no_previous", opened["continuity"]
    assert "claude" not in opened["continuity"]["reason"]
    [instruction] = [e for e in await read(system, "bd43f4de", "apps/chess-academy")
                     if e["kind"] == "chat_user"]
    assert (instruction["content"], instruction["engine"]) == ("Add castling", None)


async def test_relocation_takes_only_the_newest_platform_conversation_and_moves_it_once(system):
    await system.start_runner("mac-mini-1", "Mac mini")
    await system.start_runner("linux-box", "Linux box")
    await system.append(1, session_id="s-seen", at=hours_ago(2))
    older = await system.open()
    newer = await system.open()
    assert older["ok"] and newer["ok"]

    refused = await system.request(subjects.API_SESSIONS_RELOCATE,
                                   {"session_id": older["session_id"], "node_id": "linux-box"})
    assert refused["error"]["code"] == "invalid_request"
    assert newer["session_id"] in refused["error"]["message"]
    seen_only = await system.request(subjects.API_SESSIONS_RELOCATE,
                                     {"session_id": "s-seen", "node_id": "linux-box"})
    assert seen_only["error"]["code"] == "not_found"
    assert "open its repo" in seen_only["error"]["message"]

    events = len(await system.session_events("seed_composed"))
    same = await system.request(subjects.API_SESSIONS_RELOCATE,
                                {"session_id": newer["session_id"], "node_id": "mac-mini-1"})
    assert same["ok"] and (same["session_id"], same["node_id"]) == (
        newer["session_id"], "mac-mini-1")
    await asyncio.sleep(0.5)
    assert len(await system.session_events("seed_composed")) == events  # no new launch
    mac, _ = system.runners["mac-mini-1"]
    assert mac.live_conversations == [newer["session_id"]]
    assert await live(system, "bd43f4de") == [(newer["session_id"], "mac-mini-1")]
    for error in (refused, seen_only):
        assert not wording_violations(error["error"]["message"])


async def test_a_machine_that_serves_other_instances_refuses_a_launch_for_this_one(system):
    nc = await nats.connect(system.settings.nats_url)
    runner = Runner(nc, "team-box", "Team box", {"scripted": ScriptedEngine()},
                    presence_interval=1.0, instances=["inst-team"])
    await runner.start()
    try:
        refused = await system.open(instance_id="inst-other", node_id="team-box")
        assert refused["error"]["code"] == "launch_refused", refused
        assert "Team box" in refused["error"]["message"]
        assert runner.live_conversations == []
        served = await system.open(instance_id="inst-team", node_id="team-box")
        assert served["ok"] and runner.live_conversations == [served["session_id"]]
    finally:
        await runner.stop()
        await nc.close()


# -- the platform as processes ------------------------------------------------------------

MACHINES = {"m1": "Machine one", "m2": "Machine two"}


@pytest.fixture
async def platform(postgres_server):
    with servers(postgres_server, "regressions") as (nats_proc, database_url, workdir):
        running = Platform(nats_url=nats_proc.url, monitor_url=nats_proc.monitor_url,
                           database_url=database_url, logs=workdir)
        running.nats_process = nats_proc
        try:
            await running.start(MACHINES, repos=("apps/one", "apps/two"))
            yield running
        finally:
            running.close()
            await running.disconnect()


async def open_on(platform: Platform, node_id: str, repo: str, instance_id: str = "inst-a"):
    reply = await platform.request(subjects.API_SESSIONS_OPEN, {
        "instance_id": instance_id, "repo": repo, "engine": "scripted", "node_id": node_id,
        "instruction": f"work on {repo}"})
    assert reply["ok"], reply
    return reply["session_id"]


async def settled(platform: Platform, bound: set[str]) -> None:
    """Every consumer idle and each engine's own id recorded: in the launch's `opened`, or
    in an `engine_bound` when the id came later or differed."""
    async def quiet():
        await platform.pull()
        reported = {e["session_id"] for e in platform.seen.events
                    if e["type"] == "engine_bound"
                    or (e["type"] == "opened" and e.get("engine_session_id"))}
        return bound <= reported and await platform.idle()

    await platform._until(quiet, 30, "the platform settled")


async def hosts(platform: Platform, node_id: str) -> list[str]:
    presence = await platform.presence(node_id)
    return presence["live"] if presence else []


@pytest.mark.slow
@pytest.mark.timeout(240)
async def test_machines_that_keep_heartbeating_are_never_declared_offline(platform):
    """Presence that cannot be read (nats-server restarted) or a bucket whose newest
    message deletes another machine's key is never proof that a machine is offline."""
    await platform.follow_notices("inst-a")
    first = await open_on(platform, "m1", "apps/one")
    second = await open_on(platform, "m2", "apps/two")
    platform.machines["m3"] = Machine("m3", "Machine three")
    await platform.start_machine("m3")
    await platform.stop_machine("m3")  # the bucket's newest message deletes a key
    platform.nats_process.stop()
    await asyncio.sleep(2)  # nothing can read presence meanwhile
    platform.nats_process.start()
    # Past the sweeps and the 10 s of two direct misses, with the machines heartbeating.
    await asyncio.sleep(25)
    assert platform.seen.notices["inst-a"] == []
    listed = await platform.request(subjects.API_SESSIONS_LIST, {"instance_id": "inst-a"})
    assert sorted((c["session_id"], c["node_id"]) for c in listed["conversations"]) == sorted(
        [(first, "m1"), (second, "m2")])
    assert await hosts(platform, "m1") == [first] and await hosts(platform, "m2") == [second]
    for session_id in (first, second):
        stop = await platform.request(subjects.API_SESSIONS_STOP, {"session_id": session_id})
        assert stop == {"ok": True, "stopped": True}


@pytest.mark.slow
@pytest.mark.timeout(240)
async def test_after_a_restart_no_conversation_is_listed_live_that_no_machine_hosts(platform):
    """The gateway killed, the machine killed with -9 and started again (hosting nothing),
    then the gateway started: the lost conversation is stopped and the person told."""
    await platform.follow_notices("inst-a")
    lost = await open_on(platform, "m1", "apps/one")
    kept = await open_on(platform, "m2", "apps/two")
    await settled(platform, {lost, kept})  # killed mid-batch, see the xfail above
    gateway = platform.services["runner-gateway"]
    gateway.kill()
    await asyncio.to_thread(gateway.wait)
    await platform.restart_machine("m1")
    assert await hosts(platform, "m1") == []
    await platform.start_service("runner-gateway")

    async def told():
        return [n for n in platform.seen.notices["inst-a"] if n["kind"] == "runner_restarted"]

    [notice] = await platform._until(told, 60, "the runner_restarted notice")
    assert (notice["session_id"], notice["node_id"]) == (lost, "m1")
    assert "Machine one" in notice["text"] and not wording_violations(notice["text"])
    listed = await platform.request(subjects.API_SESSIONS_LIST, {"instance_id": "inst-a"})
    assert [(c["session_id"], c["node_id"]) for c in listed["conversations"]] == [(kept, "m2")]
    stop = await platform.request(subjects.API_SESSIONS_STOP, {"session_id": lost})
    assert stop == {"ok": True, "stopped": False}
    assert [n["kind"] for n in platform.seen.notices["inst-a"]] == ["runner_restarted"]
    assert await hosts(platform, "m2") == [kept]



@pytest.mark.timeout(60)
async def test_a_fold_waits_for_a_stream_it_cannot_read_rather_than_apply_out_of_order(
    nats_server, monkeypatch
):
    """Another copy holds the older messages and is paused (it neither acknowledges nor
    extends them), and the stream cannot be read for longer than twice ack_wait (a server
    paused, a stream without a leader): the running copy applies nothing ahead of them,
    then everything in stream order once the stream can be read (fault harness, seed 3)."""
    import seedline_platform.consumer as consumer_module

    nc = await nats.connect(nats_server.url)
    js = nc.jetstream()
    await js.add_stream(name="FOLD_WAIT", subjects=["wait.>"])
    applied: list[int] = []

    async def fold(msgs) -> None:  # idempotent, as the consumers that read ahead are
        applied.extend(m.metadata.sequence.stream for m in msgs
                       if m.metadata.sequence.stream > max(applied, default=0))

    async def park(msg, reason) -> None:
        raise AssertionError(reason)

    loop = asyncio.get_running_loop()
    readable_at = loop.time() + 1_000.0
    real_replay = consumer_module.replay

    async def replay_when_readable(*args, **kwargs):
        if loop.time() < readable_at:
            raise TimeoutError("the stream has no leader")
        async for batch in real_replay(*args, **kwargs):
            yield batch

    monkeypatch.setattr(consumer_module, "replay", replay_when_readable)
    copy = BatchConsumer(js, Consumption("FOLD_WAIT", "wait", ("wait.>",), batch_size=8,
                                         ack_wait=1, idempotent=True),
                         handle=fold, park=park)
    await copy.start()
    for n in (1, 2, 3):
        await js.publish(f"wait.{n}", b"event")
    paused = await js.pull_subscribe_bind("wait", stream="FOLD_WAIT")
    assert len(await paused.fetch(8, timeout=2)) == 3  # held, never acknowledged
    readable_at = loop.time() + 4.0  # past twice ack_wait
    running_copy = asyncio.create_task(copy.run())
    try:
        for n in (4, 5):
            await js.publish(f"wait.{n}", b"event")
        await asyncio.sleep(3.0)
        assert applied == [], "applied ahead of messages another copy holds"
        for _ in range(100):
            if applied == [1, 2, 3, 4, 5]:
                break
            await asyncio.sleep(0.1)
        assert applied == [1, 2, 3, 4, 5]
    finally:
        running_copy.cancel()
        await asyncio.gather(running_copy, return_exceptions=True)
        await paused.unsubscribe()
        await nc.close()


@pytest.mark.parametrize("ack_all", [False, True], ids=["explicit acks", "one ack per batch"])
@pytest.mark.timeout(60)
async def test_a_fold_goes_on_at_once_after_the_copy_holding_its_batch_died(nats_server, ack_all):
    """The root of stale answers after a gateway is killed mid-batch: the copy that comes
    next must apply what the dead one held, in stream order, without waiting out ack_wait
    (120 s here); with one ack per batch, that ack settles what the dead copy held."""
    nc = await nats.connect(nats_server.url)
    js = nc.jetstream()
    await js.add_stream(name="FOLD_TEST", subjects=["fold.>"])
    applied: list[int] = []

    async def fold(msgs) -> None:
        applied.extend(m.metadata.sequence.stream for m in msgs)

    async def park(msg, reason) -> None:
        raise AssertionError(reason)

    copy = BatchConsumer(js, Consumption("FOLD_TEST", "fold", ("fold.>",), batch_size=8,
                                         ack_wait=120, ack_all=ack_all, idempotent=True),
                         handle=fold, park=park)
    await copy.start()
    for n in (1, 2, 3):
        await js.publish(f"fold.{n}", b"event")
    dead = await js.pull_subscribe_bind("fold", stream="FOLD_TEST")
    assert len(await dead.fetch(8, timeout=2)) == 3  # taken, never acknowledged: it died
    await dead.unsubscribe()
    running_copy = asyncio.create_task(copy.run())
    try:
        for n in (4, 5):
            await js.publish(f"fold.{n}", b"event")
        for _ in range(200):
            if applied == [1, 2, 3, 4, 5]:
                break
            await asyncio.sleep(0.1)
        assert applied == [1, 2, 3, 4, 5]
        if ack_all:
            for _ in range(50):
                if (await js.consumer_info("FOLD_TEST", "fold")).num_ack_pending == 0:
                    break
                await asyncio.sleep(0.1)
            assert (await js.consumer_info("FOLD_TEST", "fold")).num_ack_pending == 0
    finally:
        running_copy.cancel()
        await asyncio.gather(running_copy, return_exceptions=True)
        await nc.close()
