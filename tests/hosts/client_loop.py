"""An asyncio loop on a thread that lives on the client host (its network namespace).

A thread can enter a network namespace of its own (setns(2) acts on the calling thread), so
the harness itself stays in the machine's namespace, where it runs `ip` and signals
processes, while every socket the loop opens, and every process it starts, is on the
client host: the workload and the checker reach the system only across the bridge.
"""

from __future__ import annotations

import asyncio
import ctypes
import os
import threading
from collections.abc import Awaitable
from typing import TypeVar

T = TypeVar("T")
CLONE_NEWNET = 0x40000000


class ClientLoop:
    def __init__(self, namespace: str) -> None:
        self.loop = asyncio.new_event_loop()
        self._entered = threading.Event()
        self._error: str | None = None
        self._thread = threading.Thread(target=self._run, args=(namespace,), daemon=True)
        self._thread.start()
        self._entered.wait(10)
        if self._error:
            raise RuntimeError(self._error)

    def _run(self, namespace: str) -> None:
        fd = os.open(f"/run/netns/{namespace}", os.O_RDONLY)
        try:
            if ctypes.CDLL(None, use_errno=True).setns(fd, CLONE_NEWNET) != 0:
                self._error = f"cannot enter {namespace}: errno {ctypes.get_errno()}"
        finally:
            os.close(fd)
        self._entered.set()
        if not self._error:
            asyncio.set_event_loop(self.loop)
            self.loop.run_forever()

    def run(self, coro: Awaitable[T], timeout: float = 600.0) -> T:
        future = asyncio.run_coroutine_threadsafe(coro, self.loop)
        try:
            return future.result(timeout)
        finally:
            future.cancel()

    def close(self) -> None:
        """Cancel what is still running on the loop (a client's reader tasks), then stop."""
        try:
            self.run(_cancel_the_rest(), 15)
        except Exception:
            pass
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(10)


async def _cancel_the_rest() -> None:
    tasks = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
