"""The contract's processes run side by side on one machine with only its variables set
(CONTRACT 1.2, Processes): each side port defaults to any free port, so a port another
program holds (9100 is node_exporter's default, and was every service's) stops nothing."""

from __future__ import annotations

import asyncio
import json
import os
import socket
import subprocess
import sys
import urllib.request
from pathlib import Path

import nats
import pytest

from seedline_cli.status_checks import gather
from seedline_contracts import subjects
from seedline_devtools.embedded import free_port
from seedline_devtools.processes import die_with_parent, stop_processes
from seedline_devtools.testing import NatsEndpoint, request

pytestmark = [pytest.mark.servers]

BIN = Path(sys.executable).parent
SERVICES = ["timeline-writer", "continuity-resolver", "seed-composer", "runner-gateway"]
WEB = "seedline-web"
OLD_FIXED_PORT = 9100


def _hold(port: int) -> socket.socket | None:
    """Listen on ``port`` if it is free; when something else holds it, it is taken already."""
    sock = socket.socket()
    try:
        sock.bind(("127.0.0.1", port))
        sock.listen(1)
        return sock
    except OSError:
        sock.close()
        return None


async def _until(probe, timeout: float):
    """Like wait_until, but a failed assertion (a process died) ends the wait at once."""
    deadline = asyncio.get_running_loop().time() + timeout
    while asyncio.get_running_loop().time() < deadline:
        if found := await probe():
            return found
        await asyncio.sleep(0.25)
    raise AssertionError(f"not every process answered discovery within {timeout:g} s")


def _status(url: str) -> int:
    try:
        with urllib.request.urlopen(url, timeout=3) as resp:
            return resp.status
    except Exception:
        return 0


async def test_four_services_and_the_web_run_side_by_side_while_9100_is_taken(
        nats_server: NatsEndpoint, database_url: str, tmp_path: Path):
    holder = _hold(OLD_FIXED_PORT)
    # Only the contract's variables; the web's own port is where people reach it, so it is
    # given (its default, 8080, may be anyone's on a shared machine).
    env = {k: v for k, v in os.environ.items() if not k.startswith("SEEDLINE_")}
    env.update(SEEDLINE_NATS_URL=nats_server.url, SEEDLINE_DATABASE_URL=database_url)
    web_port = free_port()
    procs: dict[str, subprocess.Popen] = {}
    try:
        for name in SERVICES + [WEB]:
            extra = {"SEEDLINE_WEB_PORT": str(web_port)} if name == WEB else {}
            procs[name] = subprocess.Popen(
                [str(BIN / name)], env={**env, **extra}, cwd=tmp_path,
                stdout=open(tmp_path / f"{name}.log", "wb"), stderr=subprocess.STDOUT,
                preexec_fn=die_with_parent)
        nc = await nats.connect(nats_server.url)
        try:
            async def everyone_announced():
                dead = {n: p.returncode for n, p in procs.items() if p.poll() is not None}
                assert not dead, {n: (c, (tmp_path / f"{n}.log").read_text()[-1500:])
                                  for n, c in dead.items()}
                pings = await gather(nc, "$SRV.PING", 0.5)
                return pings if {p["name"] for p in pings} >= set(SERVICES) | {WEB} else None

            pings = await _until(everyone_announced, 60)
            urls = {p["name"]: p["metadata"]["http_url"] for p in pings}
            ports = {int(u.rsplit(":", 1)[1]) for n, u in urls.items() if n != WEB}
            assert len(ports) == len(SERVICES) and OLD_FIXED_PORT not in ports, urls
            for name in SERVICES:
                assert await asyncio.to_thread(_status, urls[name] + "/readyz") == 200, name
            assert urls[WEB] == f"http://127.0.0.1:{web_port}"
            assert await asyncio.to_thread(_status, urls[WEB] + "/healthz") == 200
            reply = await request(nc, subjects.API_TIMELINE_READ, {
                "instance_id": "bd43f4de", "repo": "apps/chess-academy",
                "session_id": "csess_none"})
            assert reply["ok"] is True, json.dumps(reply)
        finally:
            await nc.close()
        assert all(p.poll() is None for p in procs.values())
    finally:
        stop_processes(procs.values())
        if holder is not None:
            holder.close()
