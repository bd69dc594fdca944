"""`seedline rebuild timeline|conversations`: replay the streams into a fresh projection and
compare digests."""

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


@rebuild.command("timeline")
@reports_errors
def rebuild_timeline_command(
    ctx: typer.Context,
    json_out: bool = typer.Option(False, "--json", help="Print the result as JSON."),
) -> None:
    """Replay the timeline from seq 1 and compare digests.

    Exit code 1 when the rebuilt projection differs from the one before.
    """
    from seedline_timeline_writer.rebuild import rebuild_timeline

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
            result = asyncio.run(rebuild_timeline(settings, on_progress))
        except Exception as exc:
            raise OperationFailed(f"The rebuild failed: {type(exc).__name__}: {exc}") from None
    _report(result.before_digest, result.after_digest, json_out,
            {"rows": result.rows, "seconds": result.seconds})


@rebuild.command("conversations")
@reports_errors
def rebuild_conversations_command(
    ctx: typer.Context,
    json_out: bool = typer.Option(False, "--json", help="Print the result as JSON."),
) -> None:
    """Replay both streams into the continuity-resolver's conversation projection.

    Exit code 1 when the rebuilt projection differs from the one before.
    """
    from seedline_continuity_resolver.rebuild import rebuild_conversations

    settings = load_settings(ctx)
    configure_logging("error", "seedline-cli")
    asyncio.run(nats_answers(settings))
    asyncio.run(postgres_answers(settings))
    with err.status("Replaying the timeline and the conversation events"):
        try:
            before, after = asyncio.run(rebuild_conversations(settings))
        except Exception as exc:
            raise OperationFailed(f"The rebuild failed: {type(exc).__name__}: {exc}") from None
    _report(before, after, json_out, {})


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
