"""An imported message is history: it never wakes a repo and is never a turn (CONTRACT.md 2.1).

Its `at` is fresh here (the moment it reached the timeline), the case a one-minute-old
imported conversation makes: only `origin` tells it apart from a person's new message.
"""

from __future__ import annotations

import json

from seedline_contracts.times import parse_rfc3339
from seedline_devtools.fakes import FakeMsg

AT = "2026-12-01T10:00:00Z"  # the harness's clock (conftest.py)
INSTANCE, REPO = "inst-a", "apps/x"


def person_message(seq: int, content: str, **over) -> FakeMsg:
    body = {"entry_id": f"e-{seq}", "instance_id": INSTANCE, "repo": REPO,
            "session_id": "csess_any", "kind": "chat_user", "content": content, "at": AT,
            "engine": None, "truncated_from": None, **over}
    # It reached the timeline at its own `at`: fresh by time alone.
    return FakeMsg(json.dumps(body).encode(), stream_seq=seq, timestamp=parse_rfc3339(AT))


def imported(seq: int, content: str) -> FakeMsg:
    return person_message(seq, content, origin="import")


async def handle(gw, msg: FakeMsg) -> None:
    await gw.person(msg)


async def test_a_fresh_imported_message_is_not_delivered_to_the_live_conversation(gw):
    gw.online("mac")
    await gw.open("csess_a")
    await handle(gw, imported(10, "already answered"))
    assert gw.machines.turns == [] and gw.events("wake_requested") == []
    await handle(gw, person_message(11, "next step"))
    (node, turn), = gw.machines.turns
    assert (turn.session_id, turn.seq, turn.content) == ("csess_a", 11, "next step")


async def test_a_fresh_imported_message_wakes_nothing_and_a_live_one_then_does(gw):
    gw.online("mac")
    await gw.open("csess_a")
    await gw.stopper.end(await gw.state.held("csess_a"), "requested")
    await gw.fold()
    await handle(gw, imported(10, "already answered"))
    assert gw.events("wake_requested") == [] and gw.notifier.sent == []
    await handle(gw, person_message(11, "where were we?"))
    (wake,) = gw.events("wake_requested")
    assert wake["wake_seq"] == 11
