"""The whole system in one event loop: four services against real servers, and
runners on the same NATS, so end-to-end tests can drive it like a person would."""

from __future__ import annotations

import asyncio
import json
from contextlib import AsyncExitStack
from dataclasses import dataclass, field

import nats
import pytest

from seedline_contracts import subjects
from seedline_continuity_resolver.app import create_app as create_resolver
from seedline_devtools.testing import request, running
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
                           engine: ScriptedEngine | None = None) -> ScriptedEngine:
        engine = engine or ScriptedEngine()
        nc = await nats.connect(self.settings.nats_url)
        runner = Runner(nc, node_id, label, {"scripted": engine}, presence_interval=1.0)
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
                out.append(body)
        return out


@pytest.fixture
async def system(settings):
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
        yield system
