"""Ctrl-C, or a lost connection, never shows a person a traceback: each long-running command
(`notices --follow`, `runner`, `capture`, `acp`, `mcp`, and `up` itself) is started against a
running `seedline up`, seen to be working, and interrupted with SIGINT as Ctrl-C does.

One test: every command needs the same running system, and one `seedline up` is most of the
time it takes."""

from __future__ import annotations

import json
import os
import queue
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import pytest

from seedline_cli import up_state
from seedline_devtools.embedded import free_port

pytestmark = [pytest.mark.slow, pytest.mark.servers]

READY_LINE = "Seedline is up."
# What Python and asyncio print when an error reaches no one.
TRACEBACK_SIGNS = ("Traceback (most recent call last)", "exception was never retrieved",
                   "Exception ignored", "Task was destroyed")


class Command:
    """A command running as a person runs it, its output read as it comes."""

    def __init__(self, argv: list[str], env: dict[str, str], cwd: Path) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "seedline_cli", *argv], env=env, cwd=cwd,
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self.lines: queue.Queue = queue.Queue()
        self.seen: list[str] = []
        self._readers = [threading.Thread(target=self._read, args=(stream,), daemon=True)
                         for stream in (self.proc.stdout, self.proc.stderr)]
        for reader in self._readers:
            reader.start()

    def _read(self, stream) -> None:
        for line in iter(stream.readline, ""):
            self.lines.put(line)
        self.lines.put(None)

    def send(self, message: dict) -> None:
        self.proc.stdin.write(json.dumps(message) + "\n")
        self.proc.stdin.flush()

    def wait_for(self, text: str, timeout: float = 120) -> None:
        deadline = time.monotonic() + timeout
        ended = 0
        while time.monotonic() < deadline:
            try:
                line = self.lines.get(timeout=0.5)
            except queue.Empty:
                continue
            if line is None:
                ended += 1
                if ended == len(self._readers):
                    raise AssertionError(f"ended before {text!r}:\n{self.output}")
                continue
            self.seen.append(line)
            if text in line:
                return
        raise AssertionError(f"no {text!r} within {timeout:g} s:\n{self.output}")

    def interrupt(self, timeout: float = 60) -> int:
        self.proc.send_signal(signal.SIGINT)
        return self.ended(timeout)

    def ended(self, timeout: float = 60) -> int:
        try:
            code = self.proc.wait(timeout)
        finally:
            if self.proc.poll() is None:
                self.proc.kill()
        for reader in self._readers:
            reader.join(10)
        while not self.lines.empty():
            line = self.lines.get()
            if line is not None:
                self.seen.append(line)
        return code

    @property
    def output(self) -> str:
        return "".join(self.seen)


def no_traceback(what: str, command: Command, code: int, failures: list[str]) -> None:
    shown = [sign for sign in TRACEBACK_SIGNS if sign in command.output]
    if shown or code not in (0, 130):
        failures.append(f"{what} (exit code {code}) printed {shown}:\n{command.output}")


def test_ctrl_c_or_a_lost_connection_shows_no_command_a_traceback():
    root = Path(tempfile.mkdtemp(prefix="seedline-interrupts-"))
    home = root / "home"
    nats_port, monitor_port = free_port(), free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("SEEDLINE_")}
    env.update(SEEDLINE_HOME=str(home), PYTHONUNBUFFERED="1", SEEDLINE_WEB_PORT=str(free_port()))
    cli_env = {**env, "SEEDLINE_NATS_URL": f"nats://127.0.0.1:{nats_port}",
               "SEEDLINE_NATS_MONITOR_URL": f"http://127.0.0.1:{monitor_port}"}
    up = Command(["up", "--nats-port", str(nats_port), "--monitor-port", str(monitor_port)],
                 env, root)
    failures: list[str] = []
    try:
        up.wait_for(READY_LINE, 240)
        transcripts = root / "transcripts"
        transcripts.mkdir()
        started = {
            "notices --follow": (["notices", "--instance", "demo", "--follow"],
                                 "Following the notices", None),
            "runner": (["runner", "--node-id", "interrupted", "--label", "Interrupted"],
                       "runner_started", None),
            "capture": (["capture", "claude", str(transcripts), "--instance", "demo",
                         "--state", str(root / "capture-state.json")], "Following", None),
            "acp": (["acp", "--instance", "demo"], '"protocolVersion"',
                    {"jsonrpc": "2.0", "id": 0, "method": "initialize",
                     "params": {"protocolVersion": 1, "clientCapabilities": {}}}),
            "mcp": (["mcp", "--instance", "demo"], '"serverInfo"',
                    {"jsonrpc": "2.0", "id": 1, "method": "initialize",
                     "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                                "clientInfo": {"name": "test", "version": "1"}}}),
        }
        for what, (argv, working, first_message) in started.items():
            command = Command(argv, cli_env, root)
            if first_message is not None:
                command.send(first_message)
            command.wait_for(working)  # it runs, and has done its first piece of work
            no_traceback(f"Ctrl-C of {what}", command, command.interrupt(), failures)

        # A lost connection: the nats-server goes (`seedline up` starts it again).
        follower = Command(["notices", "--instance", "demo", "--follow"], cli_env, root)
        follower.wait_for("Following the notices")
        nats_pid = next(p["pid"] for p in up_state.read(home) if p["name"] == "nats-server")
        os.kill(nats_pid, signal.SIGKILL)
        code = follower.ended(60)
        assert code == 3 and "Lost the connection to NATS" in follower.output, follower.output
        no_traceback("notices --follow losing NATS", follower, 0, failures)
    finally:
        code = up.interrupt(90)
        shutil.rmtree(root, ignore_errors=True)
    no_traceback("Ctrl-C of up", up, code, failures)
    assert "Stopped." in up.output, up.output
    assert not failures, "\n\n".join(failures)
