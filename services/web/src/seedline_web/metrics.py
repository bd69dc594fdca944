"""The web process's Prometheus series (DESIGN.md rule 10): requests by route and
status, how long they took, and the notification streams open now."""

from __future__ import annotations

import time

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram
from starlette.types import ASGIApp, Message, Receive, Scope, Send

STREAMING = "text/event-stream"


class WebMetrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        self.requests = Counter("seedline_web_requests_total",
                                "HTTP requests answered, by route and status.",
                                ["route", "status"], registry=self.registry)
        self.seconds = Histogram("seedline_web_request_seconds",
                                 "Time to answer an HTTP request, streams left out.", ["route"],
                                 registry=self.registry,
                                 buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5,
                                          10, 30, 60))
        self.streams = Gauge("seedline_web_notification_streams",
                             "Notification streams (Server-Sent Events) open now.",
                             registry=self.registry)


class Measured:
    """Counts every answer under its route's template (`/v1/conversations/{session_id}/stop`),
    so ids never become label values."""

    def __init__(self, app: ASGIApp, metrics: WebMetrics) -> None:
        self.app = app
        self.metrics = metrics

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        status = 500
        streaming = False

        async def measuring_send(message: Message) -> None:
            nonlocal status, streaming
            if message["type"] == "http.response.start":
                status = message["status"]
                headers = dict(message.get("headers") or [])
                streaming = headers.get(b"content-type", b"").startswith(STREAMING.encode())
            await send(message)

        try:
            await self.app(scope, receive, measuring_send)
        finally:
            route = getattr(scope.get("route"), "path", None) or (
                "/mcp" if scope.get("path") == "/mcp" else "unmatched")
            self.metrics.requests.labels(route, str(status)).inc()
            if not streaming:
                self.metrics.seconds.labels(route).observe(time.perf_counter() - started)
