"""The whole system in one event loop: four services against real servers, and
runners on the same NATS, so end-to-end tests can drive it like a person would.

``SEEDLINE_TEST_COPIES=2`` runs every service as two copies on the same durable
consumers and the same database, as an operator scaling out runs them (the
``system`` fixture of every end-to-end test); ``system_copies`` always runs two.
"""

from __future__ import annotations

import asyncio
import json
import os
from contextlib import AsyncExitStack
from dataclasses import dataclass, field

import nats
import pytest

from seedline_contracts import subjects
from seedline_continuity_resolver.app import create_app as create_resolver
from seedline_devtools.testing import request, running, with_plan_opened
from seedline_runner.checkouts import Checkouts
from seedline_runner.engines.scripted import ScriptedEngine
from seedline_runner.runner import Runner
from seedline_runner_gateway.app import create_app as create_gateway
from seedline_seed_composer.app import create_app as create_composer
from seedline_timeline_writer.app import create_app as create_writer


@dataclass
class System:
    settings: object
    nc: object
    stack: AsyncExitStack
    composer: object = None
    gateway: object = None
    runners: dict = field(default_factory=dict)
    _gateway_running: object = None
    writer: object = None
    resolver: object = None
    # Further copies of each service (SEEDLINE_TEST_COPIES > 1), beside the ones above.
    copies: list = field(default_factory=list)

    @property
    def apps(self) -> list:
        return [self.writer, self.resolver, self.composer, self.gateway]

    async def request(self, subject: str, body, timeout: float = 15.0) -> dict:
        return await request(self.nc, subject, body, timeout)

    async def open(self, **body) -> dict:
        base = {"instance_id": "bd43f4de", "repo": "apps/chess-academy", "engine": "scripted",
                "node_id": "mac-mini-1"}
        base.update(body)
        return await self.request(subjects.API_SESSIONS_OPEN, base, timeout=20)

    async def append(self, n: int, **over) -> int:
        body = {"entry_id": f"e-{n}", "instance_id": "bd43f4de", "repo": "apps/chess-academy",
                "session_id": "csess_old", "kind": "chat_assistant", "content": f"entry number {n}",
                "at": "2026-08-17T10:00:00Z", "engine": "scripted"}
        body.update(over)
        reply = await self.request(subjects.API_TIMELINE_APPEND, body)
        assert reply["ok"], reply
        return reply["seq"]

    async def start_runner(self, node_id: str = "mac-mini-1", label: str = "Mac mini",
                           engine: ScriptedEngine | None = None,
                           checkouts: Checkouts = Checkouts()) -> ScriptedEngine:
        engine = engine or ScriptedEngine()
        nc = await nats.connect(self.settings.nats_url)
        runner = Runner(nc, node_id, label, {"scripted": engine}, presence_interval=1.0,
                        checkouts=checkouts)
        await runner.start()
        self.runners[node_id] = (runner, nc)

        async def close():
            await runner.stop()
            await nc.close()

        self.stack.push_async_callback(close)
        return engine

    async def restart_gateway(self, while_down=None) -> None:
        """Stop the runner-gateway, run `while_down`, then start a fresh copy."""
        await self._gateway_running.__aexit__(None, None, None)
        if while_down is not None:
            await while_down()
        self._gateway_running = running(create_gateway(self.settings))
        self.gateway = await self._gateway_running.__aenter__()

    def hosted(self) -> dict[str, list[str]]:
        """What each machine says it hosts now (its own list, not the platform's)."""
        return {node: runner.live_conversations for node, (runner, _) in self.runners.items()}

    async def stop_runner(self, node_id: str) -> None:
        runner, nc = self.runners.pop(node_id)
        await runner.stop()
        await nc.close()

    async def wait_for(self, probe, timeout: float = 15.0):
        deadline = asyncio.get_running_loop().time() + timeout
        while True:
            value = await probe()
            if value:
                return value
            if asyncio.get_running_loop().time() > deadline:
                raise AssertionError("condition not met in time")
            await asyncio.sleep(0.05)

    async def session_events(self, event_type: str) -> list[dict]:
        js = self.nc.jetstream()
        info = await js.stream_info(subjects.SESSIONS_STREAM)
        out = []
        for seq in range(1, info.state.last_seq + 1):
            msg = await js.get_msg(subjects.SESSIONS_STREAM, seq)
            body = json.loads(msg.data)
            if body["type"] == event_type:
                out.append(await with_plan_opened(body, self.sealer))
        return out

    @property
    def sealer(self):
        from seedline_platform.sealing import KvKeyStore, Sealer

        return Sealer(KvKeyStore(self.nc.jetstream(), 1))


def _copies() -> int:
    return max(1, int(os.environ.get("SEEDLINE_TEST_COPIES", "1")))


@pytest.fixture
async def system(settings):
    async for system in _system(settings, _copies()):
        yield system


@pytest.fixture
async def system_copies(settings):
    """Two copies of every service, whatever SEEDLINE_TEST_COPIES says."""
    async for system in _system(settings, max(2, _copies())):
        yield system


async def _system(settings, copies: int):
    async with AsyncExitStack() as stack:
        writer = await stack.enter_async_context(running(create_writer(settings)))
        resolver = await stack.enter_async_context(running(create_resolver(settings)))
        composer = await stack.enter_async_context(running(create_composer(settings)))
        gateway_running = running(create_gateway(settings))
        gateway = await gateway_running.__aenter__()
        nc = await nats.connect(settings.nats_url)
        stack.push_async_callback(nc.close)
        system = System(settings, nc, stack, composer, gateway, _gateway_running=gateway_running,
                        writer=writer, resolver=resolver)

        async def stop_gateway():
            await system._gateway_running.__aexit__(None, None, None)

        stack.push_async_callback(stop_gateway)
        for _ in range(copies - 1):
            for create in (create_writer, create_resolver, create_composer, create_gateway):
                system.copies.append(await stack.enter_async_context(running(create(settings))))
        yield system
        # Every copy stops taking work at once (each waits out a fetch in flight), before
        # the stack stops them one by one.
        await asyncio.gather(*(app.quiesce() for app in [*system.apps, *system.copies]))
