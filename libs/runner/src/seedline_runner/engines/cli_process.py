"""Running an engine's command line as a child process, reading its output as it comes.

The child gets a process group of its own, so stopping a turn also stops the tools
it started. On Linux it is also told to die with the runner: an engine left running
after its runner is gone would go on changing the checkout with nobody recording
what it does. Inside a runner, the child starts in its conversation's pen
(``containment``), which holds every process below it, so a stop ends them all.
"""

from __future__ import annotations

import asyncio
import ctypes
import os
import signal
import subprocess
import sys
from collections import deque
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import structlog

from ..containment import bound_pen
from .base import EngineError

log = structlog.get_logger(__name__)

# Tool results can be large single lines.
LINE_LIMIT = 32 * 1024 * 1024
_STDERR_TAIL_LINES = 20
_PR_SET_PDEATHSIG = 1


@dataclass(frozen=True)
class CliRun:
    returncode: int
    stderr_tail: str


def _die_with_parent() -> None:
    # Runs in the child between fork and exec: only async-signal-safe work here.
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)


def _child_preexec(pen_preexec: Callable[[], None] | None) -> Callable[[], None] | None:
    linux = sys.platform == "linux"
    if pen_preexec is None:
        return _die_with_parent if linux else None

    def preexec() -> None:
        pen_preexec()
        if linux:
            _die_with_parent()

    return preexec


async def run_cli(
    argv: Sequence[str],
    *,
    label: str,
    cwd: Path | None,
    env: Mapping[str, str],
    stdin_text: str | None,
    on_line: Callable[[str], Awaitable[None]],
) -> CliRun:
    """Run ``argv`` to its end, awaiting ``on_line`` for each line of its output in turn.

    ``label`` names the engine in errors ("Claude Code"). Cancelling the call kills
    the child's whole process group.
    """
    pen = bound_pen()
    setup = pen.child_setup() if pen is not None else None
    try:
        process = await asyncio.create_subprocess_exec(
            *argv,
            stdin=asyncio.subprocess.PIPE if stdin_text is not None else asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            cwd=cwd,
            env=dict(env) | (setup.env if setup is not None else {}),
            limit=LINE_LIMIT,
            start_new_session=True,
            preexec_fn=_child_preexec(setup.preexec if setup is not None else None),
        )
    except (OSError, subprocess.SubprocessError) as error:
        # SubprocessError: the pen could not take the child (its preexec failed).
        why = getattr(error, "strerror", None) or error
        raise EngineError(
            f"{label} could not be started ({argv[0]}): {why}."
        ) from error
    if pen is not None:
        pen.adopt(process.pid)
    try:
        return await _read(process, label, stdin_text, on_line)
    except BaseException:
        kill_group(process)
        await process.wait()
        raise


async def _read(
    process: asyncio.subprocess.Process,
    label: str,
    stdin_text: str | None,
    on_line: Callable[[str], Awaitable[None]],
) -> CliRun:
    assert process.stdout is not None and process.stderr is not None
    stderr_tail: deque[str] = deque(maxlen=_STDERR_TAIL_LINES)
    stderr_reader = asyncio.create_task(_collect_lines(process.stderr, stderr_tail))
    try:
        if stdin_text is not None:
            await _write_and_close(process, stdin_text)
        try:
            async for raw in process.stdout:
                await on_line(raw.decode("utf-8", errors="replace"))
        except ValueError as error:
            raise EngineError(f"{label} wrote a line longer than this machine reads.") from error
        returncode = await process.wait()
        await stderr_reader
    finally:
        stderr_reader.cancel()
    return CliRun(returncode=returncode, stderr_tail="\n".join(stderr_tail))


async def _write_and_close(process: asyncio.subprocess.Process, text: str) -> None:
    assert process.stdin is not None
    try:
        process.stdin.write(text.encode("utf-8"))
        await process.stdin.drain()
        process.stdin.close()
        await process.stdin.wait_closed()
    except (BrokenPipeError, ConnectionResetError):
        # It exited before reading its prompt; its output and exit code say why.
        pass


async def _collect_lines(reader: asyncio.StreamReader, into: deque[str]) -> None:
    async for raw in reader:
        into.append(raw.decode("utf-8", errors="replace").rstrip())


def kill_group(process: asyncio.subprocess.Process) -> None:
    if process.returncode is not None:
        return
    try:
        os.killpg(process.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def failure_message(label: str, run: CliRun, detail: str | None = None) -> str:
    """Why a run produced no answer, in one sentence with the CLI's own last words."""
    if detail is None:
        detail = _stderr_detail(run.stderr_tail)
    message = f"{label} stopped (exit code {run.returncode}) without answering"
    return message + (f": {detail}" if detail else ".")


def _stderr_detail(tail: str) -> str | None:
    # A CLI may print a backtrace after its error line: the error line says more.
    lines = [line.strip() for line in tail.splitlines() if line.strip()]
    for line in lines:
        if line.lower().startswith("error"):
            return line
    return lines[-1] if lines else None
