"""Serving the web app's ASGI application with uvicorn, in the process's own event loop."""

from __future__ import annotations

import asyncio
import socket
from contextlib import nullcontext

import uvicorn

from .connections import guarded_protocol


class _QuietServer(uvicorn.Server):
    """Signals belong to the process (run_until_stopped), not to uvicorn."""

    def capture_signals(self):  # type: ignore[override]
        return nullcontext()


def _listen(host: str, port: int) -> socket.socket:
    try:
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        listening = socket.create_server((host, port), family=family)
    except OSError as exc:
        why = (exc.strerror or str(exc)).split(" (")[0]
        raise RuntimeError(
            f"cannot listen on {host}:{port} ({why}); stop what uses that port or set "
            "SEEDLINE_WEB_PORT (and SEEDLINE_WEB_HOST) to another"
        ) from None
    listening.setblocking(False)
    return listening


class HttpServer:
    def __init__(self, asgi, settings) -> None:
        self._asgi = asgi
        self._settings = settings
        self._server: uvicorn.Server | None = None
        self._serving: asyncio.Task | None = None

    async def start(self) -> None:
        s = self._settings
        # Bound here, not by uvicorn, which would exit the whole process on a busy port.
        listening = _listen(s.web_host, s.web_port)
        config = uvicorn.Config(
            self._asgi, log_config=None, access_log=False, lifespan="on",
            timeout_graceful_shutdown=5,
            http=guarded_protocol(s.web_header_timeout_seconds, s.web_max_connections_per_client))
        self._server = _QuietServer(config)
        self._serving = asyncio.create_task(self._server.serve(sockets=[listening]))
        while not self._server.started:
            if self._serving.done():
                self._serving.result()  # raises why it stopped
                raise RuntimeError("the web process stopped while starting")
            await asyncio.sleep(0.02)

    async def serve(self) -> None:
        """Until stopped. Shielded: cancelling this must not cut uvicorn short; stop() ends
        it in order."""
        if self._serving is not None:
            await asyncio.shield(self._serving)

    async def stop(self) -> None:
        if self._server is not None:
            self._server.should_exit = True
        if self._serving is not None:
            await asyncio.gather(self._serving, return_exceptions=True)

    @property
    def port(self) -> int | None:
        if self._server and self._server.servers:
            return self._server.servers[0].sockets[0].getsockname()[1]
        return None
