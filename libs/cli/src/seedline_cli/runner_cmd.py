"""`seedline runner`: run this machine as a runner (presence, launches, turns)."""

from __future__ import annotations

import asyncio
import inspect
import signal
from typing import Optional

import typer
from rich.markup import escape

from .config import check_name, load_settings
from .console import err
from .errors import OperationFailed, UsageProblem, reports_errors
from .preflight import nats_answers


def _run_runner_function():
    try:
        from seedline_runner import run_runner
    except ImportError:
        raise OperationFailed(
            "This installation has no runner yet (seedline_runner.run_runner is missing). "
            "Update the seedline-runner package and run the command again."
        ) from None
    return run_runner


@reports_errors
def runner(
    ctx: typer.Context,
    node_id: str = typer.Option(..., "--node-id", help="This machine's id, e.g. mac-mini-1."),
    label: Optional[str] = typer.Option(
        None, "--label", help='The name people see, e.g. "Your Mac mini".'
    ),
    engine: list[str] = typer.Option(
        ["scripted"],
        "--engine",
        help="Engine to offer (scripted, claude, openai); repeat for more.",
    ),
) -> None:
    """Run this machine as a runner that hosts engines.

    Announces itself in the seedline_runners bucket and serves launches, turns and
    stops until Ctrl-C or SIGTERM.
    """
    check_name("--node-id", node_id, "mac-mini-1")
    if not all(name.strip() for name in engine):
        raise UsageProblem("--engine must not be empty; for example --engine scripted.")
    run_runner = _run_runner_function()
    settings = load_settings(ctx)
    asyncio.run(nats_answers(settings))
    label = label or node_id
    err.print(
        f"Runner {escape(node_id)} ({escape(label)}) with engines {escape(', '.join(engine))}; "
        "Ctrl-C stops it."
    )
    try:
        result = run_runner(settings.nats_url, node_id, label, list(engine))
        if inspect.isawaitable(result):
            asyncio.run(_until_signalled(result))
    except KeyboardInterrupt:
        pass
    except ValueError as exc:
        # The runner checks its engines before it connects: an unknown name, a missing setting.
        raise UsageProblem(str(exc)) from None


async def _until_signalled(awaitable) -> None:
    """Cancel the runner on SIGTERM or SIGINT so it can withdraw its presence cleanly."""
    task = asyncio.ensure_future(awaitable)
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, task.cancel)
    try:
        await task
    except asyncio.CancelledError:
        pass
