"""/metrics, /healthz and /readyz on a small HTTP port of each service.

Three GET routes and nothing else, so a plain asyncio server does the job without
a web framework in every service image. /healthz says the process is alive and
holds its NATS connection; /readyz also says it has started and its checks pass
(docker compose gates start-up on it); /metrics is the Prometheus text format, with what
must be read from elsewhere (consumer lag) read as it is asked for, within
METRICS_READ_SECONDS.

It is a side port (CONTRACT.md, Processes): by default any free port, so any number of
services run side by side on one machine, and the port taken is logged. A port the
operator set (SEEDLINE_HTTP_PORT) that is taken is logged as an error naming the
variable and tried again now and then; the service works on without it meanwhile.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import Awaitable, Callable

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest

from .logging import get_logger

log = get_logger(__name__)

Check = Callable[[], Awaitable[dict[str, bool]]]
METRICS_READ_SECONDS = 2.0  # past this a scrape gets the values read before
_MAX_REQUEST_BYTES = 8192
PORT_VARIABLE = "SEEDLINE_HTTP_PORT"
RETRY_SECONDS = 10.0


class HealthServer:
    def __init__(
        self, host: str, port: int, registry: CollectorRegistry, alive: Check, ready: Check,
        before_metrics: Callable[[], Awaitable[None]] | None = None,
    ) -> None:
        self._host = host
        self._port = port
        self._registry = registry
        self._alive = alive
        self._ready = ready
        self._before_metrics = before_metrics
        self._server: asyncio.Server | None = None
        self._retry: asyncio.Task | None = None

    @property
    def port(self) -> int | None:
        if self._server is None or not self._server.sockets:
            return None
        return self._server.sockets[0].getsockname()[1]

    @property
    def url(self) -> str | None:
        return None if self.port is None else f"http://{self._host}:{self.port}"

    async def start(self) -> None:
        """Never raises: a side port must not stop the service (CONTRACT.md)."""
        problem = await self._bind()
        if problem is None:
            return
        log.error("health_http_port_taken", port=self._port, error=problem, message=(
            f"{PORT_VARIABLE}={self._port}: {self._host}:{self._port} cannot be used "
            f"({problem}); /metrics, /healthz and /readyz are off until it can (tried again "
            f"every {RETRY_SECONDS:g} s). Free that port, or unset {PORT_VARIABLE} to take "
            "any free one. The service works on meanwhile."))
        self._retry = asyncio.create_task(self._bind_later())

    async def _bind(self) -> str | None:
        try:
            self._server = await asyncio.start_server(self._serve, self._host, self._port)
        except OSError as exc:
            return (exc.strerror or str(exc)).split(" (")[0]
        log.info("health_http_listening", url=self.url, port=self.port,
                 chosen="any free port" if self._port == 0 else PORT_VARIABLE)
        return None

    async def _bind_later(self) -> None:
        while True:
            await asyncio.sleep(RETRY_SECONDS)
            if await self._bind() is None:
                return

    async def stop(self) -> None:
        if self._retry is not None:
            self._retry.cancel()
            await asyncio.gather(self._retry, return_exceptions=True)
            self._retry = None
        if self._server is not None:
            self._server.close()
            with contextlib.suppress(Exception):
                await self._server.wait_closed()
            self._server = None

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 5.0)
            status, content_type, body = await self._answer(head[:_MAX_REQUEST_BYTES])
        except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, TimeoutError):
            status, content_type, body = 400, "text/plain", b"bad request\n"
        except Exception:
            log.exception("health_http_failed")
            status, content_type, body = 500, "text/plain", b"internal error\n"
        reason = {200: "OK", 400: "Bad Request", 404: "Not Found", 405: "Method Not Allowed",
                  500: "Internal Server Error", 503: "Service Unavailable"}[status]
        writer.write(
            f"HTTP/1.1 {status} {reason}\r\nContent-Type: {content_type}\r\n"
            f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n".encode() + body
        )
        with contextlib.suppress(Exception):
            await writer.drain()
            writer.close()

    async def _answer(self, head: bytes) -> tuple[int, str, bytes]:
        parts = head.split(b"\r\n", 1)[0].split()
        if len(parts) < 2:
            return 400, "text/plain", b"bad request\n"
        method, path = parts[0], parts[1].split(b"?", 1)[0]
        if method not in (b"GET", b"HEAD"):
            return 405, "text/plain", b"only GET\n"
        if path == b"/metrics":
            if self._before_metrics is not None:
                try:
                    await asyncio.wait_for(self._before_metrics(), METRICS_READ_SECONDS)
                except TimeoutError:
                    log.warning("metrics_read_slow", seconds=METRICS_READ_SECONDS)
            return 200, CONTENT_TYPE_LATEST, generate_latest(self._registry)
        if path in (b"/healthz", b"/readyz"):
            checks = await (self._alive() if path == b"/healthz" else self._ready())
            ok = all(checks.values())
            body = json.dumps({"ok": ok, "checks": checks}).encode() + b"\n"
            return (200 if ok else 503), "application/json", body
        return 404, "text/plain", b"not found: try /healthz, /readyz or /metrics\n"
