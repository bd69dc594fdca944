"""Children that do not outlive the process that started them."""

from __future__ import annotations

import ctypes
import signal
import subprocess
from collections.abc import Iterable

_PR_SET_PDEATHSIG = 1


def die_with_parent(signum: int = signal.SIGTERM) -> None:
    """Linux: the child gets `signum` when its parent dies, even by kill -9.

    Runs in the child between fork and exec (``preexec_fn``); elsewhere it does nothing.
    """
    try:
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signum, 0, 0, 0)
    except Exception:
        pass


def stop_processes(procs: Iterable[subprocess.Popen], timeout: float = 15.0) -> None:
    """SIGTERM to each still running, all at once so they stop side by side; one that
    has not exited within `timeout` seconds is killed."""
    procs = list(procs)
    for proc in procs:
        if proc.poll() is None:
            proc.terminate()
    for proc in procs:
        try:
            proc.wait(timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
