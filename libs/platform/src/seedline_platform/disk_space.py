"""How full the disks under SEEDLINE_HOME are: the measure behind seedline_core.disk_full.

The data folders may lie on different disks (the JetStream store or Postgres mounted
elsewhere), so each one's disk is looked at, once per disk, and the fullest is the one named.
A home that does not exist here (another machine's, a container's) is nothing to look at.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

from seedline_core.disk_full import DEFAULT_NEEDED_MB, MB, DiskFull, disk_full

NEEDED_SETTING = "SEEDLINE_MIN_FREE_MB"
# Where `seedline up` keeps what it writes: the nats-server's store, Postgres, the logs.
DATA_FOLDERS = ("nats", "postgres", "logs")


def needed_bytes(env: Mapping[str, str] | None = None) -> int:
    """SEEDLINE_MIN_FREE_MB in bytes (the settings check the value; here a bad one is the
    default, so that measuring never fails)."""
    env = os.environ if env is None else env
    try:
        megabytes = int(env.get(NEEDED_SETTING) or DEFAULT_NEEDED_MB)
    except ValueError:
        megabytes = DEFAULT_NEEDED_MB
    return max(0, megabytes) * MB


def free_bytes(folder: Path) -> int:
    """Bytes an unprivileged process may still write on the folder's disk."""
    stats = os.statvfs(folder)
    return stats.f_bavail * stats.f_frsize


def check(home: Path, needed: int) -> DiskFull | None:
    """The fullest disk among the home's data folders when it is short of ``needed``."""
    seen: set[int] = set()
    fullest: DiskFull | None = None
    for folder in (home, *(home / name for name in DATA_FOLDERS)):
        try:
            device = folder.stat().st_dev
            if device in seen:
                continue
            seen.add(device)
            state = disk_full(str(folder.resolve()), free_bytes(folder), needed)
        except OSError:  # not there (yet), or not ours to look at
            continue
        if state is not None and (fullest is None or state.free < fullest.free):
            fullest = state
    return fullest


def check_here(env: Mapping[str, str] | None = None) -> DiskFull | None:
    """The disk state of this process's SEEDLINE_HOME, as its environment names it."""
    env = os.environ if env is None else env
    return check(Path(env.get("SEEDLINE_HOME") or ".seedline"), needed_bytes(env))
