"""Whether a process id is in use: for the state a process left on disk (a lock, a state file)
that names the process that wrote it."""

from __future__ import annotations

import os


def pid_exists(pid: int) -> bool:
    """The process exists, a zombie included."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
