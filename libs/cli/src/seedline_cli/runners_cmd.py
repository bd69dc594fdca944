"""`seedline runners`: the machines online now, from the seedline_runners KV bucket."""

from __future__ import annotations

import asyncio
import json
from datetime import datetime, timezone

import typer
from nats.aio.client import Client
from nats.js.errors import NotFoundError
from rich.markup import escape
from rich.table import Table

from seedline_contracts import subjects
from seedline_contracts.times import format_utc
from seedline_platform.replay import newest_values
from seedline_platform.settings import Settings

from .config import load_settings
from .console import add_id_column, add_text_column, out, print_json, print_table
from .errors import START_HINT, Unreachable, reports_errors
from .nats_client import connected

WATCH_TIMEOUT = 5.0


def age_text(seconds: float) -> str:
    """A short, rounded-down age: 42 s, 3 min, 5 h 12 min, 2 d 3 h."""
    seconds = max(0, int(seconds))
    if seconds < 60:
        return f"{seconds} s"
    minutes = seconds // 60
    if minutes < 60:
        return f"{minutes} min"
    hours, minutes = divmod(minutes, 60)
    if hours < 48:
        return f"{hours} h {minutes} min" if minutes else f"{hours} h"
    days, hours = divmod(hours, 24)
    return f"{days} d {hours} h" if hours else f"{days} d"


async def read_presence(nc: Client) -> list[dict]:
    """Every live presence key, with the time of its last heartbeat, sorted by node id."""
    found: dict[str, dict] = {}
    try:
        async for key, msg in newest_values(nc.jetstream(), subjects.RUNNERS_BUCKET,
                                            WATCH_TIMEOUT):
            found[key] = _row(key, msg.data, msg.metadata.timestamp)
    except NotFoundError:  # the bucket's stream (BucketNotFoundError is one too)
        raise Unreachable(
            f"The {subjects.RUNNERS_BUCKET} bucket does not exist yet: no Seedline service "
            f"has started on this NATS. {START_HINT}."
        ) from None
    return [found[key] for key in sorted(found, key=lambda k: found[k]["node_id"])]


def _row(key: str, value: bytes, created: datetime | None) -> dict:
    try:
        node_id = subjects.node_from_presence_key(key)
    except Exception:
        node_id = key
    try:
        body = json.loads(value)
        if not isinstance(body, dict):
            raise ValueError
    except ValueError:
        body = {}
    now = datetime.now(timezone.utc)
    return {
        "node_id": str(body.get("node_id") or node_id),
        "label": str(body.get("label") or node_id),
        "engines": list(body.get("engines") or []),
        "stateless_engines": list(body.get("stateless_engines") or []),
        # Protocol 2 (CONTRACT 4.1): the conversations it hosts now, the instances it serves.
        "live": [str(s) for s in body.get("live") or []] if "live" in body else None,
        "instances": [str(i) for i in body.get("instances") or []],
        "protocol": body.get("protocol"),
        # The runner's release (protocol 3): what a machine too old for a launch must update.
        "version": str(body["version"]) if body.get("version") else None,
        "seed_capable": body.get("seed_capable"),
        "heartbeat_at": format_utc(created) if created else None,
        "heartbeat_age_seconds": round((now - created).total_seconds(), 1) if created else None,
        "readable": bool(body),
    }


async def _runners(settings: Settings) -> list[dict]:
    async with connected(settings) as nc:
        return await read_presence(nc)


@reports_errors
def runners(
    ctx: typer.Context,
    json_out: bool = typer.Option(False, "--json", help="Print the machines as JSON."),
) -> None:
    """List the runner machines online now: label, engines and last heartbeat.

    A machine announces itself at least every 10 s; one silent for 30 s is offline
    and drops off this list.
    """
    settings = load_settings(ctx)
    rows = asyncio.run(_runners(settings))
    if json_out:
        print_json({"ok": True, "runners": rows})
        return
    if not rows:
        out.print(
            "No runner machine is online. Start one with "
            '`seedline runner --node-id mac-mini-1 --label "Your Mac mini" --engine scripted`.'
        )
        return
    table = Table(title=f"{len(rows)} runner machine(s) online", title_justify="left")
    add_id_column(table, "machine", [row["node_id"] for row in rows])
    for column in ("label", "engines", "stateless engines", "hosts", "last heartbeat"):
        add_text_column(table, column)
    for row in rows:
        age = row["heartbeat_age_seconds"]
        table.add_row(
            escape(row["node_id"]),
            escape(row["label"]) if row["readable"] else "[yellow]unreadable presence[/]",
            escape(", ".join(row["engines"]) or "-"),
            escape(", ".join(row["stateless_engines"]) or "-"),
            hosts_text(row),
            "-" if age is None else f"{age_text(age)} ago",
        )
    print_table(table)


def hosts_text(row: dict) -> str:
    """What a machine hosts, as its presence says: its live conversations and instances."""
    live = row.get("live")
    text = "-" if live is None else (f"{len(live)} conversation(s)" if live else "nothing")
    if row.get("instances"):
        text += f"; only {escape(', '.join(row['instances']))}"
    return text
