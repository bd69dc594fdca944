"""`seedline rebuild timeline`: replay the stream into a fresh projection and compare digests."""

from __future__ import annotations

import asyncio

import typer
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from seedline_platform.logging import configure_logging

from .config import load_settings
from .console import err, out, print_json
from .errors import FAILED, OperationFailed, reports_errors
from .preflight import nats_answers, postgres_answers

rebuild = typer.Typer(
    help="Rebuild projections from the streams and compare digests.", no_args_is_help=True
)


def _rebuild_timeline_function():
    try:
        from seedline_timeline_writer.rebuild import rebuild_timeline
    except (ImportError, AttributeError):
        raise OperationFailed(
            "This installation has no timeline rebuild yet "
            "(seedline_timeline_writer.rebuild.rebuild_timeline is missing). "
            "Update the timeline-writer package and run the command again."
        ) from None
    return rebuild_timeline


@rebuild.command("timeline")
@reports_errors
def rebuild_timeline_command(
    ctx: typer.Context,
    json_out: bool = typer.Option(False, "--json", help="Print the result as JSON."),
) -> None:
    """Replay the timeline from seq 1 and compare digests.

    Exit code 1 when the rebuilt projection differs from the one before.
    """
    run = _rebuild_timeline_function()
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

    def on_progress(done: int, total: int) -> None:
        progress.update(task, completed=done, total=total)

    with progress:
        try:
            result = asyncio.run(run(settings, on_progress))
        except Exception as exc:
            raise OperationFailed(f"The rebuild failed: {type(exc).__name__}: {exc}") from None
    equal = result.before_digest == result.after_digest
    if json_out:
        print_json(
            {
                "ok": equal,
                "before_digest": result.before_digest,
                "after_digest": result.after_digest,
                "rows": result.rows,
                "seconds": result.seconds,
                "equal": equal,
            }
        )
    else:
        out.print(f"rows           {result.rows}")
        out.print(f"seconds        {result.seconds:.2f}")
        out.print(f"digest before  {result.before_digest}")
        out.print(f"digest after   {result.after_digest}")
        if equal:
            out.print("[bold green]equal[/]")
        else:
            out.print(
                "[bold red]differ[/]: the projection had drifted from the stream; rebuilt now."
            )
    if not equal:
        raise typer.Exit(FAILED)
