"""CPU seconds a process tree spent, read from /proc, and the scale-out projection built on
them (row 1 of the suite: partitioned timeline-writers).

These machines have two cores, so k partitioned writers cannot show what they would reach
on a machine with enough cores. What can be measured here is what each part costs: CPU
seconds per 1,000 entries in the writers, nats-server and Postgres over a fixed load. The
projection then assumes, and says so next to its figures:
- each timeline-writer is one Python process, so at most one core: k writers give k cores;
- each writer's Postgres connection is a backend process of its own: k cores as well;
- nats-server keeps each stream's writes in order on one core at a time, and an entry is
  written to two streams (SEEDLINE_INGEST, then SEEDLINE_TIMELINE): its cost per entry is
  spread over at most NATS_CORES cores, whatever k;
- the costs per entry stay what they were here (no contention, no batching change).
"""

from __future__ import annotations

import os
from pathlib import Path

TICKS = os.sysconf("SC_CLK_TCK")
NATS_CORES = 2  # one per stream an entry is written to


def _fields(pid: int) -> list[str] | None:
    """/proc/<pid>/stat from its third field on (the name may hold spaces)."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return text[text.rindex(")") + 2:].split()


def _children() -> dict[int, list[int]]:
    found: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and (fields := _fields(int(entry.name))) is not None:
            found.setdefault(int(fields[1]), []).append(int(entry.name))
    return found


def tree_cpu_seconds(root: int) -> float:
    """User and system CPU of `root`, of the children it has reaped, and of every
    descendant still running (Postgres backends are children of the postmaster)."""
    children = _children()
    total, stack, first = 0.0, [root], True
    while stack:
        pid = stack.pop()
        fields = _fields(pid)
        if fields is None:
            continue
        utime, stime, cutime, cstime = (int(v) for v in fields[11:15])
        total += utime + stime + (cutime + cstime if first else 0)
        first = False
        stack += children.get(pid, [])
    return total / TICKS


def per_thousand(before: dict[str, float], after: dict[str, float], entries: int) -> dict:
    return {part: (after[part] - before[part]) * 1000 / entries for part in before}


def _limits(costs: dict[str, float], k: int) -> dict[str, float]:
    """Entries/s each part allows at k writers, from CPU seconds per 1,000 entries at k = 1
    (module docstring: the assumptions)."""
    return {"timeline-writers": k * 1000 / costs["writers"],
            "Postgres": k * 1000 / costs["postgres"],
            "nats-server": NATS_CORES * 1000 / costs["nats"]}


def projection(costs: dict[str, float], ks=(1, 2, 4, 8)) -> dict[str, float]:
    """Entries/s at k writers on a machine with enough cores: the tightest limit."""
    return {str(k): min(_limits(costs, k).values()) for k in ks}


def limited_by(costs: dict[str, float], k: int) -> str:
    limits = _limits(costs, k)
    return min(limits, key=limits.get)
