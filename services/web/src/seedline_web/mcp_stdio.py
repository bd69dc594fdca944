"""MCP over stdio (`seedline mcp --instance X`): the same tools as /mcp, for one
instance named on the command line, talking to NATS directly. stdout carries the
protocol, so logs go to stderr only."""

from __future__ import annotations

import asyncio

from seedline_platform import natsio
from seedline_platform.logging import configure_logging
from seedline_platform.sealing import sealer_for
from seedline_platform.settings import Settings

from .backend import Backend
from .mcp_tools import build_server
from .tenant import Tenant


CONNECT_TIMEOUT = 6.0


async def serve_stdio(settings: Settings, instance_id: str) -> None:
    configure_logging("warning", "seedline-mcp")
    try:
        nc = await asyncio.wait_for(natsio.connect(settings.nats_servers, "seedline-mcp"),
                                    CONNECT_TIMEOUT)
    except (asyncio.TimeoutError, OSError) as exc:
        raise ConnectionError(f"cannot reach NATS at {settings.nats_url}") from exc
    try:
        js = nc.jetstream()
        backend = Backend(nc, js, settings.open_timeout_seconds, sealer_for(js, settings))
        tenant = Tenant(backend, instance_id)

        async def tenant_of() -> Tenant:
            return tenant

        await build_server(tenant_of).run_stdio_async()
    finally:
        await nc.close()
