"""`seedline conversations`: the live conversations, where they run and how long they have idled."""

from __future__ import annotations

import asyncio
from datetime import datetime, timezone
from typing import Optional

import typer
from rich.markup import escape
from rich.table import Table

from msgspec import to_builtins

from seedline_client import SeedlineClient
from seedline_contracts.sessions import SessionsListRequest
from seedline_contracts.times import parse_rfc3339
from seedline_platform.settings import Settings

from .config import check_name, load_settings
from .console import add_id_column, add_text_column, out, print_json, print_table
from .errors import reports_errors
from .nats_client import answered, connected
from .runners_cmd import age_text, read_presence


async def _live(settings: Settings, instance: str | None) -> tuple[list[dict], dict[str, str]]:
    """The live conversations, and the label of every machine online now."""
    async with connected(settings) as nc:
        reply = await answered(SeedlineClient(nc).live(SessionsListRequest(instance)))
        try:
            online = {row["node_id"]: row["label"] for row in await read_presence(nc)}
        except Exception:
            online = {}
    return [to_builtins(c) for c in reply.conversations], online


def _idle_seconds(last_activity_at: str, now: datetime) -> float | None:
    try:
        return round((now - parse_rfc3339(last_activity_at)).total_seconds(), 1)
    except (TypeError, ValueError):
        return None


@reports_errors
def conversations(
    ctx: typer.Context,
    instance: Optional[str] = typer.Option(
        None, "--instance", help="Only the conversations of this instance."
    ),
    json_out: bool = typer.Option(False, "--json", help="Print the conversations as JSON."),
) -> None:
    """List the live conversations: repo, machine, engine, outcome and idle time.

    The runner-gateway stops a conversation once it has idled for SEEDLINE_IDLE_STOP_MINUTES.
    """
    if instance is not None:
        check_name("--instance", instance, "bd43f4de")
    settings = load_settings(ctx)
    conversations, online = asyncio.run(_live(settings, instance))
    now = datetime.now(timezone.utc)
    for row in conversations:
        row["idle_seconds"] = _idle_seconds(row.get("last_activity_at", ""), now)
        row["machine_online"] = row.get("node_id") in online
    conversations.sort(key=lambda r: (r.get("instance_id", ""), r.get("repo", "")))
    if json_out:
        print_json({"ok": True, "instance_id": instance, "conversations": conversations})
        return
    if not conversations:
        where = f" on instance {instance}" if instance else ""
        out.print(
            f"No live conversations{escape(where)}. Open one with `seedline open` "
            "(see `seedline open --help`)."
        )
        return
    table = Table(title=f"{len(conversations)} live conversation(s)", title_justify="left")
    add_id_column(table, "conversation", [row.get("session_id", "") for row in conversations])
    columns = ["repo", "machine", "engine", "outcome", "idle"]
    if instance is None:
        columns.insert(0, "instance")
    for column in columns:
        add_text_column(table, column)
    for row in conversations:
        node = row.get("node_id", "")
        if node in online:
            label = online[node]
            machine = escape(node if label == node else f"{node} ({label})")
        else:
            machine = f"{escape(node)} [yellow](offline)[/]"
        idle = row["idle_seconds"]
        cells = [
            escape(row.get("session_id", "")),
            escape(row.get("repo", "")),
            machine,
            escape(row.get("engine", "")),
            escape(row.get("outcome") or "-"),  # as the machine finally had it
            "-" if idle is None else age_text(idle),
        ]
        if instance is None:
            cells.insert(1, escape(row.get("instance_id", "")))
        table.add_row(*cells)
    print_table(table)
