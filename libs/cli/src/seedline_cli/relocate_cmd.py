"""`seedline relocate`: move a repo's newest conversation, live or stopped, to another machine
(CONTRACT 4.1)."""

from __future__ import annotations

import asyncio

import typer

from msgspec import to_builtins

from seedline_client import SeedlineClient
from seedline_contracts.sessions import RelocateRequest
from seedline_platform.settings import Settings

from .config import check_name, load_settings
from .console import print_json
from .disk_guard import refuse_new_work
from .conversations import print_open_reply
from .errors import UsageProblem, reports_errors
from .nats_client import ReplyError, answered, connected

HINTS = {
    "runner_offline": "`seedline runners` lists the machines online now.",
    "not_found": "`seedline conversations` lists the live conversations and their ids.",
}


async def _relocate(settings: Settings, conversation: str, node: str) -> dict:
    async with connected(settings) as nc:
        try:
            reply = await answered(SeedlineClient(nc).relocate(
                RelocateRequest(conversation, node), settings.open_timeout_seconds + 5))
            return to_builtins(reply)
        except UsageProblem as exc:
            # The command was well formed (names are checked before sending): the service
            # refused it (an older conversation, one still opening), which is exit 1, not
            # the usage-error exit 2.
            raise ReplyError(exc.code, exc.message) from None
        except ReplyError as exc:
            hint = HINTS.get(exc.code)
            if hint:
                raise ReplyError(exc.code, f"{exc.message} {hint}") from None
            raise


@reports_errors
def relocate(
    ctx: typer.Context,
    conversation: str = typer.Argument(..., help="Conversation id, as `seedline open` printed it."),
    node: str = typer.Option(..., "--node", help="Machine to move it to (its node id)."),
    json_out: bool = typer.Option(False, "--json", help="Print the reply as JSON."),
) -> None:
    """Move a conversation to another machine.

    It keeps its id; the old machine stops it, and a fresh engine on the new one starts
    with a brief of the timeline.
    """
    check_name("CONVERSATION", conversation, "csess_21b8d1b9")
    check_name("--node", node, "mac-mini-1")
    settings = load_settings(ctx)
    refuse_new_work()
    reply = asyncio.run(_relocate(settings, conversation, node))
    if json_out:
        print_json(reply)
        return
    print_open_reply(reply)
