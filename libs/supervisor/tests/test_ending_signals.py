"""Which signals stop `seedline up` in order, and its output once its terminal is gone."""

from __future__ import annotations

import signal
import subprocess
import sys

from seedline_supervisor.ending_signals import describe, ending_signals


def test_every_signal_that_would_end_it_is_caught_and_no_other():
    caught = set(ending_signals())
    assert {signal.SIGHUP, signal.SIGINT, signal.SIGTERM, signal.SIGQUIT, signal.SIGUSR1,
            signal.SIGPIPE, signal.SIGRTMIN, signal.SIGRTMAX} <= caught
    # Ignored or stopping by default, uncatchable, or a fault of the process itself.
    assert not caught & {signal.SIGCHLD, signal.SIGWINCH, signal.SIGCONT, signal.SIGTSTP,
                         signal.SIGKILL, signal.SIGSTOP, signal.SIGSEGV, signal.SIGBUS}


def test_a_signal_is_described_by_why_it_came_where_that_is_known():
    assert describe(signal.SIGHUP) == "SIGHUP: its terminal was closed"
    assert describe(signal.SIGINT) == "SIGINT: Ctrl-C"
    assert describe(signal.SIGUSR1) == "SIGUSR1"


GONE_READER = """
from seedline_supervisor.terminal import show
from seedline_cli.console import out
for n in range(2000):
    show(f"line {n} " + "x" * 100)
print("done", file=__import__("sys").stderr)
assert out.quiet
"""


def test_output_to_a_reader_that_went_away_is_dropped_without_an_error():
    proc = subprocess.Popen([sys.executable, "-c", GONE_READER], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    proc.stdout.close()  # the reader goes: every write now fails with EPIPE
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    assert err.strip() == "done"  # no traceback, no "Exception ignored" at the last flush
