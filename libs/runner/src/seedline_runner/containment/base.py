"""The one interface every containment implements, and the pen a conversation's engine runs in.

A pen holds every process one conversation's engine starts: the CLI, its tools, and
whatever those start, including processes that leave for a process group or session
of their own. Ending a pen kills all of them and returns only once none is left, so
a stop that replies "stopped" means nothing of that conversation runs any more.

The pen travels to the code that spawns the engine in a context variable: the
runner binds it when it starts the conversation's worker task, and
``cli_process.run_cli`` asks for it, so engine adapters need not know about it.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable
from contextvars import ContextVar
from pathlib import Path
from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

# Every engine process carries ``<runner key>/<pen>`` here; a process keeps it across
# setsid and re-parenting, which is how a sweep or a restarted runner recognises it.
PEN_ENV = "SEEDLINE_RUNNER_PEN"
# Longest a stop waits for a pen to empty (only a process stuck in the kernel outlasts
# SIGKILL); well inside the gateway's wait for the stop's reply (10 s by default).
END_TIMEOUT_SECONDS = 5.0


@dataclass(frozen=True)
class ChildSetup:
    """What a new engine process needs so that its pen holds it from its first instruction."""

    env: dict[str, str]
    # Runs in the child between fork and exec (only async-signal-safe work there).
    preexec: Callable[[], None] | None = None


@runtime_checkable
class Containment(Protocol):
    # "cgroup", "subreaper" or "process-group": what a runner says at start.
    name: str

    def describe(self) -> str:
        """One sentence on how this machine holds its engines' processes."""
        ...

    def child_setup(self, pen: str) -> ChildSetup: ...

    def adopt(self, pen: str, pid: int) -> None:
        """Note a process just started into ``pen`` (the engine CLI itself)."""
        ...

    async def end(self, pen: str) -> int:
        """Kill every process of ``pen`` and wait until none is left; how many were killed."""
        ...

    def pens_left(self) -> list[str]:
        """Pens of this runner's key that hold processes now (what a dead run left)."""
        ...

    def keeper_args(self) -> list[str]:
        """How the keeper finds every pen of this runner (``keeper.py``'s arguments)."""
        ...

    def release(self) -> None:
        """Tidy up after a clean stop (every pen has ended)."""
        ...


def pen_tag(key: str, pen: str) -> str:
    return f"{key}/{pen}"


@dataclass
class Pen:
    """One conversation's pen, as the code spawning its engine sees it."""

    containment: Containment
    name: str
    # Called with (step id, prompt) when the engine starts on a message, and with
    # (None, "") once it has answered it.
    on_step: Callable[[str | None, str], None] | None = None
    pids: list[int] = field(default_factory=list)
    # What on_step made of the step the engine is on (the runner's StepNote).
    note: object | None = None

    def child_setup(self) -> ChildSetup:
        return self.containment.child_setup(self.name)

    def adopt(self, pid: int) -> None:
        self.pids.append(pid)
        self.containment.adopt(self.name, pid)


_bound: ContextVar[Pen | None] = ContextVar("seedline_runner_pen", default=None)


def bind_pen(pen: Pen | None):
    """Bind ``pen`` in the current context; tasks created afterwards inherit it."""
    return _bound.set(pen)


def unbind_pen(token) -> None:
    _bound.reset(token)


def bound_pen() -> Pen | None:
    return _bound.get()


def note_step(step_id: str | None, prompt: str = "") -> None:
    """Tell the bound pen which message its engine works on now (None: it has answered).

    A stop, or a runner started again, reads that step back from the engine's own
    transcript for what the engine recorded but did not get to say on its output."""
    pen = _bound.get()
    if pen is not None and pen.on_step is not None:
        pen.on_step(step_id, prompt)


class Keeper:
    """The runner's side of its keeper (``keeper.py``): started at start, closed on a clean stop."""

    def __init__(self, args: list[str]) -> None:
        script = Path(__file__).with_name("keeper.py")
        # It needs none of the runner's environment (API keys and the like), and
        # without it no sweep by environment mistakes it for an engine's process.
        env = {k: v for k, v in os.environ.items() if k in ("PATH", "PYTHONPATH", "LANG")}
        # A session of its own: a signal to the runner's process group does not reach it.
        self._process = subprocess.Popen(
            [sys.executable, str(script), *args],
            stdin=subprocess.PIPE,
            env=env,
            start_new_session=True,
        )

    @property
    def pid(self) -> int:
        return self._process.pid

    def close(self, timeout: float = 15.0) -> None:
        """Close the pipe (the keeper ends what is left, nothing after a clean stop) and wait."""
        assert self._process.stdin is not None
        self._process.stdin.close()
        try:
            self._process.wait(timeout)
        except subprocess.TimeoutExpired:
            self._process.kill()
            self._process.wait()
