"""The signals that end `seedline up`: every one it can catch, so that each stops what it
started before it goes (Postgres above all, which pg_ctl runs as nobody's child and which
nothing else would stop).

A signal's default action ends the process unless it is ignored by default (SIGCHLD,
SIGCONT, SIGURG, SIGWINCH) or stops it (SIGTSTP, SIGTTIN, SIGTTOU); SIGKILL and SIGSTOP
cannot be caught. Faults a process raises on itself (SIGSEGV, SIGBUS, SIGILL, SIGFPE,
SIGTRAP, SIGSYS) are left alone: after a real one Python cannot go on to stop anything.
"""

from __future__ import annotations

import signal

_NOT_ENDING = {"SIGCHLD", "SIGCONT", "SIGURG", "SIGWINCH", "SIGTSTP", "SIGTTIN", "SIGTTOU",
               "SIGKILL", "SIGSTOP"}
_FAULTS = {"SIGSEGV", "SIGBUS", "SIGILL", "SIGFPE", "SIGTRAP", "SIGSYS"}

# Why it came, where a person can tell.
_WHY = {
    "SIGINT": "Ctrl-C",
    "SIGHUP": "its terminal was closed",
    "SIGTERM": "asked to stop",
    "SIGPIPE": "the reader of its output went away",
}


def ending_signals() -> list[signal.Signals]:
    """Every catchable signal whose default action would end the process."""
    skipped = {getattr(signal, name) for name in _NOT_ENDING | _FAULTS if hasattr(signal, name)}
    found = []
    for number in sorted(signal.valid_signals()):
        if number in skipped:
            continue
        try:
            found.append(signal.Signals(number))
        except ValueError:  # a real-time signal without a name of its own
            found.append(number)  # type: ignore[arg-type]
    return found


def describe(number: int) -> str:
    """`SIGHUP: its terminal was closed`; a signal without a reason of its own by its name."""
    try:
        name = signal.Signals(number).name
    except ValueError:
        name = f"signal {number}"
    why = _WHY.get(name)
    return f"{name}: {why}" if why else name
