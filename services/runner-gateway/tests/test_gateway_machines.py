"""Machines meet the gateway: a launch a machine's runner is too old for is refused with a
sentence naming the machine and the release to install; an operator's removal stops what the
machine runs and tells its people. On fakes, no servers."""

from __future__ import annotations

from seedline_contracts.runner import FIRST_RELEASE, CARRY_PROTOCOL
from seedline_contracts.worktrees import SavedTree, SavedWork
from seedline_core import lifecycle as lc
from seedline_core.notices import wording_violations
from seedline_runner_gateway.api import GatewayApi


def saved_elsewhere() -> SavedWork:
    tree = SavedTree(base_commit="a" * 40, branch="main", clean=True, snapshot=None,
                     left_out=[], over_limit=False, engine_record=None)
    return SavedWork(session_id="csess_before", node_id="mac", label="Mac mini",
                     engine="scripted", worktree=tree)


async def launch_carrying(gw, session_id: str = "csess_a", **plan) -> None:
    await gw.requested(session_id, "laptop")
    await gw.launcher.launch(gw.composed(session_id, "laptop", carry=saved_elsewhere(), **plan))
    await gw.fold()


async def test_a_launch_carrying_a_tree_is_refused_to_a_runner_too_old_for_it(gw):
    gw.online("laptop", label="Laptop", protocol=2, version="0.1.0")
    await launch_carrying(gw)
    (failed,) = gw.events("open_failed")
    message = failed["error"]["message"]
    assert failed["error"]["code"] == "launch_refused"
    assert message.startswith("Your Laptop runs Seedline's runner 0.1.0, which cannot take "
                              "the working tree this conversation brings from another machine")
    assert f"install Seedline's runner {FIRST_RELEASE[CARRY_PROTOCOL]} or later on laptop" \
        in message
    assert wording_violations(message) == []
    assert gw.machines.launches == []  # never sent, so never silently dropped there
    assert (await gw.state.held("csess_a")).state is lc.State.FAILED


async def test_a_runner_that_does_not_say_its_version_is_named_too_old_all_the_same(gw):
    gw.online("laptop", label="Laptop", protocol=1)
    await launch_carrying(gw)
    (failed,) = gw.events("open_failed")
    assert "too old to say its version" in failed["error"]["message"]


async def test_a_launch_with_nothing_to_carry_still_goes_to_an_older_runner(gw):
    gw.online("laptop", label="Laptop", protocol=2, version="0.1.0")
    await gw.open("csess_a", "laptop")
    assert [node for node, _ in gw.machines.launches] == ["laptop"]
    assert gw.events("open_failed") == []


async def test_a_runner_of_the_carry_protocol_takes_the_carry(gw):
    gw.online("laptop", label="Laptop", protocol=CARRY_PROTOCOL, version="0.2.0")
    await launch_carrying(gw)
    ((node, request),) = gw.machines.launches
    assert node == "laptop" and request.carry is not None and request.carry.from_node == "mac"


async def test_a_wake_refused_for_a_runner_too_old_tells_the_person(gw):
    gw.online("laptop", label="Laptop", protocol=2, version="0.1.0")
    await launch_carrying(gw, wake_seq=7)
    ((instance, notice),) = gw.notifier.sent
    assert gw.notifier.kinds() == ["launch_refused"] and notice.node_id == "laptop"
    assert notice.text.startswith("Your Laptop runs Seedline's runner 0.1.0")
    assert notice.text.endswith("Your message is kept in the timeline, but nothing was "
                                "started for it.")


async def test_removing_a_machine_stops_what_it_runs_and_tells_its_people(gw):
    gw.online("laptop", label="Laptop")
    gw.online("mac")
    await gw.open("csess_a", "laptop")
    reply = await gw.ask(GatewayApi.remove_machine, {"node_id": "laptop", "by": "ops"})
    assert reply == {"stopped": ["csess_a"], "ok": True}
    assert [(e["session_id"], e["reason"]) for e in gw.events("stopped")] == [
        ("csess_a", "machine_removed")]
    assert ("laptop", "csess_a", "machine_removed") in gw.machines.stops
    ((_, notice),) = gw.notifier.sent
    assert gw.notifier.kinds() == ["machine_removed"]
    assert notice.text.startswith("Your Laptop was removed from Seedline by an operator")
    assert wording_violations(notice.text) == []
    # Asked again (the operator's tool asks once more after the revocation): nothing left.
    assert await gw.ask(GatewayApi.remove_machine, {"node_id": "laptop"}) == {
        "stopped": [], "ok": True}


async def test_removing_a_machine_needs_a_valid_name(gw):
    reply = await gw.ask(GatewayApi.remove_machine, {"node_id": "a\x00b"})
    assert reply["error"]["code"] == "invalid_request"
