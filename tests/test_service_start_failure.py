"""A service whose start fails exits, so its supervisor (compose's restart policy, `seedline
up`) starts it again. Seen in a container run: Postgres took the TCP connection and answered
nothing, the start gave up, and the process then hung for ever instead of exiting."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from seedline_devtools.embedded import free_port
from seedline_devtools.testing import NatsEndpoint

pytestmark = [pytest.mark.servers]

BIN = Path(sys.executable).parent
# The two that hung: one on the services' shared base (all four start alike) and the web.
SERVICES = ["seed-composer", "seedline-web"]


@pytest.fixture
def silent_postgres():
    """A port that accepts connections and never says a word."""
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(64)
        yield f"postgresql://seedline:seedline@127.0.0.1:{listener.getsockname()[1]}/seedline"


@pytest.mark.parametrize("service", SERVICES)
def test_a_service_that_cannot_reach_postgres_exits_and_says_why(
        service: str, nats_server: NatsEndpoint, silent_postgres: str, tmp_path: Path):
    env = {**os.environ, "SEEDLINE_NATS_URL": nats_server.url,
           "SEEDLINE_NATS_MONITOR_URL": nats_server.monitor_url,
           "SEEDLINE_DATABASE_URL": silent_postgres, "SEEDLINE_HOME": str(tmp_path),
           "SEEDLINE_HTTP_PORT": "0", "SEEDLINE_WEB_PORT": str(free_port()),
           "SEEDLINE_LOG_LEVEL": "warning"}
    try:
        ended = subprocess.run([str(BIN / service)], env=env, capture_output=True, text=True,
                               timeout=60)
    except subprocess.TimeoutExpired:
        pytest.fail(f"{service} was still running 60 s after its start failed")
    assert ended.returncode == 1, ended.stderr[-2000:]
    assert f"{service}: couldn't get a connection" in ended.stderr, ended.stderr[-2000:]
