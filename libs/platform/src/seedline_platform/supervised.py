"""What `seedline up` says of the processes it supervises (SEEDLINE_HOME/up-processes.json,
written by seedline_supervisor): read by the CLI and the web process, so that a service
being restarted is told as that, not as one nobody started."""

from __future__ import annotations

import json
from pathlib import Path

from .pids import pid_exists

STATE_NAME = "up-processes.json"
# The states the supervisor writes (seedline_supervisor.supervisor).
RUNNING, RESTARTING, CRASH_LOOP = "running", "restarting", "crash loop"


def processes(home: Path) -> list[dict] | None:
    """The processes of the `seedline up` running on this folder; None when none runs."""
    try:
        body = json.loads((home / STATE_NAME).read_text())
        pid = int(body["up_pid"])
        found = list(body["processes"])
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return found if pid_exists(pid) else None


def state_of(home: Path, service: str) -> str | None:
    """How `seedline up` on this folder has `service` (its copies and partitions count as
    it): restarting when any copy is, else the state they share; None when no `seedline up`
    runs here or it does not run that service."""
    found = processes(home) or []
    states = [str(p.get("state")) for p in found if isinstance(p, dict) and (
        p.get("name") == service or str(p.get("name", "")).startswith(f"{service}-"))]
    if not states:
        return None
    return RESTARTING if RESTARTING in states else states[0]
