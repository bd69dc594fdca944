"""Linux without a writable cgroup v2: the runner as a child subreaper.

With PR_SET_CHILD_SUBREAPER, a process whose parent dies is handed to the runner
instead of to PID 1, so everything an engine starts stays below the runner while it
lives, whatever process group or session it moves to. A stop kills as the process
group containment does (tree, group, tag), and reaps the orphans it was handed.
"""

from __future__ import annotations

import ctypes
import os

import psutil

from .process_group import ProcessGroupContainment

_PR_SET_CHILD_SUBREAPER = 36


def become_subreaper() -> bool:
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return libc.prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False


class SubreaperContainment(ProcessGroupContainment):
    name = "subreaper"

    def describe(self) -> str:
        return (
            "this runner is a child subreaper: whatever an engine starts stays below it, "
            "and a stop kills the engine's whole process tree"
        )

    async def end(self, pen: str) -> int:
        # asyncio waits for the CLIs themselves: only orphans handed over are reaped here.
        engines = self.adopted_pids()
        killed = await super().end(pen)
        reap_orphans(exclude=engines)
        return killed


def reap_orphans(exclude: set[int]) -> None:
    """Collect the exit of orphans handed to this process (not the CLIs asyncio waits for)."""
    me = os.getpid()
    for process in psutil.process_iter():
        try:
            if process.pid in exclude or process.ppid() != me:
                continue
            if process.status() == psutil.STATUS_ZOMBIE:
                os.waitpid(process.pid, os.WNOHANG)
        except (psutil.Error, ChildProcessError, OSError):
            continue
