"""What `seedline up` prints goes to a terminal that may be gone.

A closed terminal (which also sends SIGHUP) makes every later write fail with EIO, and a
reader of a pipe that ended makes it fail with EPIPE. `seedline up` must still stop what it
started, in order, so a write that fails turns its output off instead of raising; the
process's stdout then points at /dev/null, so the interpreter's last flush at exit has
nowhere to fail either.
"""

from __future__ import annotations

import os
import sys
from typing import Any

from seedline_cli.console import out


def show(*objects: Any, **options: Any) -> None:
    """out.print, or nothing once the terminal is gone."""
    if out.quiet:
        return
    try:
        out.print(*objects, **options)
    except OSError:  # EIO from a closed terminal
        _gone()
    except SystemExit:
        # rich turns a broken pipe into SystemExit(1), having turned itself quiet and its
        # stdout to /dev/null (Console.on_broken_pipe): here that is only output gone.
        if not out.quiet:
            raise


def _gone() -> None:
    out.quiet = True
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError):
        pass
