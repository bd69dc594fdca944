"""Holding an engine by its process group, its process tree and an environment tag.

Where the machine has neither cgroups nor a subreaper (macOS), an engine starts in a
process group and session of its own (``run_cli`` starts it so) and every process it
starts carries the pen's tag in its environment. Ending the pen stops and kills
everything below the engine, everything in its process group, and every process
carrying the tag: a tool that left for a session of its own, or whose parent died
and left it to launchd, still carries the tag.
"""

from __future__ import annotations

import psutil

from .base import PEN_ENV, ChildSetup, pen_tag
from .sweep import alive, descendants, in_groups, kill_all, tagged


class ProcessGroupContainment:
    name = "process-group"

    def __init__(self, key: str) -> None:
        self.key = key
        # The engine CLIs started into each pen, as psutil handles: a handle whose pid
        # has since gone to another process no longer counts as running.
        self._roots: dict[str, dict[int, psutil.Process]] = {}

    def describe(self) -> str:
        return (
            "each engine runs in a process group of its own, and a stop kills that group, "
            "the engine's process tree and every process carrying its tag"
        )

    def child_setup(self, pen: str) -> ChildSetup:
        return ChildSetup(env={PEN_ENV: pen_tag(self.key, pen)})

    def adopt(self, pen: str, pid: int) -> None:
        try:
            self._roots.setdefault(pen, {})[pid] = psutil.Process(pid)
        except psutil.Error:
            # Gone already; its group id (its pid) still names whatever it left behind.
            self._roots.setdefault(pen, {})[pid] = None  # type: ignore[assignment]

    def adopted_pids(self) -> set[int]:
        return {pid for roots in self._roots.values() for pid in roots}

    def members(self, pen: str) -> list[psutil.Process]:
        roots = self._roots.get(pen, {})
        running = [pid for pid, handle in roots.items() if handle is not None and alive(handle)]
        found = {p.pid: p for p in descendants(running)}
        # The engine is a session leader: its process group id is its own pid, and no
        # new process takes a pid that still names a process group.
        found.update((p.pid, p) for p in in_groups(roots))
        found.update((p.pid, p) for p in tagged(PEN_ENV, pen_tag(self.key, pen)).get("", []))
        return list(found.values())

    async def end(self, pen: str) -> int:
        killed = await kill_all(lambda: self.members(pen))
        self._roots.pop(pen, None)
        return killed

    def release(self) -> None:
        self._roots.clear()

    def keeper_args(self) -> list[str]:
        return ["--tag", f"{PEN_ENV}={pen_tag(self.key, '')}"]

    def pens_left(self) -> list[str]:
        return sorted(tagged(PEN_ENV, pen_tag(self.key, "")))
