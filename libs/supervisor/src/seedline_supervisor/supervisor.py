"""The supervisor of `seedline up`: what it starts is started again when it ends unexpectedly.

A small asyncio loop rather than a supervisor library. supervisord and circus are daemons
of their own, driven by a config file and an RPC port (circus also needs ZeroMQ), and would
own the processes that `seedline up` must order, probe and stop in order; honcho (a Procfile
runner) stops everything when one process ends, which is the behaviour this replaces. Here
the servers are Python objects (pgserver's Postgres is started by pg_ctl and is nobody's
child), so each kind of process says itself how it is seen to end and how it starts again
(``Supervised``), and this module decides when: exponential backoff, and a crash-loop
limit after which a process is left stopped and named with its log's last lines.

Each process's state (restarts, last exit) is written to SEEDLINE_HOME/up-processes.json
for `seedline status` (state.py).

A full disk is a state, not a string of crashes: while the data folder's disk is short of
room (seedline_core.disk_full) a process that ends is not started again and its end does not
count towards a crash loop; it waits for room. Once there is room, what waits starts again,
and the processes named to start again after a full disk (nats-server: a JetStream stream
that failed a write refuses every later one until the server starts again, and the server
sizes its store from the free space it finds when it starts) are started again too.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from seedline_cli import up_state
from seedline_core.disk_full import DiskFull, room_again_text


class Supervised(Protocol):
    name: str
    log_path: Path

    @property
    def pid(self) -> int | None: ...

    def ended(self) -> str | None:
        """None while it runs; once it has ended, how (`killed by signal 9`, `exit code 1`)."""

    async def start_again(self) -> None:
        """Start it again after it ended, on the same data and ports; raise if it cannot."""

    async def stop(self) -> None:
        """Stop it (to start it again)."""

    def log_tail(self, lines: int = 8) -> list[str]: ...


@dataclass(frozen=True)
class RestartPolicy:
    """Exponential backoff between restarts, and a crash-loop limit. Pure: no clock of its own."""

    first_delay: float = 0.5
    factor: float = 2.0
    max_delay: float = 30.0
    crash_limit: int = 5  # unexpected ends within crash_window; one more is a crash loop
    crash_window: float = 120.0

    def next_delay(self, ends: list[float], now: float) -> float | None:
        """Seconds to wait before starting again, given the times of its unexpected ends
        (the newest included); None when it is in a crash loop and is left stopped."""
        recent = [t for t in ends if now - t <= self.crash_window]
        if len(recent) > self.crash_limit:
            return None
        return min(self.max_delay, self.first_delay * self.factor ** max(0, len(recent) - 1))


RUNNING, RESTARTING, CRASH_LOOP = "running", "restarting", "crash loop"
WAITING_FOR_ROOM = "waiting for room on the disk"


@dataclass
class Record:
    name: str
    log_path: Path
    state: str = RUNNING
    pid: int | None = None
    restarts: int = 0
    last_exit: str | None = None
    last_exit_at: str | None = None
    ends: list[float] = field(default_factory=list)

    def to_json(self) -> dict:
        return {"name": self.name, "state": self.state, "pid": self.pid,
                "restarts": self.restarts, "last_exit": self.last_exit,
                "last_exit_at": self.last_exit_at, "log": str(self.log_path)}


Say = Callable[[str, list[str]], None]
LookAtDisk = Callable[[], DiskFull | None]


class Supervisor:
    """Watches processes already started; `run` returns when stop is set, or the name of an
    essential process (NATS, Postgres: nothing works without them) in a crash loop."""

    def __init__(self, processes: list[Supervised], stop: asyncio.Event, say: Say,
                 state_path: Path, *, essential: frozenset[str] = frozenset(),
                 policy: RestartPolicy = RestartPolicy(), poll_seconds: float = 0.25,
                 look_at_disk: LookAtDisk = lambda: None,
                 restart_when_room: frozenset[str] = frozenset()) -> None:
        self.processes = processes
        self.stop = stop
        self.say = say
        self.state_path = state_path
        self.essential = essential
        self.policy = policy
        self.poll_seconds = poll_seconds
        self.look_at_disk = look_at_disk
        self.restart_when_room = restart_when_room
        self.disk_full: DiskFull | None = None
        self.records = {p.name: Record(p.name, p.log_path, pid=p.pid) for p in processes}
        self._restarts: set[asyncio.Task] = set()
        self._given_up: str | None = None

    async def run(self) -> str | None:
        self.write_state()
        try:
            while not self.stop.is_set() and self._given_up is None:
                self._watch_disk()
                for process in self.processes:
                    record = self.records[process.name]
                    if record.state == RUNNING and (how := process.ended()) is not None:
                        self._on_end(process, how)
                await self._pause(self.poll_seconds)
        finally:
            for task in self._restarts:
                task.cancel()
            await asyncio.gather(*self._restarts, return_exceptions=True)
        return self._given_up

    def _watch_disk(self) -> None:
        state = self.look_at_disk()
        if state is not None and self.disk_full is None:
            self.say(f"{state.message()} Meanwhile new work is refused, and what stops is "
                     "started again once there is room.", [])
        elif state is None and self.disk_full is not None:
            self.say(room_again_text(self.disk_full.folder), [])
            self._in_background(self._after_full_disk())
        self.disk_full = state

    def _in_background(self, work) -> None:
        task = asyncio.create_task(work)
        self._restarts.add(task)
        task.add_done_callback(self._restarts.discard)

    async def _after_full_disk(self) -> None:
        """Start again what waited for room, and what must start again after a full disk."""
        for process in self.processes:
            record = self.records[process.name]
            if process.name in self.restart_when_room and record.state == RUNNING:
                record.state = WAITING_FOR_ROOM  # before it stops: its end is no crash
                await process.stop()
        for process in self.processes:
            if self.stop.is_set() or self.disk_full is not None:
                return  # stopping, or full again: the next time there is room
            if self.records[process.name].state == WAITING_FOR_ROOM:
                await self._start(process)

    def _on_end(self, process: Supervised, how: str) -> None:
        record = self.records[process.name]
        if self.disk_full is not None or self.look_at_disk() is not None:
            # Most likely ended by the full disk: it waits for room, and no crash is counted.
            record.state = WAITING_FOR_ROOM
            record.last_exit = how
            record.last_exit_at = up_state.now_text()
            record.pid = None
            self.say(f"{process.name} stopped ({how}) while the disk is full; it starts again "
                     f"once there is room. Its log: {process.log_path}", [])
            self.write_state()
            return
        now = time.monotonic()
        record.ends.append(now)
        record.last_exit = how
        record.last_exit_at = up_state.now_text()
        record.pid = None
        delay = self.policy.next_delay(record.ends, now)
        if delay is None:
            record.state = CRASH_LOOP
            recent = len([t for t in record.ends if now - t <= self.policy.crash_window])
            ending = ("Stopping everything: nothing works without it."
                      if process.name in self.essential else "The rest keeps running.")
            self.say(
                f"{process.name} is in a crash loop: it stopped {recent} times within "
                f"{self.policy.crash_window:g} s (last: {how}), so it is not started again. "
                f"{ending} Its log, {process.log_path}, ends with:", process.log_tail())
            if process.name in self.essential:
                self._given_up = process.name
        else:
            record.state = RESTARTING
            self.say(f"{process.name} stopped unexpectedly ({how}); starting it again in "
                     f"{delay:g} s. Its log: {process.log_path}", [])
            self._in_background(self._start_again(process, delay))
        self.write_state()

    async def _start_again(self, process: Supervised, delay: float) -> None:
        await self._pause(delay)
        if self.stop.is_set():
            return
        if self.disk_full is not None:  # the disk filled meanwhile
            self.records[process.name].state = WAITING_FOR_ROOM
            self.write_state()
            return
        await self._start(process)

    async def _start(self, process: Supervised) -> None:
        record = self.records[process.name]
        try:
            await process.start_again()
        except Exception as exc:
            self._on_end(process, f"did not start again: {exc}")
            return
        record.state = RUNNING
        record.restarts += 1
        record.pid = process.pid
        self.say(f"{process.name} runs again (restart {record.restarts}).", [])
        self.write_state()

    async def _pause(self, seconds: float) -> None:
        try:
            await asyncio.wait_for(self.stop.wait(), seconds)
        except TimeoutError:
            pass

    def write_state(self) -> None:
        try:
            up_state.write(self.state_path, [r.to_json() for r in self.records.values()])
        except OSError:
            pass  # a full disk: `seedline status` measures the disk itself, and this is retried
