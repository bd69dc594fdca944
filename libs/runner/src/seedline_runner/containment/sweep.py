"""Finding and killing processes by tree, process group and environment tag (psutil).

Killing a tree that is still running is a race: a process may fork, or leave for a
session of its own, between the moment it is found and the moment it is killed. So
everything found is first stopped (SIGSTOP: a stopped process forks nothing), found
again until no new one turns up, and only then killed and waited for.
"""

from __future__ import annotations

import asyncio
import os
import signal
import time
from collections.abc import Callable, Iterable

import psutil
import structlog

from .base import END_TIMEOUT_SECONDS

log = structlog.get_logger(__name__)

_POLL_SECONDS = 0.02


def alive(process: psutil.Process) -> bool:
    try:
        return process.is_running() and process.status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


def descendants(pids: Iterable[int]) -> list[psutil.Process]:
    """The processes ``pids`` and everything below them, as far as their parents still say."""
    found: list[psutil.Process] = []
    for pid in pids:
        try:
            root = psutil.Process(pid)
            found.append(root)
            found.extend(root.children(recursive=True))
        except psutil.Error:
            continue
    return found


def in_groups(pgids: Iterable[int]) -> list[psutil.Process]:
    wanted = set(pgids)
    if not wanted:
        return []
    found = []
    for process in psutil.process_iter():
        try:
            if os.getpgid(process.pid) in wanted:
                found.append(process)
        except (OSError, psutil.Error):
            continue
    return found


def tagged(env_name: str, prefix: str) -> dict[str, list[psutil.Process]]:
    """Processes whose ``env_name`` starts with ``prefix``, by the rest of its value."""
    found: dict[str, list[psutil.Process]] = {}
    me = os.getpid()
    for process in psutil.process_iter():
        if process.pid == me:
            continue
        try:
            value = process.environ().get(env_name)
        except (psutil.Error, OSError):
            continue
        if value is not None and value.startswith(prefix):
            found.setdefault(value[len(prefix):], []).append(process)
    return found


def _signal(processes: Iterable[psutil.Process], signum: int) -> None:
    for process in processes:
        try:
            process.send_signal(signum)
        except psutil.Error:
            continue


async def kill_all(
    find: Callable[[], list[psutil.Process]], *, timeout: float = END_TIMEOUT_SECONDS
) -> int:
    """Stop, then kill, everything ``find`` returns until it returns nothing alive.

    Returns how many processes were killed; logs what was still there at ``timeout``.
    """
    me = os.getpid()
    killed: dict[int, psutil.Process] = {}
    deadline = time.monotonic() + timeout
    while True:
        found = {p.pid: p for p in await asyncio.to_thread(find) if p.pid != me and alive(p)}
        if not found:
            return len(killed)
        if time.monotonic() > deadline:
            log.error("processes_survived_kill", pids=sorted(found))
            return len(killed)
        # Freeze first, and look again until nothing new turns up: only then kill.
        while True:
            _signal(found.values(), signal.SIGSTOP)
            more = {
                p.pid: p for p in await asyncio.to_thread(find)
                if p.pid != me and p.pid not in found and alive(p)
            }
            if not more:
                break
            found.update(more)
        _signal(found.values(), signal.SIGKILL)
        killed.update(found)
        # Polled, not waited for: psutil's wait would reap this runner's own children,
        # whose exit asyncio is waiting to collect.
        settle = time.monotonic() + 2.0
        while any(alive(p) for p in found.values()) and time.monotonic() < settle:
            await asyncio.sleep(_POLL_SECONDS)
