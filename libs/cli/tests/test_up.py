"""`seedline up` as a person runs it: a subprocess, ready, used, stopped with Ctrl-C."""

from __future__ import annotations

import fcntl
import json
import os
import pty
import queue
import re
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import termios
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

from seedline_supervisor.processes import port_is_free
from seedline_core.notices import wording_violations
from seedline_devtools.embedded import free_port, pid_alive

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

        # The export lines are all a second shell needs: status finds everything up with them.
        exports = dict(re.findall(r"^\s*export (SEEDLINE_[A-Z_]+)=(\S+)$", output, re.MULTILINE))
        assert exports["SEEDLINE_NATS_MONITOR_URL"] == f"http://127.0.0.1:{monitor_port}"
        second_shell = {k: v for k, v in os.environ.items() if not k.startswith("SEEDLINE_")}
        checked = subprocess.run([sys.executable, "-m", "seedline_cli", "status", "--json"],
                                 env={**second_shell, **exports}, capture_output=True, text=True,
                                 timeout=60, cwd=tmp_path)
        assert checked.returncode == 0, checked.stdout + checked.stderr
        status = json.loads(checked.stdout)
        assert status["durability"]["sync_interval"] == "always"
        assert {s["name"]: s["up"] for s in status["services"]}["seedline-web"] is True
        assert {p["name"] for p in status["processes"]} >= {"nats-server", "postgres",
                                                            "timeline-writer", "seedline-web"}

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


def _read_terminal(master: int, into: queue.Queue, stop: threading.Event) -> None:
    """Lines a program writes to its terminal, until ``stop``. It never blocks in a read: a
    terminal closed while a read waits on it is not closed until that read returns."""
    pending = b""
    while not stop.is_set():
        if not select.select([master], [], [], 0.1)[0]:
            continue
        try:
            chunk = os.read(master, 4096)
        except OSError:  # EIO once the program's side is gone
            chunk = b""
        if not chunk:
            break
        pending += chunk
        *lines, pending = pending.split(b"\n")
        for line in lines:
            into.put(line.decode("utf-8", errors="replace") + "\n")
    into.put(None)


def _take_terminal() -> None:
    """In the child, a session leader already: its stdin becomes its controlling terminal, so
    closing the terminal hangs the session up with SIGHUP, as closing a terminal window does."""
    fcntl.ioctl(0, termios.TIOCSCTTY, 0)


def test_closing_its_terminal_stops_everything_up_started(home, tmp_path):
    nats_port, monitor_port = free_port(), free_port()
    env = {**os.environ, "SEEDLINE_HOME": str(home), "PYTHONUNBUFFERED": "1",
           "SEEDLINE_WEB_PORT": str(free_port())}
    env.pop("SEEDLINE_NATS_URL", None)
    env.pop("SEEDLINE_DATABASE_URL", None)
    master, terminal = pty.openpty()
    up = subprocess.Popen(
        [sys.executable, "-m", "seedline_cli", "up", "--nats-port", str(nats_port),
         "--monitor-port", str(monitor_port)],
        cwd=tmp_path, env=env, stdin=terminal, stdout=terminal, stderr=terminal,
        start_new_session=True, preexec_fn=_take_terminal)
    os.close(terminal)
    lines: queue.Queue = queue.Queue()
    seen: list[str] = []
    stop_reading = threading.Event()
    reader = threading.Thread(target=_read_terminal, args=(master, lines, stop_reading),
                              daemon=True)
    reader.start()
    try:
        wait_for_line(lines, seen, READY_LINE, timeout=180)
        assert (home / "postgres" / "postmaster.pid").exists()
        stop_reading.set()
        reader.join(10)
        os.close(master)  # the terminal window closes
        code = up.wait(90)
    finally:
        if up.poll() is None:
            up.kill()
    assert code == 0, "".join(seen)
    _, alive = psutil.wait_procs(processes_using(home), timeout=10)
    assert not alive, [p.info["cmdline"] for p in alive]
    assert not (home / "postgres" / "postmaster.pid").exists()  # Postgres stopped as well


def start_up(home: Path, cwd: Path, nats_port: int, monitor_port: int) -> subprocess.Popen:
    env = {**os.environ, "SEEDLINE_HOME": str(home), "PYTHONUNBUFFERED": "1"}
    env.pop("SEEDLINE_NATS_URL", None)
    env.pop("SEEDLINE_DATABASE_URL", None)
    return subprocess.Popen(
        [sys.executable, "-m", "seedline_cli", "up", "--nats-port", str(nats_port),
         "--monitor-port", str(monitor_port)],
        cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )


def read_until_exit_or_ready(lines: queue.Queue, seen: list[str], timeout: float) -> bool:
    """True when the process printed its ready line, False when it exited first."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            line = lines.get(timeout=0.5)
        except queue.Empty:
            continue
        if line is None:
            return False
        seen.append(line)
        if READY_LINE in line:
            return True
    raise AssertionError(f"neither ready nor exited within {timeout:g} s:\n" + "".join(seen))


def start_markers(logs: Path) -> dict[str, int]:
    """How many times `seedline up` started each process whose log is in this folder."""
    return {
        path.name: path.read_text(errors="replace").count("--- started by seedline up")
        for path in sorted(logs.glob("*.log"))
        if path.is_file() and not path.is_symlink()
    }


def postgres_answers(home: Path) -> bool:
    import psycopg

    try:
        with psycopg.connect(
            f"postgresql://postgres@/seedline?host={home / 'postgres'}", connect_timeout=3
        ) as conn:
            return conn.execute("SELECT 1").fetchone() == (1,)
    except psycopg.Error:
        return False


def test_what_a_killed_up_left_running_is_named_by_the_next_one(home, tmp_path):
    """kill -9 gives `seedline up` no chance to stop Postgres (pg_ctl runs it as nobody's
    child): the next `seedline up` on the folder says whose it is, uses it, and stops it."""
    ports = free_port(), free_port()
    first = start_up(home, tmp_path, *ports)
    first_lines: queue.Queue = queue.Queue()
    first_seen: list[str] = []
    threading.Thread(target=_lines, args=(first.stdout, first_lines), daemon=True).start()
    second = None
    try:
        wait_for_line(first_lines, first_seen, READY_LINE, timeout=180)
        postmaster = int((home / "postgres" / "postmaster.pid").read_text().split()[0])
        left_nats = json.loads((home / "up.lock").read_text())["nats_pid"]
        first.kill()
        first.wait(30)
        assert psutil.pid_exists(postmaster)

        second = start_up(home, tmp_path, *ports)
        lines: queue.Queue = queue.Queue()
        seen: list[str] = []
        threading.Thread(target=_lines, args=(second.stdout, lines), daemon=True).start()
        wait_for_line(lines, seen, READY_LINE, timeout=180)
        said = " ".join(" ".join(seen).split())  # rich wraps long lines at 80 columns
        assert f"Postgres (pid {postmaster}) was still running" in said, said
        if psutil.pid_exists(left_nats) and "nats-server" in " ".join(
                psutil.Process(left_nats).cmdline()):
            raise AssertionError(f"the nats-server {left_nats} outlived the second start")
        assert not wording_violations(said)
        second.send_signal(signal.SIGINT)
        assert second.wait(60) == 0, "".join(seen)
    finally:
        for proc in (first, second):
            if proc is not None and proc.poll() is None:
                proc.kill()
    _, alive = psutil.wait_procs(processes_using(home), timeout=10)
    assert not alive, [p.info["cmdline"] for p in alive]
    assert not pid_alive(postmaster)  # ended (a zombie until its new parent reaps it)


def test_a_second_up_on_the_same_folder_names_the_holder_and_touches_nothing(
    seedline, home, tmp_path
):
    first_ports = (free_port(), free_port())
    second_ports = (free_port(), free_port())
    first = start_up(home, tmp_path, *first_ports)
    first_lines: queue.Queue = queue.Queue()
    first_seen: list[str] = []
    threading.Thread(target=_lines, args=(first.stdout, first_lines), daemon=True).start()
    second = None
    try:
        wait_for_line(first_lines, first_seen, READY_LINE, timeout=180)
        config_before = (home / "nats" / "nats.conf").read_bytes()
        markers_before = start_markers(home / "logs")
        files_before = sorted(p.name for p in home.iterdir())

        second = start_up(home, tmp_path, *second_ports)
        second_lines: queue.Queue = queue.Queue()
        second_seen: list[str] = []
        threading.Thread(target=_lines, args=(second.stdout, second_lines), daemon=True).start()
        started = read_until_exit_or_ready(second_lines, second_seen, timeout=180)
        if started:
            # The defect: it ran a second system on the same data. Ctrl-C it as a person would.
            second.send_signal(signal.SIGINT)
        code = second.wait(60)
        output = "".join(second_seen)

        assert not started, "the second seedline up started a system:\n" + output
        assert code == 1, output
        assert f"pid {first.pid}" in output, output
        assert f"NATS port {first_ports[0]}" in output, output
        assert "started at 20" in output, output
        assert "Stop it (Ctrl-C in its terminal" in output, output
        assert not wording_violations(output), output
        # Touching nothing: no server, no config or log written for the second one.
        assert port_is_free(second_ports[0]) and port_is_free(second_ports[1])
        assert (home / "nats" / "nats.conf").read_bytes() == config_before
        assert start_markers(home / "logs") == markers_before
        assert sorted(p.name for p in home.iterdir()) == files_before

        # The first system still works: its Postgres answers and its services stay up.
        assert first.poll() is None, "".join(first_seen)
        assert postgres_answers(home)
        env = {"SEEDLINE_NATS_URL": f"nats://127.0.0.1:{first_ports[0]}",
               "SEEDLINE_HOME": str(home)}
        published = seedline("publish", "--instance", "demo", "--repo", "apps/hello",
                             "--conversation", "after-second", "--kind", "chat_user",
                             "--content", "still here", "--json", env=env)
        assert published.exit_code == 0, published.output
        opened = seedline("open", "--instance", "demo", "--repo", "apps/hello", "--engine",
                          "scripted", "--node", "demo-runner", "--json", env=env)
        assert opened.exit_code == 0, opened.output
        assert first.poll() is None, "".join(first_seen)
    finally:
        if second is not None and second.poll() is None:
            second.kill()
        first.send_signal(signal.SIGINT)
        try:
            first_code = first.wait(60)
        finally:
            if first.poll() is None:
                first.kill()
    wait_for_line(first_lines, first_seen, "Stopped.", timeout=5)
    assert first_code == 0, "".join(first_seen)
