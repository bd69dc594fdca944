"""The processes `seedline up` runs: which exist, how they start, how they stop."""

from __future__ import annotations

import asyncio
import importlib
import os
import shutil
import signal
import socket
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

from seedline_cli.scripts import bin_dir
from seedline_contracts.times import now_text
from seedline_devtools.embedded import free_port
from seedline_devtools.processes import die_with_parent

SERVICES = (
    "timeline-writer", "continuity-resolver", "seed-composer", "runner-gateway", "seedline-web",
)
# The HTTP API, console and MCP over HTTP: /healthz and /readyz are on its own port.
WEB = "seedline-web"
DEFAULT_WEB_PORT = 8080
DEMO_RUNNER = "demo-runner"
STOP_GRACE_SECONDS = 10.0


def runner_available() -> bool:
    try:
        return hasattr(importlib.import_module("seedline_runner"), "run_runner")
    except ImportError:
        return False


def seedline_argv() -> list[str]:
    script = bin_dir() / "seedline"
    return [str(script)] if script.exists() else [sys.executable, "-m", "seedline_cli"]


def command_hint() -> str:
    """How a person types `seedline` in another terminal of this machine."""
    script = bin_dir() / "seedline"
    if shutil.which("seedline") == str(script):
        return "seedline"
    try:
        return "./" + str(script.relative_to(Path.cwd()))
    except ValueError:
        return str(script)


def port_is_free(port: int) -> bool:
    with socket.socket() as sock:
        # nats-server sets SO_REUSEADDR too, so a port in TIME_WAIT is still usable.
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


@dataclass
class Child:
    name: str
    argv: list[str]
    log_path: Path
    proc: asyncio.subprocess.Process | None = field(default=None, repr=False)
    ready: bool = False
    # A service serves /healthz, /readyz and /metrics; on one machine each needs its own port.
    http_port: int | None = None
    extra_env: dict[str, str] = field(default_factory=dict)
    env: dict[str, str] = field(default_factory=dict, repr=False)  # as last started

    @property
    def health_url(self) -> str | None:
        return None if self.http_port is None else f"http://127.0.0.1:{self.http_port}/readyz"

    async def start(self, env: dict[str, str]) -> None:
        self.env = env
        env = {**env, **self.extra_env}
        if self.http_port is not None:
            env = {**env, "SEEDLINE_HTTP_HOST": "127.0.0.1",
                   "SEEDLINE_HTTP_PORT": str(self.http_port)}
        with open(self.log_path, "ab") as log:
            log.write(f"--- started by seedline up at {now_text()}\n".encode())
            log.flush()
            self.proc = await asyncio.create_subprocess_exec(
                *self.argv,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                env=env,
                # Its own process group: a Ctrl-C in the terminal reaches `seedline up`
                # only, which then stops everything in order.
                start_new_session=True,
                preexec_fn=die_with_parent if sys.platform.startswith("linux") else None,
            )

    async def start_again(self) -> None:
        self.ready = False
        await self.start(self.env)

    @property
    def pid(self) -> int | None:
        return None if self.proc is None else self.proc.pid

    def ended(self) -> str | None:
        return None if self.running or self.proc is None else exit_text(self.proc.returncode)

    @property
    def running(self) -> bool:
        return self.proc is not None and self.proc.returncode is None

    @property
    def exit_code(self) -> int | None:
        return None if self.proc is None else self.proc.returncode

    def signal(self, sig: int) -> None:
        if self.running:
            try:
                os.killpg(self.proc.pid, sig)
            except ProcessLookupError:
                pass

    async def stop(self, grace: float = STOP_GRACE_SECONDS) -> None:
        if not self.running:
            return
        self.signal(signal.SIGTERM)
        try:
            await asyncio.wait_for(self.proc.wait(), grace)
        except TimeoutError:
            self.signal(signal.SIGKILL)
            await self.proc.wait()

    def log_tail(self, lines: int = 8) -> list[str]:
        try:
            text = self.log_path.read_text(encoding="utf-8", errors="replace")
        except OSError:
            return []
        return text.splitlines()[-lines:]


def exit_text(code: int | None) -> str:
    if code is None:
        return "ended"
    return f"killed by signal {-code}" if code < 0 else f"exit code {code}"


def service_child(name: str, logs: Path, web_port: int = DEFAULT_WEB_PORT) -> Child:
    port = web_port if name == WEB else free_port()
    return Child(name, [str(bin_dir() / name)], logs / f"{name}.log", http_port=port)


def writer_children(logs: Path, partitions: int) -> list[Child]:
    """One timeline-writer per ingest partition (CONTRACT.md 2.2): partition 0 keeps the
    plain name, the others are timeline-writer-p1, -p2, ..."""
    children = []
    for partition in range(partitions):
        child = service_child("timeline-writer", logs)
        if partition:
            child.name = f"timeline-writer-p{partition}"
            child.log_path = logs / f"{child.name}.log"
        child.extra_env = {"SEEDLINE_INGEST_PARTITION": str(partition)}
        children.append(child)
    return children


def runner_child(logs: Path) -> Child:
    argv = seedline_argv() + [
        "runner",
        "--node-id",
        DEMO_RUNNER,
        "--label",
        "Demo runner",
        "--engine",
        "scripted",
    ]
    return Child(DEMO_RUNNER, argv, logs / f"{DEMO_RUNNER}.log")
