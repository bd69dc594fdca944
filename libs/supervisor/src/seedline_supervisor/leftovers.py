"""What an earlier `seedline up` that did not stop cleanly (kill -9, a crash, a machine that
lost power) left running on this data folder, named before it is dealt with.

- Its nats-server is stopped (SIGTERM, so it closes its JetStream store cleanly): this
  `seedline up` starts one of its own, its child, which it can supervise and stop.
- Its Postgres is used as it is: pg_ctl runs it as nobody's child either way, and pgserver
  takes over a postmaster already running on the folder. It is stopped with the rest.
"""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

from seedline_devtools.embedded import pid_alive

from .lock import Holder, is_nats_server_of

STOP_WAIT_SECONDS = 10.0


def stop_left_nats(left: Holder, home: Path, wait: float = STOP_WAIT_SECONDS) -> str:
    """Stop the nats-server ``left`` names; returns the sentence that says so."""
    pid = left.nats_pid
    assert pid is not None
    _end(pid, home, wait)
    return (f"An earlier `seedline up` on this folder (pid {left.pid}) ended without stopping "
            f"its nats-server (pid {pid}, port {left.nats_port}); that server has been stopped, "
            "and this one starts its own on the same data.")


def _end(pid: int, home: Path, wait: float) -> None:
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.kill(pid, sig)
        except ProcessLookupError:
            return
        deadline = time.monotonic() + wait
        while time.monotonic() < deadline:
            if not pid_alive(pid) or not is_nats_server_of(pid, home):
                return
            time.sleep(0.05)


def left_postgres(data_dir: Path) -> int | None:
    """The pid of a Postgres already running on ``data_dir``, before this run starts one."""
    try:
        pid = int((data_dir / "postmaster.pid").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return None
    if not pid_alive(pid):
        return None
    try:
        # A stale pid file may name a pid since reused by another program.
        command = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")[0]
    except OSError:
        return pid  # no /proc to tell: Postgres' own check (the pid lives) is the one here
    return pid if command.endswith((b"postgres", b"postmaster")) else None


def adopted_postgres_text(pid: int, data_dir: Path) -> str:
    return (f"Postgres (pid {pid}) was still running on {data_dir}, left by an earlier "
            "`seedline up` that did not stop cleanly; it is used as it is and stopped with "
            "everything else.")
