"""`seedline notices --instance X [--since SEQ|TIME] [--follow]`: what the platform tells an
instance's people (seedline.notify.<instance>: stopped_idle, runner_offline,
runner_restarted, not_woken, resume_lost, ...). SEEDLINE_NOTICES keeps them (CONTRACT.md 1), so
the ones sent while nobody listened can be read afterwards; each has an id (its stream
sequence) to continue from."""

from __future__ import annotations

import asyncio
import json
import signal
import sys
from datetime import datetime
from typing import Optional

import typer
from nats.errors import ConnectionClosedError, StaleConnectionError
from nats.js.errors import NotFoundError
from rich.markup import escape

from seedline_contracts import subjects
from seedline_contracts.times import parse_rfc3339
from seedline_platform.notices import follow_notices, read_notices

from .config import check_name, load_settings, safe_url
from .console import err, out
from .errors import Unreachable, UsageProblem, reports_errors
from .nats_client import connected

CLOSED_POLL_SECONDS = 0.5
# How a reader of the stream learns that the connection went.
NATS_GONE = (ConnectionClosedError, StaleConnectionError)
PAGE = 500


def parse_since(text: str | None) -> tuple[int | None, datetime | None]:
    """--since: a notice's id (print those after it) or an RFC 3339 time (at or after it)."""
    if text is None:
        return None, None
    if text.isascii() and text.isdigit():
        return int(text), None
    try:
        return None, parse_rfc3339(text)
    except ValueError:
        raise UsageProblem(f"--since {text!r} is neither a notice's id (a whole number) nor an "
                           "RFC 3339 time such as 2026-12-01T10:00:00Z.") from None


@reports_errors
def notices(
    ctx: typer.Context,
    instance: str = typer.Option(..., "--instance", help="Instance whose notices to print."),
    since: Optional[str] = typer.Option(
        None, "--since", help="Only notices after this id (as printed, #N), or kept at or after "
        "this RFC 3339 time. Without it, every notice kept (30 days)."
    ),
    follow: bool = typer.Option(
        False, "--follow", help="Then print notices as they come, until Ctrl-C."
    ),
    count: Optional[int] = typer.Option(
        None, "--count", min=1, help="Stop after this many notices."
    ),
    json_out: bool = typer.Option(False, "--json", help="One JSON object a line, with its id."),
) -> None:
    """Print an instance's notices: the ones kept, then (with --follow) each as it comes.

    A conversation stopped for idling, a machine gone offline or restarted, a message that
    woke nothing. Notices are kept for 30 days; each has an id to continue from (--since).
    """
    check_name("--instance", instance, "bd43f4de")
    after, at = parse_since(since)
    settings = load_settings(ctx)
    asyncio.run(_run(settings, instance, after, at, follow, count, json_out))


async def _run(settings, instance: str, after: int | None, at: datetime | None, follow: bool,
               count: int | None, json_out: bool) -> None:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    async with connected(settings, name="seedline-notices") as nc:
        js = nc.jetstream()
        try:
            await js.stream_info(subjects.NOTICES_STREAM)
            kept = True
        except NotFoundError:
            kept = False
        shown = 0
        if kept and not (follow and after is None and at is None):
            # The kept ones first: all of them, or those the --since names.
            while count is None or shown < count:
                found, more = await read_notices(js, instance, after_seq=after, since=at,
                                                 limit=PAGE)
                for notice in found[:None if count is None else count - shown]:
                    show(notice.notice, json_out, notice.seq)
                    shown += 1
                    after = notice.seq
                if not more:
                    break
                at = None
        elif not kept and not follow:
            err.print("No notice is kept yet: the SEEDLINE_NOTICES stream does not exist (the "
                      "runner-gateway and the web process create it when they start).")
        if not follow or (count is not None and shown >= count):
            return
        await _follow(nc, settings, instance, after, kept, count, shown, json_out, stop)


async def _follow(nc, settings, instance: str, after: int | None, kept: bool, count: int | None,
                  shown: int, json_out: bool, stop: asyncio.Event) -> None:
    subject = subjects.notify_subject(instance)

    def one_more(body, seq: int | None) -> None:
        nonlocal shown
        show(body, json_out, seq)
        shown += 1
        if count is not None and shown >= count:
            stop.set()

    reader = None
    if kept:
        notices = follow_notices(nc.jetstream(), instance, after_seq=after, tick=0.5)
        await notices.__anext__()  # the consumer is in place

        async def read() -> None:
            async for notice in notices:
                if notice is not None:
                    one_more(notice.notice, notice.seq)

        reader = asyncio.create_task(read())
    else:
        # Nothing keeps notices on this server: only the ones sent from now on are seen.
        async def on_notice(msg) -> None:
            one_more(msg.data, None)

        await nc.subscribe(subject, cb=on_notice)
        await nc.flush()
    err.print(f"Following the notices of instance {escape(instance)} ({subject}); "
              "Ctrl-C stops.")
    lost = Unreachable(
        f"Lost the connection to NATS at {safe_url(settings.nats_url)}; run the command again "
        "with --since and the last id shown once NATS is back."
    )
    try:
        while not stop.is_set():
            if nc.is_closed or not nc.is_connected:
                raise lost
            if reader is not None and reader.done():
                try:
                    reader.result()
                except NATS_GONE:
                    raise lost from None
            try:
                await asyncio.wait_for(stop.wait(), CLOSED_POLL_SECONDS)
            except TimeoutError:
                pass
    finally:
        if reader is not None:
            # Ended before the connection closes, and its end collected: a reader left
            # running would meet the closed connection and print its traceback at exit.
            reader.cancel()
            await asyncio.gather(reader, return_exceptions=True)


def show(data, json_out: bool, seq: int | None = None) -> None:
    if isinstance(data, dict):
        notice = data
    else:
        try:
            notice = json.loads(data)
            if not isinstance(notice, dict):
                raise ValueError
        except ValueError:
            err.print(f"[yellow]A notice that is not a JSON object:[/] "
                      f"{escape(data[:300].decode('utf-8', errors='replace'))}")
            return
    if json_out:
        shown = {"id": seq, **notice} if seq is not None else notice
        sys.stdout.write(json.dumps(shown, ensure_ascii=False) + "\n")
        sys.stdout.flush()
        return
    about = notice.get("session_id") or notice.get("repo") or ""
    line = f"{notice.get('at', '-')}  {notice.get('kind', 'notice')}"
    if about:
        line += f"  {about}"
    ident = f"#{seq}  " if seq is not None else ""
    out.print(f"[dim]{escape(ident + line)}[/]  {escape(str(notice.get('text', '')))}")
