"""`seedline status`: is everything up, and how far behind is each consumer."""

from __future__ import annotations

import asyncio
import os

import typer
from rich.markup import escape
from rich.table import Table

from seedline_core.disk_full import size_text

from .config import load_settings
from .console import add_id_column, add_text_column, out, print_json, print_table
from .errors import FAILED, reports_errors
from .nats_client import connected
from .runners_cmd import age_text, hosts_text
from .sizes import size_text as payload_size_text
from .status_checks import Status, collect
from .surfaces import WEB, unavailable

UP = "[green]up[/]"
DOWN = "[bold red]down[/]"
WARN = "[yellow]warning[/]"
OK = "[green]ok[/]"
UNKNOWN = "[bold red]unknown[/]"
FULL = "[bold red]full[/]"


@reports_errors
def status(
    ctx: typer.Context,
    json_out: bool = typer.Option(False, "--json", help="Print the status as JSON."),
) -> None:
    """Check the running system: NATS, services, consumer lag, machines online.

    Shows nats-server and its JetStream durability (sync_interval), each service, each
    durable consumer's lag, Postgres when its place is known, and the machines online with
    what they host. Exit code 1 when any process this system offers is down (the web process
    included, once it runs here), with what is unavailable meanwhile, or when durability
    cannot be checked; 3 when NATS cannot be reached.
    """
    settings = load_settings(ctx)
    explicit = bool(os.environ.get("SEEDLINE_DATABASE_URL"))

    async def run() -> Status:
        async with connected(settings, name="seedline-status") as nc:
            return await collect(nc, settings, explicit)

    result = asyncio.run(run())
    if json_out:
        print_json(result.to_json())
    else:
        render(result)
    if result.problems:
        raise typer.Exit(FAILED)


def render(s: Status) -> None:
    table = Table(show_header=False, box=None)
    table.add_column(no_wrap=True)
    table.add_column(no_wrap=True)
    table.add_column(overflow="fold")
    table.add_row("nats-server", UP, escape(
        f"{s.nats_url}, version {s.server_version or 'unknown'}, "
        f"max payload {payload_size_text(s.max_payload)}"))
    if s.sync_interval is None:
        table.add_row("durability", UNKNOWN, escape(
            f"unknown: the monitoring endpoint {s.monitor_url} cannot be read; set "
            "SEEDLINE_NATS_MONITOR_URL to the nats-server's monitoring address"))
    else:
        table.add_row("durability", OK if not s.durability_problems else WARN,
                      escape("; ".join([f"sync_interval {s.sync_interval}",
                                        *s.durability_problems])))
    pg = s.postgres
    if pg["checked"]:
        table.add_row("postgres", UP if pg["up"] else DOWN,
                      escape(pg["url"] + ("" if pg["up"] else f": {pg.get('error', '')}")))
    else:
        table.add_row("postgres", "[dim]not checked[/]",
                      escape(f"{pg['url']} (set SEEDLINE_DATABASE_URL to check it from here)"))
    if s.disk is not None:
        if s.disk["full"]:
            table.add_row("disk", FULL, escape(s.disk["message"]))
        else:
            table.add_row("disk", OK, escape(
                f"{s.disk['folder']}: {size_text(s.disk['free_bytes'])} free (Seedline needs "
                f"{size_text(s.disk['needed_bytes'])})"))
    for stream in s.streams:
        table.add_row(stream["name"], UP if stream["exists"] else DOWN,
                      f"{stream['messages']:,} messages" if stream["exists"]
                      else "does not exist: the services create it when they start")
    for svc in s.services:
        if svc.up:
            detail = f"{svc.instances} running" if svc.instances else "answers"
            if svc.requests is not None:
                detail += f", {svc.requests:,} requests, {svc.errors:,} errors"
            if svc.last_error:
                detail += f" (last: {svc.last_error})"
            if svc.side_ports:
                detail += f"; metrics and health at {', '.join(svc.side_ports)}"
        elif svc.name == WEB and not s.web_offered:
            table.add_row(escape(svc.name), "[dim]not running[/]", escape(
                f"never started on this system ({unavailable(WEB)}; the rest works without "
                "it)"))
            continue
        else:
            detail = f"not running: {unavailable(svc.name)} are unavailable"
        table.add_row(escape(svc.name), UP if svc.up else DOWN,
                      escape(f"{detail}; checked by {svc.checked_by}"))
    out.print(table)
    _render_processes(s.processes)
    _render_consumers(s.consumers)
    _render_machines(s.machines)
    if s.problems:
        out.print(f"[bold red]{len(s.problems)} problem(s):[/] {escape('; '.join(s.problems))}.")
        out.print("Service logs are under SEEDLINE_HOME/logs when `seedline up` runs them.")
    else:
        out.print("[bold green]Everything is up.[/]")


def _render_processes(processes: list[dict] | None) -> None:
    """What `seedline up` runs on this SEEDLINE_HOME, as its supervisor sees it."""
    if not processes:
        return
    table = Table(title="Processes of `seedline up` (started again when they stop)",
                  title_justify="left")
    add_id_column(table, "process", [p["name"] for p in processes])
    for column in ("state", "restarts", "last exit"):
        add_text_column(table, column)
    for p in processes:
        state = {"running": "[green]running[/]", "restarting": "[yellow]restarting[/]"}.get(
            p["state"], f"[bold red]{escape(p['state'])}[/]")
        last = f"{p['last_exit']} at {p['last_exit_at']}" if p.get("last_exit") else "-"
        table.add_row(escape(p["name"]), state, str(p["restarts"]), escape(last))
    print_table(table)


def _render_consumers(consumers: list[dict]) -> None:
    if not consumers:
        return
    table = Table(title="Consumers (lag: not yet delivered + awaiting ack)", title_justify="left")
    add_id_column(table, "consumer", [c["consumer"] for c in consumers])
    for column in ("stream", "pending", "awaiting ack", "lag"):
        add_text_column(table, column)
    for c in consumers:
        table.add_row(escape(c["consumer"]), c["stream"], f"{c['num_pending']:,}",
                      f"{c['num_ack_pending']:,}", f"{c['lag']:,}")
    out.print(table)


def _render_machines(machines: list[dict]) -> None:
    if not machines:
        out.print("No runner machine is online.")
        return
    table = Table(title=f"{len(machines)} machine(s) online", title_justify="left")
    add_id_column(table, "machine", [m["node_id"] for m in machines])
    add_text_column(table, "label")
    add_text_column(table, "version")
    add_text_column(table, "engines")
    add_id_column(table, "hosts", [i for m in machines for i in m.get("live") or []])
    add_text_column(table, "last heartbeat")
    for m in machines:
        age = m.get("heartbeat_age_seconds")
        hosted = escape(", ".join(m["live"])) if m.get("live") else hosts_text(m)
        table.add_row(escape(m["node_id"]), escape(m["label"]),
                      escape(m.get("version") or "-"),
                      escape(", ".join(m["engines"]) or "-"), hosted,
                      "-" if age is None else f"{age_text(age)} ago")
    print_table(table)
