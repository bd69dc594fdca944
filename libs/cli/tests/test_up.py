"""`seedline up` as a person runs it: a subprocess, ready, used, stopped with Ctrl-C."""

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
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

from seedline_devtools.embedded import free_port

pytestmark = [pytest.mark.slow, pytest.mark.servers]

READY_LINE = "Seedline is up."


def _lines(stream, into: queue.Queue) -> None:
    for raw in iter(stream.readline, ""):
        into.put(raw)
    into.put(None)


def wait_for_line(lines: queue.Queue, seen: list[str], text: str, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            line = lines.get(timeout=0.5)
        except queue.Empty:
            continue
        if line is None:
            raise AssertionError("seedline up exited early:\n" + "".join(seen))
        seen.append(line)
        if text in line:
            return
    raise AssertionError(f"no {text!r} within {timeout:g} s:\n" + "".join(seen))


def processes_using(home: Path) -> list[psutil.Process]:
    """Anything still running that was started for this SEEDLINE_HOME."""
    marker = str(home)
    found = []
    for proc in psutil.process_iter(["cmdline", "environ"]):
        try:
            cmdline = " ".join(proc.info["cmdline"] or [])
            environ = proc.info["environ"] or {}
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            continue
        if proc.pid != os.getpid() and (
            marker in cmdline or environ.get("SEEDLINE_HOME") == marker
        ):
            found.append(proc)
    return found


@pytest.fixture
def home() -> Iterator[Path]:
    # Outside pytest's temp folders: a concurrent pytest run resets their permissions
    # and prunes old ones, and the embedded Postgres runs as its own system user there.
    path = Path(tempfile.mkdtemp(prefix="seedline-up-test-"))
    try:
        yield path / "home"
    finally:
        shutil.rmtree(path, ignore_errors=True)


def test_up_runs_the_system_and_stops_cleanly_on_ctrl_c(seedline, home, tmp_path):
    nats_port, monitor_port = free_port(), free_port()
    env = {**os.environ, "SEEDLINE_HOME": str(home), "PYTHONUNBUFFERED": "1"}
    env.pop("SEEDLINE_NATS_URL", None)
    env.pop("SEEDLINE_DATABASE_URL", None)
    up = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "seedline_cli",
            "up",
            "--nats-port",
            str(nats_port),
            "--monitor-port",
            str(monitor_port),
        ],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    lines: queue.Queue = queue.Queue()
    seen: list[str] = []
    threading.Thread(target=_lines, args=(up.stdout, lines), daemon=True).start()
    try:
        wait_for_line(lines, seen, READY_LINE, timeout=180)
        wait_for_line(lines, seen, "Logs:", timeout=10)
        output = "".join(seen)
        assert f"export SEEDLINE_NATS_URL=nats://127.0.0.1:{nats_port}" in output
        assert "publish --instance demo --repo apps/hello" in output
        assert (home / "logs" / "timeline-writer.log").exists()
        assert (home / "nats" / "jetstream").is_dir()

        cli_env = {"SEEDLINE_NATS_URL": f"nats://127.0.0.1:{nats_port}", "SEEDLINE_HOME": str(home)}
        published = seedline(
            "publish",
            "--instance",
            "demo",
            "--repo",
            "apps/hello",
            "--session",
            "first-chat",
            "--kind",
            "chat_user",
            "--content",
            "Add a README",
            "--entry-id",
            "up-1",
            "--json",
            env=cli_env,
        )
        assert published.exit_code == 0, published.output
        read = seedline(
            "timeline", "--instance", "demo", "--repo", "apps/hello", "--json", env=cli_env
        )
        assert read.exit_code == 0, read.output
        assert [e["entry_id"] for e in json.loads(read.stdout)["entries"]] == ["up-1"]
        if "open --instance demo" in output:
            # Printed only when the resolver, the gateway and the demo runner all answer.
            opened = seedline(
                "open",
                "--instance",
                "demo",
                "--repo",
                "apps/hello",
                "--engine",
                "scripted",
                "--node",
                "demo-runner",
                "What next?",
                "--json",
                env=cli_env,
            )
            assert opened.exit_code == 0, opened.output
            reply = json.loads(opened.stdout)
            assert reply["outcome"] == "briefed" and reply["brief"]["rows"] == 1
            brief = seedline("brief", "show", reply["session_id"], env=cli_env)
            assert brief.exit_code == 0, brief.output
            assert "Add a README" in brief.stdout
        assert processes_using(home), "up's children should be running until Ctrl-C"
    finally:
        up.send_signal(signal.SIGINT)
        try:
            code = up.wait(60)
        finally:
            if up.poll() is None:
                up.kill()
    wait_for_line(lines, seen, "Stopped.", timeout=5)
    assert code == 0, "".join(seen)
    # `pg_ctl stop -w` returns once the pid file is gone, a moment before the process is.
    _, alive = psutil.wait_procs(processes_using(home), timeout=10)
    assert not alive, [p.info["cmdline"] for p in alive]
    assert not (home / "postgres" / "postmaster.pid").exists()
