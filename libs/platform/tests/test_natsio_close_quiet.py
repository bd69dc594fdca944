"""A connection closed on purpose (`seedline mcp` ending normally) is no warning."""

from __future__ import annotations

import pytest
from structlog.testing import capture_logs

from seedline_devtools.testing import NatsEndpoint
from seedline_platform import natsio

pytestmark = [pytest.mark.servers]


async def test_closing_a_connection_logs_no_disconnect_warning(nats_server: NatsEndpoint):
    nc = await natsio.connect([nats_server.url], "close-test")
    with capture_logs() as logs:
        await nc.close()
    assert not [e for e in logs if e["log_level"] == "warning"], logs
    assert [e["event"] for e in logs] == ["nats_closed"]


async def test_losing_the_server_is_still_a_warning(nats_server: NatsEndpoint):
    if nats_server.process is None:
        pytest.skip("needs an embedded nats-server this test can kill")
    import asyncio

    nc = await natsio.connect([nats_server.url], "lose-test")
    try:
        with capture_logs() as logs:
            nats_server.process.kill()
            for _ in range(100):
                if any(e["event"] == "nats_disconnected" for e in logs):
                    break
                await asyncio.sleep(0.05)
        assert any(e["event"] == "nats_disconnected" and e["log_level"] == "warning"
                   for e in logs), logs
    finally:
        await nc.close()
