"""NATS and Postgres as `seedline up` supervises them (supervisor.Supervised): started again
on the same data folder, ports and socket, so every client reconnects to the same place."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path

from seedline_devtools.embedded import NatsProcess, PostgresProcess, pid_alive

from .processes import exit_text

START_WAIT_SECONDS = 30.0


def _tail(path: Path, lines: int) -> list[str]:
    try:
        return path.read_text(encoding="utf-8", errors="replace").splitlines()[-lines:]
    except OSError:
        return []


class SupervisedNats:
    name = "nats-server"

    def __init__(self, nats: NatsProcess, on_start: Callable[[int], None]) -> None:
        self.nats = nats
        self.log_path = nats.log_path
        self._on_start = on_start

    @property
    def pid(self) -> int | None:
        return None if self.nats.proc is None else self.nats.proc.pid

    def ended(self) -> str | None:
        proc = self.nats.proc
        return None if proc is None or proc.poll() is None else exit_text(proc.returncode)

    async def start_again(self) -> None:
        # Started from the event loop's own thread: the child's parent-death signal is tied
        # to the thread that forked it, and a worker thread may end before it does.
        self.nats.start(wait=False)
        self._on_start(self.nats.proc.pid)
        deadline = asyncio.get_running_loop().time() + START_WAIT_SECONDS
        while not await _listens(self.nats.port):
            if self.nats.proc.poll() is not None:
                raise RuntimeError(f"it exited with {exit_text(self.nats.proc.returncode)}")
            if asyncio.get_running_loop().time() > deadline:
                raise RuntimeError(f"nothing listens on port {self.nats.port} after "
                                   f"{START_WAIT_SECONDS:g} s")
            await asyncio.sleep(0.1)

    async def stop(self) -> None:
        await asyncio.to_thread(self.nats.stop)

    def log_tail(self, lines: int = 8) -> list[str]:
        return _tail(self.log_path, lines)


async def _listens(port: int) -> bool:
    try:
        _, writer = await asyncio.open_connection("127.0.0.1", port)
    except OSError:
        return False
    writer.close()
    return True


class SupervisedPostgres:
    """pg_ctl runs the postmaster on its own, so it is watched through the pid in its
    postmaster.pid file; its exit code is not ours to see."""

    name = "postgres"

    def __init__(self, postgres: PostgresProcess) -> None:
        self.postgres = postgres
        self.log_path = postgres.data_dir / "log"
        self._pid = postgres.postmaster_pid()

    @property
    def pid(self) -> int | None:
        return self._pid

    def ended(self) -> str | None:
        if self._pid is None or pid_alive(self._pid):
            return None
        return "ended (started by pg_ctl, so its exit code is not seen here)"

    async def start_again(self) -> None:
        await asyncio.to_thread(self.postgres.restart)
        self._pid = self.postgres.postmaster_pid()

    async def stop(self) -> None:
        await asyncio.to_thread(self.postgres.stop)

    def log_tail(self, lines: int = 8) -> list[str]:
        return _tail(self.log_path, lines)
