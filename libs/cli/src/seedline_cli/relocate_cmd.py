"""`seedline relocate`: move a live conversation to another machine."""

from __future__ import annotations

import asyncio

import typer
from rich.markup import escape
from rich.table import Table

from seedline_contracts import subjects
from seedline_platform.settings import Settings

from .config import check_name, load_settings
from .console import out, print_json
from .errors import reports_errors
from .nats_client import ReplyError, call, connected

TONE_STYLES = {"info": "green", "warning": "yellow"}
HINTS = {
    "runner_offline": "`seedline runners` lists the machines online now.",
    "not_found": "`seedline sessions` lists the live conversations and their ids.",
}


async def _relocate(settings: Settings, conversation: str, node: str) -> dict:
    async with connected(settings) as nc:
        try:
            return await call(
                nc,
                subjects.API_SESSIONS_RELOCATE,
                {"session_id": conversation, "node_id": node},
                service="continuity-resolver",
                timeout=settings.open_timeout_seconds + 5,
            )
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
    reply = asyncio.run(_relocate(settings, conversation, node))
    if json_out:
        print_json(reply)
        return
    notice = reply.get("notice") or {}
    if notice.get("console"):
        out.print(f"[{TONE_STYLES.get(notice.get('tone'), '')}]{escape(notice['console'])}[/]")
    continuity = reply.get("continuity") or {}
    brief = reply.get("brief")
    table = Table(show_header=False, box=None)
    table.add_row("conversation", escape(reply["session_id"]))
    table.add_row("machine", escape(reply["node_id"]))
    table.add_row("outcome", escape(reply["outcome"]))
    table.add_row("decision", escape(f"{continuity.get('mode')}: {continuity.get('reason')}"))
    table.add_row(
        "brief",
        "none"
        if brief is None
        else f"{brief['rows']} entries, {brief['chars']} characters, "
        f"{brief['omitted_rows']} left out, up to seq {brief['until_seq']}",
    )
    out.print(table)
