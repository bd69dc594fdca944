"""`seedline up` keeps the system running: kill -9 one process of each kind while a publisher
runs, and it comes back by itself, the publisher finishes, nothing is lost, and `seedline
status` shows the restart. One `seedline up` serves every test of this module."""

from __future__ import annotations

import asyncio
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
from collections.abc import Iterator
from pathlib import Path

import nats
import psycopg
import pytest

from seedline_cli import up_state
from seedline_devtools.embedded import free_port

pytestmark = [pytest.mark.slow, pytest.mark.servers]

READY_LINE = "Seedline is up."
# Enough that publishing them outlasts a few probes of the stream on a loaded machine: with
# 3,000 one full run saw the publisher finish before the first probe found 200 of them.
ENTRIES = 6000
KILL_AFTER = 200  # ingest messages published by this test's publisher before the kill


class Up:
    def __init__(self, root: Path) -> None:
        self.home = root / "home"
        self.nats_port, self.monitor_port = free_port(), free_port()
        self.env = {k: v for k, v in os.environ.items() if not k.startswith("SEEDLINE_")}
        self.env.update(SEEDLINE_HOME=str(self.home), PYTHONUNBUFFERED="1",
                        SEEDLINE_WEB_PORT=str(free_port()))
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "seedline_cli", "up", "--nats-port", str(self.nats_port),
             "--monitor-port", str(self.monitor_port)],
            cwd=root, env=self.env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        self.seen: list[str] = []
        self._lines: queue.Queue = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        for line in iter(self.proc.stdout.readline, ""):
            self._lines.put(line)
        self._lines.put(None)

    def wait_for(self, text: str, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                line = self._lines.get(timeout=0.5)
            except queue.Empty:
                continue
            if line is None:
                raise AssertionError("seedline up exited:\n" + "".join(self.seen))
            self.seen.append(line)
            if text in line:
                return
        raise AssertionError(f"no {text!r} within {timeout:g} s:\n" + "".join(self.seen))

    @property
    def cli_env(self) -> dict[str, str]:
        return {**self.env, "SEEDLINE_NATS_URL": f"nats://127.0.0.1:{self.nats_port}",
                "SEEDLINE_NATS_MONITOR_URL": f"http://127.0.0.1:{self.monitor_port}"}

    def processes(self) -> dict[str, dict]:
        return {p["name"]: p for p in up_state.read(self.home) or []}

    def diagnosis(self, name: str) -> str:
        """What the supervisor printed and says of a process, and its log's end."""
        while not self._lines.empty():
            line = self._lines.get()
            if line is not None:
                self.seen.append(line)
        state = self.processes().get(name, {})
        log = Path(state.get("log") or "")
        tail = log.read_text(errors="replace")[-3000:] if log.is_file() else "(no log)"
        return (f"state: {state}\nseedline up printed:\n{''.join(self.seen[-40:])}"
                f"\n{log}:\n{tail}")

    def stop(self) -> int:
        self.proc.send_signal(signal.SIGINT)
        try:
            return self.proc.wait(90)
        finally:
            if self.proc.poll() is None:
                self.proc.kill()


@pytest.fixture(scope="module")
def up() -> Iterator[Up]:
    root = Path(tempfile.mkdtemp(prefix="seedline-supervised-"))
    system = Up(root)
    try:
        system.wait_for(READY_LINE, 240)
        yield system
        assert system.stop() == 0, "".join(system.seen)
    finally:
        if system.proc.poll() is None:
            system.proc.kill()
        shutil.rmtree(root, ignore_errors=True)


async def _ingested(url: str) -> int:
    nc = await nats.connect(url, connect_timeout=2, allow_reconnect=False)
    try:
        return (await nc.jetstream().stream_info("SEEDLINE_INGEST")).state.messages
    finally:
        await nc.close()


def ingested(up: Up) -> int:
    try:
        return asyncio.run(_ingested(up.cli_env["SEEDLINE_NATS_URL"]))
    except Exception:
        return -1


def projected(up: Up, prefix: str) -> tuple[int, int] | None:
    """(rows, distinct entry ids) of this prefix in the timeline projection; None if away."""
    url = f"postgresql://postgres@/seedline?host={up.home / 'postgres'}"
    try:
        with psycopg.connect(url, connect_timeout=3) as conn:
            return conn.execute(
                "SELECT count(*), count(DISTINCT entry_id) FROM timeline_entries "
                "WHERE entry_id LIKE %s", (prefix + "%",)).fetchone()
    except psycopg.Error:
        return None


def until(probe, timeout: float, what: str):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if found := probe():
            return found
        time.sleep(0.2)
    raise AssertionError(f"{what} did not happen within {timeout:g} s")


@pytest.mark.parametrize("target", [
    "timeline-writer", "seedline-web", "demo-runner", "nats-server", "postgres"])
def test_a_killed_process_comes_back_by_itself_and_nothing_is_lost(up: Up, target, tmp_path):
    before = up.processes()[target]
    assert before["state"] == "running" and before["pid"], before
    prefix = f"kill-{target}-"
    lines = [json.dumps({"entry_id": f"{prefix}{n}", "instance_id": "demo", "repo": "apps/kill",
                         "session_id": f"chat-{target}", "kind": "chat_user",
                         "content": f"entry {n}", "at": "2026-08-17T10:00:00Z"})
             for n in range(ENTRIES)]
    (tmp_path / "entries.jsonl").write_text("\n".join(lines) + "\n")
    start = ingested(up)
    publisher = subprocess.Popen(
        [sys.executable, "-m", "seedline_cli", "publish", "--file", str(tmp_path / "entries.jsonl"),
         "--json"], env=up.cli_env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        until(lambda: ingested(up) >= start + KILL_AFTER or publisher.poll() is not None, 60,
              "the publisher's first entries")
        assert publisher.poll() is None, "the publisher finished before the kill"
        os.kill(before["pid"], signal.SIGKILL)
        out, err = publisher.communicate(timeout=180)
    finally:
        if publisher.poll() is None:
            publisher.kill()
    assert publisher.returncode == 0, (out, err)
    assert json.loads(out)["published"] == ENTRIES

    try:
        after = until(lambda: (p := up.processes()[target])["restarts"] > before["restarts"]
                      and p["state"] == "running" and p, 120, f"{target} running again")
    except AssertionError as failure:
        raise AssertionError(f"{failure}\n{up.diagnosis(target)}") from None
    assert after["pid"] != before["pid"] and after["last_exit"], after
    # Nothing lost, nothing twice: each entry once in the projection.
    until(lambda: projected(up, prefix) == (ENTRIES, ENTRIES), 180, "every entry projected once")

    status = subprocess.run([sys.executable, "-m", "seedline_cli", "status", "--json"],
                            env=up.cli_env, capture_output=True, text=True, timeout=60)
    shown = {p["name"]: p for p in json.loads(status.stdout)["processes"]}
    assert shown[target]["restarts"] == after["restarts"], status.stdout
    table = subprocess.run([sys.executable, "-m", "seedline_cli", "status"],
                           env={**up.cli_env, "COLUMNS": "160"}, capture_output=True, text=True,
                           timeout=60)
    assert "Processes of `seedline up`" in table.stdout and target in table.stdout, table.stdout
    if f"{target} stopped unexpectedly" not in "".join(up.seen):
        up.wait_for(f"{target} stopped unexpectedly", 10)
