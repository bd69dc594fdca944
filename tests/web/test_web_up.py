"""`seedline up` starts the web process and prints where the HTTP API, the console and
MCP over HTTP answer; those addresses answer."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

import pytest

from seedline_devtools.embedded import free_port

pytestmark = [pytest.mark.servers, pytest.mark.slow]


def test_up_starts_the_web_process_and_prints_its_addresses(tmp_path):
    folder = Path(tempfile.mkdtemp(prefix="seedline-web-up-"))
    web_port = free_port()
    env = {**os.environ, "SEEDLINE_HOME": str(folder / "home"), "PYTHONUNBUFFERED": "1",
           "SEEDLINE_WEB_PORT": str(web_port)}
    env.pop("SEEDLINE_NATS_URL", None)
    env.pop("SEEDLINE_DATABASE_URL", None)
    up = subprocess.Popen(
        [sys.executable, "-m", "seedline_cli", "up", "--no-runner", "--nats-port",
         str(free_port()), "--monitor-port", str(free_port())],
        cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    lines: list[str] = []
    try:
        deadline = time.monotonic() + 120
        while not any(line.startswith("MCP over HTTP:") for line in lines):
            line = up.stdout.readline()
            assert line and time.monotonic() < deadline, "".join(lines)
            lines.append(line)
        base = f"http://127.0.0.1:{web_port}"
        text = "".join(lines)
        assert f"HTTP API: {base}/v1" in text and f"{base}/openapi.json" in text
        assert f"Console: {base}/console" in text
        assert f"MCP over HTTP: {base}/mcp" in text and "mcp --instance demo" in text
        assert "tokens create --instance demo" in text
        with urllib.request.urlopen(f"{base}/healthz", timeout=5) as resp:
            assert resp.status == 200
        with urllib.request.urlopen(f"{base}/console", timeout=5) as resp:
            assert "Log in" in resp.read().decode()
    finally:
        up.send_signal(signal.SIGINT)
        try:
            up.wait(60)
        finally:
            if up.poll() is None:
                up.kill()
            shutil.rmtree(folder, ignore_errors=True)
    assert up.returncode == 0, "".join(lines) + up.stdout.read()
