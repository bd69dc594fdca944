"""What `seedline up` tells `seedline status` about the processes it supervises: a small
JSON file in SEEDLINE_HOME, rewritten whole (write, then rename) on every change. The
supervisor (seedline_supervisor) writes it; it lives here, with its reader, so that the CLI
needs no supervisor to read it."""

from __future__ import annotations

import json
import os
from datetime import datetime, timezone
from pathlib import Path

from seedline_platform import supervised

STATE_NAME = supervised.STATE_NAME


def now_text() -> str:
    return datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def path_in(home: Path) -> Path:
    return home / STATE_NAME


def write(path: Path, processes: list[dict]) -> None:
    body = {"up_pid": os.getpid(), "updated_at": now_text(), "processes": processes}
    partial = path.with_suffix(".tmp")
    partial.write_text(json.dumps(body, indent=1) + "\n")
    os.replace(partial, path)


def read(home: Path) -> list[dict] | None:
    """The processes of the `seedline up` running on this folder; None when none runs."""
    return supervised.processes(home)
