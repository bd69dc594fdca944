"""The keeper: ends every engine process of a runner the moment that runner dies.

A runner starts one keeper, a small process in a session of its own, and holds the
only write end of a pipe to the keeper's standard input. However the runner ends
(a clean stop, a crash, SIGKILL), the kernel closes that pipe; the keeper then kills
whatever is left in the runner's pens and exits. So no tool of a dead runner goes on
changing a checkout unrecorded until a new run starts; the new run still publishes
what the engines recorded before they were killed.

Run as a file (``python keeper.py --cgroup ROOT`` or ``--tag NAME=PREFIX``), not as a
module of the package, so it starts with the standard library alone (psutil only for
``--tag``).
"""

from __future__ import annotations

import os
import signal
import sys
import time
from pathlib import Path

_DEADLINE_SECONDS = 10.0


def _cgroup_pids(root: Path) -> list[int]:
    pids = []
    for procs in root.rglob("cgroup.procs"):
        try:
            pids += [int(pid) for pid in procs.read_text().split()]
        except (OSError, ValueError):
            continue
    return pids


def _populated(folder: Path) -> bool:
    try:
        return "populated 1" in (folder / "cgroup.events").read_text()
    except OSError:
        return False


def end_cgroups(root: Path) -> None:
    deadline = time.monotonic() + _DEADLINE_SECONDS
    while _cgroup_pids(root) and time.monotonic() < deadline:
        for pen in [p for p in root.iterdir() if p.is_dir()] if root.is_dir() else []:
            try:
                (pen / "cgroup.kill").write_text("1")
            except OSError:
                for pid in _cgroup_pids(pen):
                    try:
                        os.kill(pid, signal.SIGKILL)
                    except OSError:
                        pass
        time.sleep(0.02)
    while _populated(root) and time.monotonic() < deadline:
        time.sleep(0.02)  # killed, not yet quite gone
    # Empty cgroups are tidied away; what the runner noted in its state folder stays
    # for its next run, which publishes what the engines recorded.
    for pen in [p for p in root.iterdir() if p.is_dir()] if root.is_dir() else []:
        try:
            pen.rmdir()
        except OSError:
            pass
    try:
        root.rmdir()
    except OSError:
        pass


def end_tagged(name: str, prefix: str) -> None:
    import psutil

    me = os.getpid()
    deadline = time.monotonic() + _DEADLINE_SECONDS

    def tagged() -> list[psutil.Process]:
        found = []
        for process in psutil.process_iter():
            try:
                value = process.environ().get(name)
                if process.pid != me and value is not None and value.startswith(prefix):
                    if process.status() != psutil.STATUS_ZOMBIE:
                        found.append(process)
            except (psutil.Error, OSError):
                continue
        return found

    while (found := tagged()) and time.monotonic() < deadline:
        # Stop all first, so none forks away between finding and killing.
        for signum in (signal.SIGSTOP, signal.SIGKILL):
            for process in found:
                try:
                    process.send_signal(signum)
                except psutil.Error:
                    pass
        psutil.wait_procs(found, timeout=1.0)


def main(argv: list[str]) -> int:
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # a Ctrl-C meant for the runner
    # Blocks until the runner closes its end: on purpose, or by dying.
    while sys.stdin.buffer.read(4096):
        pass
    mode, value = argv[1], argv[2]
    if mode == "--cgroup":
        end_cgroups(Path(value))
    elif mode == "--tag":
        name, _, prefix = value.partition("=")
        end_tagged(name, prefix)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
