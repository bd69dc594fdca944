"""The supervisor's decisions, over fake processes: no servers, no real time to speak of."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

from seedline_cli import up_state
from seedline_core.disk_full import DiskFull
from seedline_supervisor.supervisor import (
    CRASH_LOOP,
    RUNNING,
    WAITING_FOR_ROOM,
    RestartPolicy,
    Supervisor,
)


def test_backoff_doubles_up_to_its_ceiling():
    policy = RestartPolicy(first_delay=0.5, factor=2, max_delay=3, crash_limit=10)
    delays = [policy.next_delay([0.0] * n, 1.0) for n in range(1, 6)]
    assert delays == [0.5, 1.0, 2.0, 3.0, 3.0]


def test_ends_older_than_the_window_no_longer_count():
    policy = RestartPolicy(first_delay=1, factor=2, crash_limit=2, crash_window=60)
    assert policy.next_delay([0, 10, 20], 30) is None  # three ends within a minute
    assert policy.next_delay([0, 10, 100], 105) == 1  # only the newest is recent


class FakeProcess:
    def __init__(self, name: str, tmp: Path, fails_to_start: int = 0) -> None:
        self.name = name
        self.log_path = tmp / f"{name}.log"
        self.log_path.write_text("starting\nboom: cannot go on\n")
        self.pid: int | None = 100
        self.how: str | None = None
        self.starts = 0
        self.stops = 0
        self.fails_to_start = fails_to_start

    def ended(self) -> str | None:
        return self.how

    async def start_again(self) -> None:
        self.starts += 1
        if self.fails_to_start:
            self.fails_to_start -= 1
            raise RuntimeError("port taken")
        self.how = None
        self.pid = 100 + self.starts

    async def stop(self) -> None:
        self.stops += 1
        self.how = "exit code 0"

    def log_tail(self, lines: int = 8) -> list[str]:
        return self.log_path.read_text().splitlines()[-lines:]


FAST = RestartPolicy(first_delay=0.01, factor=2, max_delay=0.05, crash_limit=3)


async def _until(probe, timeout: float = 5.0) -> None:
    deadline = asyncio.get_running_loop().time() + timeout
    while not probe():
        assert asyncio.get_running_loop().time() < deadline, "never happened"
        await asyncio.sleep(0.01)


async def test_a_process_that_ends_is_started_again_and_its_restart_recorded(tmp_path):
    writer, other = FakeProcess("timeline-writer", tmp_path), FakeProcess("seed-composer", tmp_path)
    stop, said = asyncio.Event(), []
    state = tmp_path / up_state.STATE_NAME
    supervisor = Supervisor([writer, other], stop, lambda t, lines: said.append(t), state,
                            policy=FAST, poll_seconds=0.01)
    task = asyncio.create_task(supervisor.run())
    writer.how = "killed by signal 9"
    await _until(lambda: writer.starts == 1 and supervisor.records[writer.name].state == "running")
    stop.set()
    assert await task is None
    rows = {p["name"]: p for p in json.loads(state.read_text())["processes"]}
    assert rows["timeline-writer"]["restarts"] == 1
    assert rows["timeline-writer"]["last_exit"] == "killed by signal 9"
    assert rows["timeline-writer"]["pid"] == 101
    assert rows["seed-composer"]["restarts"] == 0 and other.starts == 0
    assert any("timeline-writer stopped unexpectedly (killed by signal 9)" in t for t in said)
    assert up_state.read(tmp_path) == list(rows.values())  # this process is alive


async def test_a_start_that_fails_counts_as_another_end_and_is_tried_again(tmp_path):
    web = FakeProcess("seedline-web", tmp_path, fails_to_start=2)
    stop = asyncio.Event()
    supervisor = Supervisor([web], stop, lambda t, lines: None, tmp_path / "s.json",
                            policy=FAST, poll_seconds=0.01)
    task = asyncio.create_task(supervisor.run())
    web.how = "exit code 1"
    await _until(lambda: supervisor.records[web.name].restarts == 1)
    stop.set()
    await task
    assert web.starts == 3


async def test_a_crash_loop_is_named_with_its_log_and_the_rest_keeps_running(tmp_path):
    runner = FakeProcess("demo-runner", tmp_path)
    said: list[tuple[str, list[str]]] = []
    stop = asyncio.Event()
    supervisor = Supervisor([runner], stop, lambda t, lines: said.append((t, lines)),
                            tmp_path / "s.json", policy=FAST, poll_seconds=0.01)
    task = asyncio.create_task(supervisor.run())
    for _ in range(FAST.crash_limit + 1):
        runner.how = "exit code 3"
        await _until(lambda: runner.how is None or supervisor.records[runner.name].state
                     == CRASH_LOOP)
    await _until(lambda: supervisor.records[runner.name].state == CRASH_LOOP)
    stop.set()
    assert await task is None  # not essential: the supervisor goes on until stopped
    text, lines = said[-1]
    assert "demo-runner is in a crash loop" in text and str(runner.log_path) in text
    assert lines[-1] == "boom: cannot go on"


async def test_an_essential_process_in_a_crash_loop_ends_the_supervision(tmp_path):
    nats = FakeProcess("nats-server", tmp_path, fails_to_start=100)
    stop = asyncio.Event()
    supervisor = Supervisor([nats], stop, lambda t, lines: None, tmp_path / "s.json",
                            essential=frozenset({"nats-server"}), policy=FAST, poll_seconds=0.01)
    nats.how = "killed by signal 9"
    assert await asyncio.wait_for(supervisor.run(), 10) == "nats-server"


def test_the_state_of_an_up_that_no_longer_runs_is_not_shown(tmp_path):
    (tmp_path / up_state.STATE_NAME).write_text(json.dumps(
        {"up_pid": 2**22 + 12345, "processes": [{"name": "x"}]}))
    assert up_state.read(tmp_path) is None


class Disk:
    """A disk that fills and empties when the test says so."""

    def __init__(self) -> None:
        self.full: DiskFull | None = None

    def fill(self) -> None:
        self.full = DiskFull("/data/home", 0, 100_000_000)

    def free(self) -> None:
        self.full = None


async def test_what_ends_while_the_disk_is_full_waits_for_room_and_then_starts_again(tmp_path):
    nats = FakeProcess("nats-server", tmp_path)
    postgres = FakeProcess("postgres", tmp_path, fails_to_start=1)
    writer = FakeProcess("timeline-writer", tmp_path)
    disk, said, stop = Disk(), [], asyncio.Event()
    supervisor = Supervisor([nats, postgres, writer], stop, lambda t, lines: said.append(t),
                            tmp_path / "s.json", essential=frozenset({"nats-server", "postgres"}),
                            policy=FAST, poll_seconds=0.01, look_at_disk=lambda: disk.full,
                            restart_when_room=frozenset({"nats-server"}))
    task = asyncio.create_task(supervisor.run())
    disk.fill()
    await _until(lambda: supervisor.disk_full is not None)
    for _ in range(FAST.crash_limit + 2):  # more ends than a crash loop takes
        postgres.how = writer.how = "exit code 1"
        await _until(lambda: supervisor.records["postgres"].state == WAITING_FOR_ROOM
                     and supervisor.records["timeline-writer"].state == WAITING_FOR_ROOM)
    await asyncio.sleep(0.1)  # several more looks: nothing starts on a full disk
    assert (postgres.starts, writer.starts, nats.stops) == (0, 0, 0)
    assert not task.done()  # no crash loop counted: the supervision goes on
    assert any(t.startswith("The disk that holds /data/home is full") for t in said)

    disk.free()
    await _until(lambda: all(r.state == RUNNING for r in supervisor.records.values()))
    stop.set()
    assert await task is None
    # nats-server ran all along and starts again all the same; Postgres's first start again
    # failed (its end then counted: the disk had room) and was tried again.
    assert (nats.stops, nats.starts, writer.starts, postgres.starts) == (1, 1, 1, 2)
    assert any(t.startswith("There is room on the disk that holds /data/home again")
               for t in said)


async def test_a_restart_due_when_the_disk_fills_waits_for_room(tmp_path):
    web = FakeProcess("seedline-web", tmp_path)
    disk, stop = Disk(), asyncio.Event()
    slow = RestartPolicy(first_delay=0.2, crash_limit=3)
    supervisor = Supervisor([web], stop, lambda t, lines: None, tmp_path / "s.json",
                            policy=slow, poll_seconds=0.01, look_at_disk=lambda: disk.full)
    task = asyncio.create_task(supervisor.run())
    web.how = "killed by signal 9"
    await _until(lambda: supervisor.records[web.name].state == "restarting")
    disk.fill()
    await _until(lambda: supervisor.records[web.name].state == WAITING_FOR_ROOM)
    assert web.starts == 0
    disk.free()
    await _until(lambda: supervisor.records[web.name].state == RUNNING)
    stop.set()
    await task
    assert web.starts == 1
