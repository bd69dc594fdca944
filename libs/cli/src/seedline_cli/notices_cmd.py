"""`seedline notices --instance X --follow`: what the platform tells an instance's people,
as it happens (seedline.notify.<instance>: stopped_idle, runner_offline, runner_restarted,
not_woken, resume_lost)."""

from __future__ import annotations

import asyncio
import json
import signal
import sys
from typing import Optional

import typer
from rich.markup import escape

from seedline_contracts import subjects

from .config import check_name, load_settings, safe_url
from .console import err, out
from .errors import Unreachable, UsageProblem, reports_errors
from .nats_client import connected

CLOSED_POLL_SECONDS = 0.5


@reports_errors
def notices(
    ctx: typer.Context,
    instance: str = typer.Option(..., "--instance", help="Instance whose notices to print."),
    follow: bool = typer.Option(
        False, "--follow", help="Print notices as they come, until Ctrl-C."
    ),
    count: Optional[int] = typer.Option(
        None, "--count", min=1, help="Stop after this many notices."
    ),
    json_out: bool = typer.Option(False, "--json", help="One JSON object a line."),
) -> None:
    """Print an instance's notices as they come (needs --follow).

    A conversation stopped for idling, a machine gone offline or restarted, a message that
    woke nothing. Notices are sent as they happen and are not stored.
    """
    check_name("--instance", instance, "bd43f4de")
    if not follow:
        raise UsageProblem(
            "Notices are sent as they happen and are not stored, so there are none to list "
            "afterwards. Add --follow to print them as they come (Ctrl-C stops)."
        )
    settings = load_settings(ctx)
    asyncio.run(_follow(settings, instance, count, json_out))


async def _follow(settings, instance: str, count: int | None, json_out: bool) -> None:
    subject = subjects.notify_subject(instance)
    stop = asyncio.Event()
    seen = 0

    async def on_notice(msg) -> None:
        nonlocal seen
        show(msg.data, json_out)
        seen += 1
        if count is not None and seen >= count:
            stop.set()

    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    async with connected(settings, name="seedline-notices") as nc:
        await nc.subscribe(subject, cb=on_notice)
        await nc.flush()
        err.print(f"Following the notices of instance {escape(instance)} ({subject}); "
                  "Ctrl-C stops.")
        while not stop.is_set():
            if nc.is_closed or not nc.is_connected:
                raise Unreachable(
                    f"Lost the connection to NATS at {safe_url(settings.nats_url)}; notices sent "
                    "from now on are not shown. Run the command again once NATS is back."
                )
            try:
                await asyncio.wait_for(stop.wait(), CLOSED_POLL_SECONDS)
            except TimeoutError:
                pass


def show(data: bytes, json_out: bool) -> None:
    try:
        notice = json.loads(data)
        if not isinstance(notice, dict):
            raise ValueError
    except ValueError:
        err.print(f"[yellow]A notice that is not a JSON object:[/] "
                  f"{escape(data[:300].decode('utf-8', errors='replace'))}")
        return
    if json_out:
        sys.stdout.write(json.dumps(notice, ensure_ascii=False) + "\n")
        sys.stdout.flush()
        return
    about = notice.get("session_id") or notice.get("repo") or ""
    line = f"{notice.get('at', '-')}  {notice.get('kind', 'notice')}"
    if about:
        line += f"  {about}"
    out.print(f"[dim]{escape(line)}[/]  {escape(str(notice.get('text', '')))}")
