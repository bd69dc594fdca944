"""The opener on fakes: identity and tenancy, what a failed open makes a fact of, the
instruction, request ids, wakes, and the relocation rules of CONTRACT.md 4.1."""

from __future__ import annotations

import asyncio
import json

import msgspec

import pytest

from seedline_contracts.events import LaunchPlan, Opened, OpenFailed, Stopped, WakeRequested
from seedline_contracts.errors import ErrorBody
from seedline_contracts.sessions import Continuity, NoticeBody, OpenReply
from seedline_core.notices import wording_violations
from seedline_continuity_resolver.opening_api import OpeningApi
from seedline_platform.outage import StreamsUnavailable

AT = "2026-12-01T11:30:00Z"


def decided(resolver) -> list[dict]:
    return [e["continuity"] for e in resolver.published("continuity_decided")]


def plan(session_id: str, node: str = "mac", engine: str = "claude",
         request_id: str | None = None) -> LaunchPlan:
    return LaunchPlan("inst-a", "apps/x", engine, node,
                      Continuity("fresh", None, "no_previous", "none"), None, None, False,
                      request_id=request_id)


def reply(session_id: str, node: str = "mac") -> OpenReply:
    return OpenReply(session_id, node, False, False, "fresh",
                     Continuity("fresh", None, "no_previous", "none"), None,
                     NoticeBody("c", "c", "m", "warning"))


async def confirm(resolver, session_id: str, node: str = "mac", key: str | None = "k1",
                  request_id: str | None = None) -> None:
    await resolver.record(Opened(session_id=session_id, at=AT, reply=reply(session_id, node),
                                 plan=plan(session_id, node, request_id=request_id),
                                 engine_session_id=key))


async def test_two_instances_sharing_a_conversation_id_never_read_each_other(resolver):
    await resolver.entry("s1", instance_id="inst-a", repo="apps/one", engine="claude")
    await resolver.entry("s1", instance_id="inst-b", repo="apps/two", engine="codex",
                         at="2026-12-01T11:59:58Z")
    await resolver.open(instance_id="inst-a", repo="apps/one")
    await resolver.open(instance_id="inst-b", repo="apps/two", engine="claude")
    first, second = decided(resolver)
    assert first["reason_code"] == "no_resume_key" and "1 hour ago" in first["reason"]
    assert second["reason_code"] == "engine_changed" and "2 seconds ago" in second["reason"]
    assert (await resolver.repo.previous("inst-c", "apps/one")) is None


async def test_a_failed_open_makes_no_engine_fact_for_the_next_decision(resolver):
    await resolver.open(engine="claude", instruction="Add castling")
    (requested,) = resolver.published("open_requested")
    await resolver.record(OpenFailed(session_id=requested["session_id"], at=AT,
                                     error=ErrorBody("launch_refused", "no engine"),
                                     plan=plan(requested["session_id"])))
    # Its instruction is in the timeline (nothing a person said is lost), with no engine.
    (instruction,) = resolver.published("ingest")
    assert instruction["engine"] is None and instruction["kind"] == "chat_user"
    await resolver.open(engine="codex")
    assert decided(resolver)[-1]["reason_code"] != "engine_changed"


async def test_the_instruction_is_published_to_ingest_as_the_open_s_own_entry(resolver):
    await resolver.open(instruction="What were we doing?")
    (entry,) = resolver.published("ingest")
    (event,) = resolver.published("open_requested")
    assert entry["entry_id"] == f"{event['session_id']}:instruction"
    assert entry["session_id"] == event["session_id"] and entry["content"] == "What were we doing?"


async def test_the_same_request_id_opens_nothing_new(resolver):
    await resolver.open(request_id="r-1")
    (first,) = resolver.published("open_requested")
    await confirm(resolver, first["session_id"], request_id="r-1")
    again = await resolver.open(request_id="r-1", instruction="again")
    assert len(resolver.published("open_requested")) == 1
    assert again["session_id"] == first["session_id"]


async def test_a_wake_decides_with_the_message_as_instruction_and_records_no_instruction(resolver):
    old = await resolver.entry("csess_old", engine="claude")
    await resolver.entry("csess_elsewhere", repo="apps/y")  # another repo's, in between
    seq = await resolver.entry("csess_person", kind="chat_user", content="Where were we?")
    wake = WakeRequested(session_id="csess_w", at=AT, instance_id="inst-a", repo="apps/x",
                         engine="claude", node_id="mac", wake_seq=seq, request_id="wake:e-2")
    heads = []
    repo_head = resolver.view.repo_head
    resolver.view.repo_head = lambda *args: heads.append(args) or repo_head(*args)
    await resolver.opener.wake(wake)
    await resolver.opener.wake(wake)  # a redelivery wakes nothing twice
    (event,) = resolver.published("continuity_decided")
    assert event["plan"]["instruction"] == "Where were we?"
    # Briefed up to the repo's entry before the message, read with the message.
    assert (event["until_seq"], event["entries_upto"]) == (old, 1) and heads == []
    assert resolver.published("ingest") == []


async def relocate(resolver, session_id: str, node: str) -> dict:
    body = json.dumps({"session_id": session_id, "node_id": node}).encode()
    return await resolver.ask(OpeningApi.relocate, body)


async def test_relocation_rules(resolver):
    timeline_only = await relocate(resolver, "csess_seen_only", "pc")
    assert timeline_only["error"]["code"] == "not_found"
    assert "open its repo" in timeline_only["error"]["message"]
    await resolver.open()
    await resolver.open()
    older, newer = (e["session_id"] for e in resolver.published("open_requested"))
    await confirm(resolver, older)
    await confirm(resolver, newer)
    refused = await relocate(resolver, older, "pc")
    assert refused["error"]["code"] == "invalid_request" and newer in refused["error"]["message"]
    before = len(resolver.published("continuity_decided"))
    unchanged = await relocate(resolver, newer, "mac")
    assert unchanged["session_id"] == newer and unchanged["node_id"] == "mac"
    assert len(resolver.published("continuity_decided")) == before  # no new launch
    await relocate(resolver, newer, "pc")
    moved = resolver.published("continuity_decided")[-1]
    assert moved["plan"]["relocation"] is True and moved["plan"]["engine"] == "claude"
    assert moved["continuity"]["reason_code"] == "other_machine"
    for error in (timeline_only, refused):
        assert not wording_violations(error["error"]["message"])


async def test_names_with_control_characters_are_invalid_requests(resolver):
    reply = await resolver.open(repo="apps\x00x")
    assert reply["error"]["code"] == "invalid_request" and "repo" in reply["error"]["message"]
    moved = await relocate(resolver, "csess_a", "pc\x07")
    assert moved["error"]["code"] == "invalid_request"


async def test_a_wake_is_decided_as_the_repo_stood_before_the_message(resolver):
    # The repo was last touched 5 days ago. The message (already in the projection) is
    # not that activity, whether it names a conversation of its own or the old one.
    for n, (repo, named) in enumerate((("apps/x", "csess_person"), ("apps/y", "csess_old"))):
        await resolver.entry("csess_old", repo=repo, engine="claude", at="2026-11-26T12:00:00Z")
        seq = await resolver.entry(named, repo=repo, kind="chat_user",
                                   at="2026-12-01T12:00:00Z", content="Where were we?")
        await resolver.opener.wake(WakeRequested(
            session_id=f"csess_w{n}", at=AT, instance_id="inst-a", repo=repo,
            engine="claude", node_id="mac", wake_seq=seq, request_id=f"wake:{n}"))
    first, second = decided(resolver)
    assert first["reason_code"] == second["reason_code"] == "past_window", (first, second)
    assert "5 days ago" in first["reason"] and "5 days ago" in second["reason"]


async def test_a_wake_catches_up_to_its_own_place_in_the_streams_without_asking_the_server(
    resolver,
):
    from seedline_continuity_resolver.repository import SESSIONS, TIMELINE

    asked_ends: list[str] = []
    waited: dict[str, int] = {}

    async def stream_ends() -> dict[str, int]:
        asked_ends.append("ends")
        return {TIMELINE: 10**6, SESSIONS: 10**6}

    async def reached(projection: str, seq: int, timeout: float) -> bool:
        waited[projection] = seq
        return True

    resolver.catch_up._stream_ends, resolver.catch_up._reached = stream_ends, reached
    seq = await resolver.entry("csess_person", kind="chat_user", content="Where were we?")
    await resolver.opener.wake(WakeRequested(
        session_id="csess_w", at=AT, instance_id="inst-a", repo="apps/x", engine="claude",
        node_id="mac", wake_seq=seq, request_id="wake:e-1"), event_seq=42)
    assert asked_ends == [] and waited == {TIMELINE: seq, SESSIONS: 41}

    await resolver.open()  # an open request reads to where the streams end now
    assert asked_ends == ["ends"] and waited == {TIMELINE: 10**6, SESSIONS: 10**6}


async def test_a_decision_right_after_an_open_waits_for_that_open_s_instruction(resolver):
    """The writer moves the instruction from ingest into the timeline on its own time; a
    relocation a moment later still briefs from it (read your own writes)."""
    import asyncio

    resolver.ingest_lands = False
    await resolver.open(instruction="Add castling.")
    (requested,) = resolver.published("open_requested")
    await confirm(resolver, requested["session_id"])
    landing = asyncio.get_running_loop().call_later(
        0.1, lambda: asyncio.ensure_future(resolver.land_ingest()))
    await relocate(resolver, requested["session_id"], "pc")
    landing.cancel()
    moved = resolver.published("continuity_decided")[-1]
    assert moved["continuity"]["reason_code"] == "other_machine"
    instruction_seq = max(resolver.view.entries)
    assert resolver.view.entries[instruction_seq].content == "Add castling."
    assert moved["until_seq"] == instruction_seq and moved["entries_upto"] == 1


async def test_a_failed_open_between_a_stop_and_the_next_open_never_takes_the_resume(resolver):
    # CONTRACT.md 3.1 (1.2): a conversation whose only open failed is never "the earlier
    # conversation". Before, its instruction made it the newest: no_resume_key, 30 min ago.
    await resolver.open(engine="claude")
    (first,) = resolver.published("open_requested")
    await confirm(resolver, first["session_id"], key="k1")
    await resolver.record(Stopped(session_id=first["session_id"], at=AT, reason="requested"))
    await resolver.open(engine="claude", instruction="Go on")
    failing = resolver.published("open_requested")[-1]["session_id"]
    await resolver.record(OpenFailed(session_id=failing, at=AT,
                                     error=ErrorBody("runner_offline", "offline"),
                                     plan=plan(failing)))
    await resolver.open(engine="claude")
    last = decided(resolver)[-1]
    assert last["reason_code"] == "resume" and last["resume_from"] == first["session_id"]


async def test_an_entry_dated_ahead_counts_from_when_it_was_accepted(resolver):
    # An entry dated 20 hours ahead under another conversation id, accepted an hour ago,
    # made every later open "last touched 0 seconds ago" of that conversation.
    await resolver.entry("s-ahead", at="2026-12-02T07:00:00Z", accepted="2026-12-01T11:00:00Z",
                         engine="claude")
    await resolver.open(engine="claude")
    (first,) = resolver.published("open_requested")
    await confirm(resolver, first["session_id"], key="k1")  # confirmed at 11:30
    await resolver.open(engine="claude")
    last = decided(resolver)[-1]
    assert last["reason_code"] == "resume" and last["resume_from"] == first["session_id"]
    assert last["reason"].endswith("30 minutes ago")


async def test_a_wake_caps_an_entry_dated_ahead_at_its_acceptance(resolver):
    await resolver.open(engine="claude")
    (first,) = resolver.published("open_requested")
    await confirm(resolver, first["session_id"], key="k1")
    await resolver.entry("s-ahead", at="2026-12-02T07:00:00Z", accepted="2026-12-01T11:00:00Z",
                         engine="claude")
    woken_by = await resolver.entry("s-person", kind="chat_user", at="2026-12-01T11:59:00Z",
                                    content="go on")
    await resolver.opener.wake(WakeRequested(
        session_id="csess_wake", at=AT, instance_id="inst-a", repo="apps/x", engine="claude",
        node_id="mac", wake_seq=woken_by, request_id="wake-1"))
    await resolver.fold()
    last = decided(resolver)[-1]
    assert last["reason_code"] == "resume" and last["resume_from"] == first["session_id"]


async def test_a_resume_records_the_newest_turn_its_engine_was_given_or_produced(resolver):
    await resolver.open(engine="claude", instruction="Add castling")
    (first,) = resolver.published("open_requested")
    sid = first["session_id"]
    await confirm(resolver, sid, key="k1")
    answer = await resolver.entry(sid, kind="chat_assistant", content="Done. " + "x" * 300,
                                  engine="claude", at="2026-12-01T11:40:00Z")
    await resolver.entry(sid, kind="terminal", content="ran the tests",
                         at="2026-12-01T11:41:00Z")
    await resolver.entry("someone-else", kind="chat_user", content="not this one",
                         at="2026-12-01T11:10:00Z")
    await resolver.open(engine="claude")
    plan = resolver.published("continuity_decided")[-1]["plan"]
    assert plan["continuity"]["mode"] == "resume"
    assert plan["resume_expect"] == {"seq": answer, "kind": "chat_assistant",
                                     "excerpt": ("Done. " + "x" * 300)[:200]}
    # A fresh decision carries no expectation.
    await resolver.open(engine="claude", force_fresh=True)
    assert resolver.published("continuity_decided")[-1]["plan"]["resume_expect"] is None


async def _answered_then_stopped(resolver) -> tuple[str, int]:
    """An open confirmed with a resume key, its engine's answer, then an idle stop: the
    conversation and the answer's seq."""
    await resolver.open(engine="claude", instruction="Add castling")
    (first,) = resolver.published("open_requested")
    sid = first["session_id"]
    await confirm(resolver, sid, key="k1")
    answer = await resolver.entry(sid, kind="chat_assistant", content="Castling added",
                                  engine="claude", at="2026-12-01T11:40:00Z")
    await resolver.record(Stopped(session_id=sid, at=AT, reason="idle"))
    return sid, answer


async def test_a_wake_expects_the_turn_before_the_message_not_the_message(resolver):
    sid, answer = await _answered_then_stopped(resolver)
    woken_by = await resolver.entry(sid, kind="chat_user", content="Now en passant",
                                    at="2026-12-01T11:59:00Z")
    await resolver.opener.wake(WakeRequested(
        session_id="csess_wake", at=AT, instance_id="inst-a", repo="apps/x", engine="claude",
        node_id="mac", wake_seq=woken_by, request_id="wake-2"))
    await resolver.fold()
    plan = resolver.published("continuity_decided")[-1]["plan"]
    assert plan["continuity"]["mode"] == "resume"
    assert plan["resume_expect"] == {"seq": answer, "kind": "chat_assistant",
                                     "excerpt": "Castling added"}


async def test_a_wake_reads_the_conversation_its_message_touched_with_the_message(resolver):
    """The message's own conversation before it comes with the wait for the message; only
    another conversation touched after the message is read on its own."""
    sid, answer = await _answered_then_stopped(resolver)
    await resolver.entry("s-other", engine="codex", at="2026-12-01T10:00:00Z")
    woken_by = await resolver.entry(sid, kind="chat_user", content="Now en passant",
                                    at="2026-12-01T11:59:00Z")
    await resolver.entry("s-other", engine="codex", at="2026-12-01T11:59:30Z")
    read_apart: list[str] = []
    conversation_before = resolver.view.conversation_before

    async def counted(instance_id, repo, session_id, *rest):
        read_apart.append(session_id)
        return await conversation_before(instance_id, repo, session_id, *rest)

    resolver.view.conversation_before = counted
    await resolver.opener.wake(WakeRequested(
        session_id="csess_wake", at=AT, instance_id="inst-a", repo="apps/x", engine="claude",
        node_id="mac", wake_seq=woken_by, request_id="wake-3"))
    assert read_apart == ["s-other"]
    plan = resolver.published("continuity_decided")[-1]["plan"]
    assert plan["continuity"]["mode"] == "resume"  # the message's own, read with it
    assert plan["resume_expect"]["seq"] == answer


async def test_a_timed_out_open_names_its_request_id_and_asking_again_returns_the_answer(resolver):
    late = await resolver.open(request_id="r-late")  # no machine confirms within 0.2 s
    assert late["error"]["code"] == "timeout"
    assert "r-late" in late["error"]["message"] and "goes on" in late["error"]["message"]
    assert not wording_violations(late["error"]["message"])
    (first,) = resolver.published("open_requested")
    await confirm(resolver, first["session_id"], request_id="r-late")
    # Only the instance and the request_id: the first answer, and nothing new is opened.
    asked = await resolver.ask(OpeningApi.open, {"instance_id": "inst-a", "request_id": "r-late"})
    assert asked["session_id"] == first["session_id"]
    assert len(resolver.published("open_requested")) == 1
    unknown = await resolver.ask(OpeningApi.open, {"instance_id": "inst-a", "request_id": "never"})
    assert unknown["error"]["code"] == "not_found"


def streams_away_once(resolver) -> None:
    """The next publish finds the streams away (a cluster electing leaders): nothing of it
    is stored, as JetStream refuses it."""
    publish = resolver.publisher.publish

    async def away(messages):
        resolver.publisher.publish = publish
        raise StreamsUnavailable("no responders")

    resolver.publisher.publish = away


async def test_an_open_whose_first_ask_recorded_nothing_is_decided_when_asked_again(resolver):
    streams_away_once(resolver)
    first = await resolver.open(request_id="r-away", instruction="Go on")
    assert first["error"]["code"] == "unavailable"
    assert resolver.published("open_requested") == []
    # Only the instance and the request_id: nothing to decide with, so it says what to send.
    by_id = await resolver.ask(OpeningApi.open, {"instance_id": "inst-a", "request_id": "r-away"})
    assert by_id["error"]["code"] == "unavailable" and "whole open request" in by_id[
        "error"]["message"]
    # The whole request again: decided now, as the conversation the first ask claimed.
    asked = await resolver.open(request_id="r-away", instruction="Go on")
    (requested,) = resolver.published("open_requested")
    (decision,) = resolver.published("continuity_decided")
    assert requested["session_id"] == decision["session_id"] == "csess_001"
    assert asked["error"]["code"] == "timeout" and "r-away" in asked["error"]["message"]
    await confirm(resolver, "csess_001", request_id="r-away")
    again = await resolver.open(request_id="r-away", instruction="Go on")
    assert again["session_id"] == "csess_001"
    assert len(resolver.published("continuity_decided")) == 1


async def test_a_wake_redelivered_while_it_is_being_decided_is_decided_once(resolver):
    """A wake claims its request_id with the read of its repo, after the catch-up: one
    delivered again meanwhile, to this copy or to another, makes no second decision."""
    seq = await resolver.entry("csess_person", kind="chat_user", content="Where were we?")
    wake = WakeRequested(session_id="csess_w", at=AT, instance_id="inst-a", repo="apps/x",
                         engine="claude", node_id="mac", wake_seq=seq, request_id="wake:e-7")
    held, recorded_before = asyncio.Event(), resolver.opener._catch_up.recorded_before

    async def held_back(*args):
        await held.wait()
        return await recorded_before(*args)

    resolver.opener._catch_up.recorded_before = held_back
    first = asyncio.create_task(resolver.opener.wake(wake))
    await asyncio.sleep(0.05)
    await asyncio.wait_for(resolver.opener.wake(wake), 5)  # this copy is deciding it
    held.set()
    await first
    other_copy = msgspec.structs.replace(wake, session_id="csess_w2")  # its own id
    await resolver.opener.wake(other_copy)  # claimed for csess_w: not woken twice
    (event,) = resolver.published("continuity_decided")
    assert event["session_id"] == "csess_w"


async def test_a_wake_whose_decision_found_the_streams_away_is_decided_when_redelivered(resolver):
    seq = await resolver.entry("csess_person", kind="chat_user", content="Where were we?")
    wake = WakeRequested(session_id="csess_w", at=AT, instance_id="inst-a", repo="apps/x",
                         engine="claude", node_id="mac", wake_seq=seq, request_id="wake:e-9")
    streams_away_once(resolver)
    with pytest.raises(StreamsUnavailable):
        await resolver.opener.wake(wake)
    await resolver.opener.wake(wake)  # the consumer delivers it again after the outage
    await resolver.opener.wake(wake)  # and a redelivery after that wakes nothing twice
    (event,) = resolver.published("continuity_decided")
    assert event["session_id"] == "csess_w"


async def test_the_open_s_events_carry_ids_the_stream_keeps_once(resolver):
    await resolver.open(request_id="r-ids")
    ids = [(h or {}).get("Nats-Msg-Id") for _, _, h in resolver.publisher.messages]
    assert ids == ["csess_001:open_requested", "csess_001:open_decided"]


async def test_an_open_without_a_request_id_that_times_out_is_given_one(resolver):
    late = await resolver.open()
    (first,) = resolver.published("open_requested")
    assert first["session_id"] in late["error"]["message"]
    await confirm(resolver, first["session_id"])
    again = await resolver.open(request_id=first["session_id"], repo="apps/other")
    assert again["session_id"] == first["session_id"]
    assert len(resolver.published("open_requested")) == 1


def forgotten_through(seq: int):
    from seedline_contracts.instances import Erasure

    return Erasure(instance_id="inst-a", reason="the team left", by="ops", at=AT, entries=1,
                   through_seq=seq)


async def test_a_wake_by_a_message_the_erasure_covers_is_not_decided(resolver):
    seq = await resolver.entry("csess_person", kind="chat_user", content="Where were we?")
    await resolver.parts.projection.forgotten.add(forgotten_through(seq))
    wake = WakeRequested(session_id="csess_w", at=AT, instance_id="inst-a", repo="apps/x",
                         engine="claude", node_id="mac", wake_seq=seq, request_id="wake:e-1")
    await resolver.opener.wake(wake)
    assert resolver.published("continuity_decided") == []
    later = await resolver.entry("csess_person", kind="chat_user", content="And now?")
    await resolver.opener.wake(WakeRequested(
        session_id="csess_w2", at=AT, instance_id="inst-a", repo="apps/x", engine="claude",
        node_id="mac", wake_seq=later, request_id="wake:e-2"))
    assert [e["session_id"] for e in resolver.published("continuity_decided")] == ["csess_w2"]


async def test_the_projection_folds_nothing_the_erasure_covers(resolver):
    from seedline_contracts.codec import encode
    from seedline_contracts.timeline import TimelineEntry
    from seedline_contracts.times import parse_rfc3339
    from seedline_core import lifecycle as lc
    from seedline_devtools.fakes import FakeMsg
    from seedline_platform.consumer import Batch
    from seedline_platform.lifecycle_events import session_events

    projection = resolver.parts.projection
    await projection.forgotten.add(forgotten_through(2))  # inst-a up to 2
    entries = []
    for seq, instance in ((2, "inst-a"), (3, "inst-a"), (4, "inst-b")):
        entry = TimelineEntry(f"e-{seq}-{instance}", instance, "apps/x",
                              f"csess_{instance}_{seq}", "chat_user", "hello", AT, None, None)
        entries.append((entry, FakeMsg(encode(entry), stream_seq=seq,
                                       timestamp=parse_rfc3339(AT))))
    await projection.apply_timeline(Batch(entries, 4))
    assert sorted((r.instance_id, r.session_id) for r in await resolver.repo.rows()) == [
        ("inst-a", "csess_inst-a_3"), ("inst-b", "csess_inst-b_4")]
    wakes = [FakeMsg(encode(WakeRequested(
        session_id=f"csess_w{seq}", at=AT, instance_id="inst-a", repo="apps/x", engine="claude",
        node_id="mac", wake_seq=seq, request_id=f"wake:{seq}")),
        subject=f"seedline.session.csess_w{seq}.wake_requested", stream_seq=n)
        for n, seq in ((1, 2), (2, 3))]
    await projection.apply_sessions(Batch(session_events(wakes), 2))
    assert await resolver.repo.platform("csess_w2") is None
    assert (await resolver.repo.platform("csess_w3")).platform.state is lc.State.OPENING
