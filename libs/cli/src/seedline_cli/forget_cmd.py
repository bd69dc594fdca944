"""`seedline forget --instance I`: forget an instance (CONTRACT.md Conventions, Erasure)."""

from __future__ import annotations

import asyncio
import getpass

import typer
from rich.markup import escape

from msgspec import to_builtins

from seedline_client import SeedlineClient
from seedline_contracts.instances import MAX_REASON_CHARS, ForgetRequest
from seedline_platform.settings import Settings

from .config import check_name, load_settings
from .console import out, print_json
from .errors import UsageProblem, reports_errors
from .nats_client import answered, connected


def what_it_erases(instance: str) -> str:
    return (
        f"This forgets instance {instance} for good: it destroys the key that seals its "
        "entries and brief texts, so the streams keep nothing anyone can read; it drops its "
        "rows from every projection (timeline, conversations, briefs, machines' launches, "
        "web opens and tokens), so no read, brief, rebuild or replay yields anything of it; "
        "and it records who forgot it, when and why. Not reached: transcripts the engines "
        "keep on runner machines, and what producers published to ingest in the last days "
        "(see the README, Content at rest)."
    )


async def _forget(settings: Settings, instance: str, reason: str, by: str) -> dict:
    async with connected(settings) as nc:
        reply = await answered(SeedlineClient(nc).forget(ForgetRequest(instance, reason, by),
                                                         timeout=30))
        return to_builtins(reply)


@reports_errors
def forget(
    ctx: typer.Context,
    instance: str = typer.Option(..., "--instance", help="The instance to forget."),
    reason: str = typer.Option(..., "--reason", help="Why; recorded with the erasure."),
    yes: bool = typer.Option(False, "--yes", help="Do not ask for confirmation."),
    json_out: bool = typer.Option(False, "--json", help="Print the reply as JSON."),
) -> None:
    """Forget an instance: destroy its key and drop everything of it. Needs the operator's
    NATS user; it cannot be undone."""
    check_name("INSTANCE", instance, "bd43f4de")
    if not reason.strip() or len(reason) > MAX_REASON_CHARS:
        raise UsageProblem(f"--reason must say why, in 1 to {MAX_REASON_CHARS} characters.")
    if not yes:
        out.print(escape(what_it_erases(instance)))
        typed = typer.prompt("Type the instance id to forget it")
        if typed != instance:
            raise UsageProblem("That is not the instance id; nothing was forgotten.")
    settings = load_settings(ctx)
    reply = asyncio.run(_forget(settings, instance, reason, getpass.getuser()))
    if json_out:
        print_json({**reply, "instance_id": instance})
        return
    out.print(f"Forgot instance {escape(instance)}: {reply['entries']:,} entries can no longer "
              "be read, and its rows are gone.")
