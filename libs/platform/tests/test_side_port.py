"""The side port (/metrics, /healthz, /readyz) never stops a service (CONTRACT 1.2, Processes)."""

from __future__ import annotations

import asyncio
import socket
import urllib.request

from prometheus_client import CollectorRegistry, Gauge
from structlog.testing import capture_logs

from seedline_platform.health_http import HealthServer
from seedline_platform.settings import Settings


async def _ok() -> dict[str, bool]:
    return {"started": True}


def _server(port: int) -> HealthServer:
    return HealthServer("127.0.0.1", port, CollectorRegistry(), _ok, _ok)


def _get(url: str) -> int:
    with urllib.request.urlopen(url, timeout=5) as resp:
        return resp.status


def test_the_side_port_is_any_free_port_unless_set():
    assert Settings.from_env({}).http_port == 0
    assert Settings.from_env({"SEEDLINE_HTTP_PORT": "9100"}).http_port == 9100


async def test_left_unset_it_takes_a_free_port_and_logs_which():
    server = _server(0)
    with capture_logs() as logs:
        await server.start()
    try:
        assert server.port and server.port > 0
        assert await asyncio.to_thread(_get, f"{server.url}/readyz") == 200
        listening = [e for e in logs if e["event"] == "health_http_listening"]
        assert listening and listening[0]["port"] == server.port
    finally:
        await server.stop()


async def test_two_copies_left_unset_run_side_by_side():
    first, second = _server(0), _server(0)
    await first.start()
    await second.start()
    try:
        assert first.port != second.port
    finally:
        await first.stop()
        await second.stop()


async def test_a_taken_port_set_by_the_operator_is_an_error_naming_the_variable_not_a_stop():
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen(1)
        taken = holder.getsockname()[1]
        server = _server(taken)
        with capture_logs() as logs:
            await server.start()  # does not raise
        try:
            assert server.port is None and server.url is None
            errors = [e for e in logs if e["log_level"] == "error"]
            assert errors and f"SEEDLINE_HTTP_PORT={taken}" in errors[0]["message"]
        finally:
            await server.stop()


def _scrape(url: str) -> str:
    with urllib.request.urlopen(url + "/metrics", timeout=5) as resp:
        return resp.read().decode()


async def test_what_metrics_reads_from_elsewhere_is_read_as_it_is_asked_for():
    registry = CollectorRegistry()
    lag = Gauge("lag_messages", "lag", registry=registry)
    reads = []

    async def read_lag() -> None:
        reads.append(1)
        lag.set(len(reads) * 10)

    server = HealthServer("127.0.0.1", 0, registry, _ok, _ok, before_metrics=read_lag)
    await server.start()
    try:
        await asyncio.sleep(0.2)
        assert reads == []  # nothing is read while nobody asks
        assert "lag_messages 10.0" in await asyncio.to_thread(_scrape, server.url)
        assert "lag_messages 20.0" in await asyncio.to_thread(_scrape, server.url)
        assert await asyncio.to_thread(_get, f"{server.url}/healthz") == 200
        assert len(reads) == 2  # a health check reads nothing
    finally:
        await server.stop()


async def test_a_read_that_hangs_gives_the_values_read_before_within_its_bound(monkeypatch):
    monkeypatch.setattr("seedline_platform.health_http.METRICS_READ_SECONDS", 0.3)
    registry = CollectorRegistry()
    Gauge("lag_messages", "lag", registry=registry).set(7)

    async def hangs() -> None:
        await asyncio.sleep(60)

    server = HealthServer("127.0.0.1", 0, registry, _ok, _ok, before_metrics=hangs)
    await server.start()
    try:
        with capture_logs() as logs:
            page = await asyncio.to_thread(_scrape, server.url)
        assert "lag_messages 7.0" in page
        assert any(e["event"] == "metrics_read_slow" for e in logs)
    finally:
        await server.stop()
