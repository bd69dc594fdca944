"""`seedline stop`: stop a live conversation on its machine."""

from __future__ import annotations

import asyncio

import typer
from rich.markup import escape

from msgspec import to_builtins

from seedline_client import SeedlineClient
from seedline_contracts.sessions import StopRequest
from seedline_platform.settings import Settings

from .config import check_name, load_settings
from .console import out, print_json
from .errors import UsageProblem, reports_errors
from .nats_client import ReplyError, answered, connected

MAX_REASON_CHARS = 200


async def _stop(settings: Settings, conversation: str, reason: str) -> dict:
    async with connected(settings) as nc:
        try:
            reply = await answered(SeedlineClient(nc).stop(
                StopRequest(conversation, reason), settings.launch_timeout_seconds + 10))
            return to_builtins(reply)
        except ReplyError as exc:
            if exc.code == "not_found":
                raise ReplyError(
                    exc.code,
                    f"{exc.message} `seedline conversations` lists the live conversations and "
                    "their ids.",
                ) from None
            raise


@reports_errors
def stop(
    ctx: typer.Context,
    conversation: str = typer.Argument(..., help="Conversation id, as `seedline open` printed it."),
    reason: str = typer.Option(
        "requested", "--reason", help="Why it is stopped; recorded with the stop."
    ),
    json_out: bool = typer.Option(False, "--json", help="Print the reply as JSON."),
) -> None:
    """Stop a live conversation: its machine ends the engine.

    Its timeline stays; the repo's next message or `seedline open` starts a new one.
    """
    check_name("CONVERSATION", conversation, "csess_21b8d1b9")
    if not reason.strip():
        raise UsageProblem('--reason must not be empty; for example --reason "done for today".')
    if len(reason) > MAX_REASON_CHARS:
        raise UsageProblem(f"--reason is {len(reason)} characters; keep it to {MAX_REASON_CHARS}.")
    settings = load_settings(ctx)
    reply = asyncio.run(_stop(settings, conversation, reason))
    # Contract 1.1: `stopped` says whether it was live; a reply without it is from a gateway
    # that answers only for live conversations.
    stopped = bool(reply.get("stopped", True))
    if json_out:
        print_json({**reply, "stopped": stopped, "session_id": conversation, "reason": reason})
        return
    if stopped:
        out.print(f"Stopped conversation {escape(conversation)} ({escape(reason)}).")
    else:
        out.print(
            f"Conversation {escape(conversation)} was not running, so there was nothing to stop. "
            "`seedline conversations` lists the live ones."
        )
