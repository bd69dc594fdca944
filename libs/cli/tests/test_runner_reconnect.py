"""A runner whose NATS goes away says so in one line per attempt, and stops at once."""

from __future__ import annotations

import os
import signal
import subprocess
import sys

import pytest

from seedline_devtools.testing import NatsEndpoint

pytestmark = [pytest.mark.servers]


def test_a_runner_without_nats_logs_one_line_per_attempt_and_stops_on_ctrl_c(
        nats_server: NatsEndpoint, tmp_path):
    if nats_server.process is None:
        pytest.skip("needs an embedded nats-server this test can kill")
    env = {**{k: v for k, v in os.environ.items() if not k.startswith("SEEDLINE_")},
           "SEEDLINE_NATS_URL": nats_server.url, "SEEDLINE_HOME": str(tmp_path)}
    runner = subprocess.Popen(
        [sys.executable, "-m", "seedline_cli", "runner", "--node-id", "lonely-1",
         "--engine", "scripted"], env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
        text=True)
    seen: list[str] = []
    try:
        for line in iter(runner.stdout.readline, ""):
            seen.append(line)
            if "runner_started" in line:
                break
        nats_server.process.kill()
        attempts = 0
        for line in iter(runner.stdout.readline, ""):
            seen.append(line)
            attempts += "nats_reconnect_failed" in line
            if attempts == 3:
                break
        runner.send_signal(signal.SIGINT)
        # Not waiting on a reconnect that cannot come: it used to take 5 to 14 s.
        rest, _ = runner.communicate(timeout=10)
        seen.append(rest)
    finally:
        if runner.poll() is None:
            runner.kill()
    output = "".join(seen)
    assert runner.returncode == 0, output
    assert "Traceback" not in output and "Something unexpected" not in output, output
    failed = [line for line in output.splitlines() if "nats_reconnect_failed" in line]
    assert len(failed) >= 3
    assert all("next_attempt_in_seconds=2.0" in line and "ConnectionRefusedError" in line
               for line in failed[1:]), failed
    assert "runner_stopped" in output
