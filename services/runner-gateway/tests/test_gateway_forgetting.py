"""Nothing of a forgotten instance runs on (forgetting.py): a wake its erasure covers is
not launched, what still runs of it is stopped before its rows go, and a wake confirmed as
the erasure was recorded is stopped at once. On fakes."""

from __future__ import annotations

import json

from seedline_contracts.events import WakeRequested
from seedline_contracts.instances import Erasure
from seedline_contracts.codec import encode
from seedline_contracts import subjects
from seedline_core import lifecycle as lc
from seedline_runner_gateway.forgetting import STOP_REASON, ForgetHere

from .conftest import AT, INSTANCE, REPO

OTHER = "inst-b"


def erasure(instance: str = INSTANCE, through_seq: int = 10, at: str = AT) -> Erasure:
    return Erasure(instance_id=instance, reason="the team left", by="ops", at=at,
                   entries=3, through_seq=through_seq)


async def test_a_wake_the_erasure_covers_is_not_launched_and_a_later_one_is(gw):
    gw.online("mac")
    await gw.parts.fold.forgotten.add(erasure(through_seq=10))
    await gw.requested("csess_covered")
    await gw.launcher.launch(gw.composed("csess_covered", wake_seq=10))
    (failed,) = gw.events("open_failed")
    assert (failed["session_id"], failed["error"]["code"]) == ("csess_covered", "not_found")
    assert gw.machines.launches == []

    await gw.open("csess_later", wake_seq=11)  # a message sent after the forget
    assert [r.session_id for _, r in gw.machines.launches] == ["csess_later"]


async def test_what_still_runs_of_the_instance_is_stopped_before_its_rows_are_dropped(gw):
    gw.online("mac")
    await gw.open("csess_gone")
    await gw.open("csess_kept", instance_id=OTHER)
    order = []
    stop = gw.machines.stop

    async def told(node_id, session_id, reason):
        order.append(("stop", session_id, reason))
        return await stop(node_id, session_id, reason)

    gw.machines.stop = told
    record = erasure()
    await gw.parts.forgetting._forgotten.add(record)
    await gw.parts.forgetting._on_forgotten(record)
    assert order == [("stop", "csess_gone", STOP_REASON)]
    assert gw.dropped == [INSTANCE]
    assert [(e["session_id"], e["reason"]) for e in gw.events("stopped")] == [
        ("csess_gone", STOP_REASON)]
    await gw.fold()
    assert [h.session_id for h in await gw.state.all_live()] == ["csess_kept"]


async def test_a_wake_confirmed_after_the_erasure_was_taken_in_is_stopped_at_once(gw):
    gw.online("mac")
    await gw.requested("csess_woken")
    launch = gw.machines.launch

    async def recorded_meanwhile(node_id, request):  # the forget lands during the launch
        await gw.parts.forgetting._forgotten.add(erasure(through_seq=10))
        return await launch(node_id, request)

    gw.machines.launch = recorded_meanwhile
    await gw.launcher.launch(gw.composed("csess_woken", wake_seq=9))
    assert _last_two(gw, "csess_woken") == [("opened", None), ("stopped", STOP_REASON)]
    assert ("mac", "csess_woken", STOP_REASON) in gw.machines.stops
    assert gw.machines.hosting["mac"] == set()


async def test_a_wake_confirmed_before_the_erasure_was_taken_in_is_stopped_then(gw):
    """Recorded a moment before the wake was confirmed, taken in by this copy after: no fold
    may hold it (another copy dropped the rows first), so the copy that confirmed it stops
    it from what it kept of its launch."""
    gw.online("mac")
    await gw.open("csess_woken", wake_seq=9)
    await gw.open("csess_other", repo="apps/y", wake_seq=11)  # after the erasure's reach
    record = erasure(through_seq=10, at="2026-12-01T09:59:59Z")
    await gw.parts.forgetting._forgotten.add(record)
    await gw.parts.forgetting._on_forgotten(record)
    assert _last_two(gw, "csess_woken") == [("opened", None), ("stopped", STOP_REASON)]
    assert gw.machines.hosting["mac"] == {"csess_other"}


def _last_two(gw, session_id: str) -> list[tuple[str, str | None]]:
    events = [json.loads(p) for p in gw.publisher.on("seedline.session.")]
    return [(e["type"], e.get("reason")) for e in events if e["session_id"] == session_id][-2:]


async def test_an_open_the_erasure_does_not_cover_runs_on(gw):
    gw.online("mac")
    await gw.parts.forgetting._forgotten.add(erasure(through_seq=10))
    await gw.open("csess_asked")  # a person's open, not a wake: nothing says it is forgotten
    await gw.open("csess_woken", repo="apps/y", wake_seq=11)
    assert gw.events("stopped") == []
    assert {r.session_id for _, r in gw.machines.launches} == {"csess_asked", "csess_woken"}


async def test_the_request_of_a_covered_wake_is_not_folded(gw):
    await gw.parts.fold.forgotten.add(erasure(through_seq=10))
    for session_id, wake_seq in (("csess_covered", 10), ("csess_after", 11)):
        await gw.publisher.publish([(
            subjects.session_event_subject(session_id, "wake_requested"),
            encode(WakeRequested(session_id=session_id, at=AT, instance_id=INSTANCE, repo=REPO,
                                 engine="scripted", node_id="mac", wake_seq=wake_seq,
                                 request_id=f"wake:{wake_seq}")), None)])
    await gw.fold()
    assert await gw.state.held("csess_covered") is None
    assert (await gw.state.held("csess_after")).state is lc.State.OPENING


async def test_a_conversation_of_the_instance_used_again_is_not_stopped(gw):
    """Every copy follows each erasure again when it starts: a conversation confirmed after the
    record (the instance used again), or any once the record is old, runs on; the rows go."""
    gw.online("mac")
    await gw.open("csess_again")  # confirmed at the harness's clock, 10:00:00
    # Recorded a minute before it was confirmed: the instance was used again since.
    await gw.parts.forgetting._on_forgotten(erasure(at="2026-12-01T09:59:00Z"))
    # Recorded as it was confirmed, and followed again an hour later (a copy starting).
    later = ForgetHere(gw.state, gw.stopper, gw.parts.fold.forgotten, gw.parts.fold.caught_up,
                       gw._drop, clock=lambda: "2026-12-01T11:00:00Z")
    await later(erasure(at=AT))
    assert gw.events("stopped") == [] and gw.machines.stops == []
    assert gw.dropped == [INSTANCE, INSTANCE]

