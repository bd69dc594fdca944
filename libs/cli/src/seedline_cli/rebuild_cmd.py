"""`seedline rebuild timeline|conversations`: replay the streams into a fresh projection and
compare digests.

The projection's owner does the work: this runs the service's own `<script> rebuild`
(the timeline-writer's, the continuity-resolver's) and shows the JSON lines it writes.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import tempfile
from typing import Callable

import typer
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from seedline_platform.logging import configure_logging

from .config import load_settings
from .console import err, out, print_json
from .errors import FAILED, OperationFailed, reports_errors
from .preflight import nats_answers, postgres_answers
from .scripts import bin_dir, service_installed

rebuild = typer.Typer(
    help="Rebuild projections from the streams and compare digests.", no_args_is_help=True
)


@rebuild.command("timeline")
@reports_errors
def rebuild_timeline_command(
    ctx: typer.Context,
    json_out: bool = typer.Option(False, "--json", help="Print the result as JSON."),
) -> None:
    """Replay the timeline from seq 1 and compare digests.

    Exit code 1 when the rebuilt projection differs from the one before.
    """
    settings = load_settings(ctx)
    # The rebuild logs as a service does; here only its errors belong on the terminal.
    configure_logging("error", "seedline-cli")
    asyncio.run(nats_answers(settings))
    asyncio.run(postgres_answers(settings))
    progress = Progress(
        TextColumn("Replaying the timeline"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=err,
        transient=True,
        disable=not err.is_terminal,
    )
    task = progress.add_task("replay", total=None)

    def on_progress(figures: dict) -> None:
        progress.update(task, completed=figures["done"], total=figures["total"])

    with progress:
        result = run_service_rebuild("timeline-writer", settings, on_progress)
    _report(result["before_digest"], result["after_digest"], json_out,
            {"rows": result["rows"], "seconds": result["seconds"]})


@rebuild.command("conversations")
@reports_errors
def rebuild_conversations_command(
    ctx: typer.Context,
    json_out: bool = typer.Option(False, "--json", help="Print the result as JSON."),
) -> None:
    """Replay both streams into the continuity-resolver's conversation projection.

    Exit code 1 when the rebuilt projection differs from the one before.
    """
    settings = load_settings(ctx)
    configure_logging("error", "seedline-cli")
    asyncio.run(nats_answers(settings))
    asyncio.run(postgres_answers(settings))
    with err.status("Replaying the timeline and the conversation events"):
        result = run_service_rebuild("continuity-resolver", settings, lambda figures: None)
    _report(result["before_digest"], result["after_digest"], json_out, {})


def run_service_rebuild(service: str, settings, on_progress: Callable[[dict], None]) -> dict:
    """Run `<service> rebuild` with this command's settings; its result, or OperationFailed."""
    if not service_installed(service):
        raise OperationFailed(
            f"The {service} is not installed next to this seedline ({bin_dir()}); "
            "run `make install` in the checkout."
        )
    env = dict(os.environ, SEEDLINE_NATS_URL=settings.nats_url)
    result = error = None
    # stderr goes to a file: a pipe nobody reads while stdout is read could fill and stall it.
    with tempfile.TemporaryFile("w+") as stderr_file, subprocess.Popen(
        [str(bin_dir() / service), "rebuild"], env=env, text=True,
        stdout=subprocess.PIPE, stderr=stderr_file,
    ) as proc:
        assert proc.stdout is not None
        for line in proc.stdout:
            try:
                message = json.loads(line)
            except ValueError:
                continue  # not one of the command's lines
            if "progress" in message:
                on_progress(message["progress"])
            result = message.get("result", result)
            error = message.get("error", error)
        proc.wait()
        stderr_file.seek(0)
        stderr_lines = stderr_file.read().strip().splitlines()
    if result is not None and proc.returncode == 0:
        return result
    reason = error or (stderr_lines[-1] if stderr_lines else f"exit code {proc.returncode}")
    raise OperationFailed(f"The rebuild failed: {reason}")


def _report(before: str, after: str, json_out: bool, details: dict) -> None:
    equal = before == after
    if json_out:
        print_json(
            {"ok": equal, "before_digest": before, "after_digest": after, **details, "equal": equal}
        )
    else:
        for name, value in details.items():
            shown = f"{value:.2f}" if isinstance(value, float) else value
            out.print(f"{name:<15}{shown}")
        out.print(f"digest before  {before}")
        out.print(f"digest after   {after}")
        if equal:
            out.print("[bold green]equal[/]")
        else:
            out.print(
                "[bold red]differ[/]: the projection had drifted from the stream; rebuilt now."
            )
    if not equal:
        raise typer.Exit(FAILED)
