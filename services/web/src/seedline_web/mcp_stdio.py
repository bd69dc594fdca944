"""MCP over stdio (`seedline mcp --instance X`): the same tools as /mcp, for one
instance named on the command line, talking to NATS directly. stdout carries the
protocol, so logs go to stderr only."""

from __future__ import annotations

import asyncio
import os
import signal
import sys

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

        server = asyncio.create_task(build_server(tenant_of).run_stdio_async())
        stopped = await _until_signalled(server)
    finally:
        await nc.close()
    if stopped:
        # The MCP SDK reads stdin in a worker thread, and nothing interrupts a thread: while
        # stdin stays open (a terminal's does) the server would wait for its next line for
        # ever, and so would the process. Everything of ours is closed by now.
        sys.stdout.flush()
        os._exit(0)


async def _until_signalled(server: asyncio.Task) -> bool:
    """Wait for the server to end (its stdin closed), or for Ctrl-C or SIGTERM: True then."""
    loop = asyncio.get_running_loop()
    signalled = asyncio.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, signalled.set)
    waiting = asyncio.create_task(signalled.wait())
    await asyncio.wait({server, waiting}, return_when=asyncio.FIRST_COMPLETED)
    waiting.cancel()
    if server.done():
        server.result()
        return False
    return True
