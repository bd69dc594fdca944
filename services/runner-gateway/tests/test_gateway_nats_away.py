"""A launch on its way while nats-server restarts: the gateway asks the machine again once
NATS is back and gets its answer, instead of telling the person their machine did not
answer; and when NATS stays away, what it says blames NATS, never the machine.

A real nats-server is killed and started again on the same port; the "machine" is a
responder on a connection of its own that reconnects like a runner does."""

from __future__ import annotations

import asyncio

import nats
import pytest

from seedline_contracts import subjects
from seedline_contracts.codec import encode
from seedline_contracts.runner import LaunchReply, LaunchRequest
from seedline_platform import natsio
from seedline_platform.sending import sending_as
from seedline_runner_gateway import machine_calls
from seedline_runner_gateway.machine_calls import MachineUnreachable, NatsAway, NatsMachines
from seedline_runner_gateway.routes import routes

pytestmark = [pytest.mark.servers, pytest.mark.timeout(120)]

NODE = "demo-runner"
REQUEST = LaunchRequest(session_id="csess_1", instance_id="demo", repo="apps/hello",
                        engine="scripted", resume=None, seed=None, instruction="Hi")


def _launching_row(settings):
    return next(r for r in routes(settings) if "launch" in str(r.sends))


async def _machine(url: str, asked: list[str]):
    """A machine that answers every launch it receives, as a runner does, and reconnects."""

    async def answer(msg) -> None:
        asked.append(msg.subject)
        await msg.respond(encode(LaunchReply(accepted=True, resumed_conversation=False,
                                             seeded=False)))

    nc = await nats.connect(url, max_reconnect_attempts=-1, reconnect_time_wait=0.2)
    await nc.subscribe(subjects.runner_subject(NODE, "launch"), cb=answer)
    return nc


async def test_a_launch_asked_while_nats_restarts_is_asked_again_and_answered(
        settings, nats_server):
    if nats_server.process is None:
        pytest.skip("needs the embedded nats-server, which this test kills and restarts")
    gateway = await natsio.connect(settings.nats_servers, "gateway-under-test")
    asked: list[str] = []
    machine = await _machine(nats_server.url, asked)
    try:
        with sending_as(_launching_row(settings)):
            machines = NatsMachines(gateway, timeout=2.0)
            nats_server.process.kill()
            launching = asyncio.create_task(machines.launch(NODE, REQUEST))
            await asyncio.sleep(1.5)
            nats_server.process.start()
            reply = await asyncio.wait_for(launching, 60)
    finally:
        await machine.close()
        await gateway.close()
    assert reply.accepted and asked


async def test_nats_away_longer_than_the_gateway_waits_blames_nats(settings, nats_server,
                                                                  monkeypatch):
    if nats_server.process is None:
        pytest.skip("needs the embedded nats-server, which this test kills")
    monkeypatch.setattr(machine_calls, "NATS_AWAY_SECONDS", 3.0)
    gateway = await natsio.connect(settings.nats_servers, "gateway-under-test")
    try:
        with sending_as(_launching_row(settings)):
            machines = NatsMachines(gateway, timeout=1.0)
            nats_server.process.kill()
            with pytest.raises(NatsAway):
                await machines.launch(NODE, REQUEST)
            nats_server.process.start()
            # Back, and nobody on that machine: that one is the machine's.
            for _ in range(100):
                if gateway.is_connected:
                    break
                await asyncio.sleep(0.1)
            await asyncio.sleep(1.5)  # past the window in which NATS counts as just back
            with pytest.raises(MachineUnreachable) as caught:
                await machines.launch(NODE, REQUEST)
    finally:
        await gateway.close()
    assert not isinstance(caught.value, NatsAway)
