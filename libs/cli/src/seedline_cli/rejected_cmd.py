"""`seedline rejected`: input that could not be accepted, kept in SEEDLINE_REJECTED with
its reason (CONTRACT.md 2.1), newest first; `show SEQ` prints one whole."""

from __future__ import annotations

import asyncio
import base64
import binascii
import json
import re
from typing import Optional

import typer
from nats.aio.client import Client
from nats.js.errors import NotFoundError
from rich.markup import escape
from rich.table import Table
from rich.text import Text

from seedline_contracts import subjects
from seedline_platform.settings import Settings

from . import refused_here
from .config import load_settings
from .console import add_text_column, out, print_json
from .errors import START_HINT, OperationFailed, Unreachable, reports_errors
from .nats_client import connected

# Operators may remove messages, leaving gaps; this bounds the lookups of one listing.
MAX_LOOKUPS = 10_000

rejected = typer.Typer(
    help="Input that could not be accepted, with its reason (newest first).",
    invoke_without_command=True,
)


async def _bounds(nc: Client) -> tuple[int, int]:
    try:
        info = await nc.jetstream().stream_info(subjects.REJECTED_STREAM)
    except NotFoundError:
        raise Unreachable(
            f"The {subjects.REJECTED_STREAM} stream does not exist yet: no Seedline service has "
            f"started on this NATS. {START_HINT}."
        ) from None
    return info.state.first_seq, info.state.last_seq


async def _get(nc: Client, seq: int) -> dict | None:
    try:
        msg = await nc.jetstream().get_msg(subjects.REJECTED_STREAM, seq=seq)
    except NotFoundError:
        return None
    return record(seq, msg.subject or "", msg.data or b"")


def record(seq: int, subject: str, data: bytes) -> dict:
    """The stored record, plus its seq and subject and its raw payload as text."""
    try:
        body = json.loads(data)
    except ValueError:
        body = None
    if not isinstance(body, dict):
        body = {"reason_code": None, "message": "(not a rejected-input record)",
                "raw": data.decode("utf-8", errors="backslashreplace"), "raw_encoding": "utf-8"}
    found = {"seq": seq, "subject": subject, **body}
    found["raw_text"], found["raw_is_utf8"] = decoded_raw(body)
    return found


def decoded_raw(body: dict) -> tuple[str, bool]:
    """The original payload as text; bytes that are not UTF-8 are shown as \\xNN."""
    raw = str(body.get("raw") or "")
    if body.get("raw_encoding") != "base64":
        return raw, True
    try:
        data = base64.b64decode(raw, validate=True)
    except (binascii.Error, ValueError):
        return raw, False
    try:
        return data.decode("utf-8"), True
    except UnicodeDecodeError:
        return data.decode("utf-8", errors="backslashreplace"), False


async def _newest(
    settings: Settings, limit: int, before_seq: int | None
) -> tuple[list[dict], bool]:
    async with connected(settings) as nc:
        first, last = await _bounds(nc)
        seq = last if before_seq is None else min(last, before_seq - 1)
        rows: list[dict] = []
        lookups = 0
        while seq >= max(first, 1) and len(rows) < limit and lookups < MAX_LOOKUPS:
            found = await _get(nc, seq)
            lookups += 1
            if found is not None:
                rows.append(found)
            seq -= 1
        return rows, seq >= max(first, 1)


@rejected.callback()
@reports_errors
def rejected_list(
    ctx: typer.Context,
    limit: int = typer.Option(20, "--limit", min=1, max=1000, help="How many to list."),
    before_seq: Optional[int] = typer.Option(
        None, "--before-seq", min=1, help="Only those older than this seq."
    ),
    json_out: bool = typer.Option(False, "--json", help="Print them as JSON."),
) -> None:
    """List rejected input, newest first: when, why (reason_code) and the message.

    `seedline rejected show SEQ` prints one whole, with its original payload.
    """
    if ctx.invoked_subcommand is not None:
        return
    settings = load_settings(ctx)
    rows, more = asyncio.run(_newest(settings, limit, before_seq))
    here = refused_here.read(settings.home)
    if json_out:
        print_json({"ok": True, "rejected": rows, "has_more": more,
                    "refused_here": here[-limit:][::-1]})
        return
    if here and before_seq is None:
        _print_refused_here(here, limit)
    if not rows:
        out.print(nothing_rejected(len(here)))
        return
    table = Table(title=f"{len(rows)} rejected by the platform (newest first)",
                  title_justify="left")
    for column in ("seq", "received", "from", "reason", "message"):
        add_text_column(table, column)
    for row in rows:
        table.add_row(str(row["seq"]), escape(str(row.get("received_at") or "-")),
                      escape(row["subject"].removeprefix("seedline.rejected.")),
                      escape(str(row.get("reason_code") or "-")),
                      escape(str(row.get("message") or "")))
    out.print(table)
    hint = "`seedline rejected show SEQ` prints one with its original payload."
    if more:
        hint += f" Older ones: add --before-seq {rows[-1]['seq']}."
    out.print(hint)


def nothing_rejected(refused_here_count: int) -> str:
    """What a listing with nothing from the platform says: never that every input was
    accepted when this machine refused lines before sending them."""
    if refused_here_count:
        return ("The platform rejected no input it was given; the lines above were refused "
                "here, before sending, and never reached it.")
    return ("Nothing was rejected: the platform rejected no input, and `seedline publish "
            "--file` refused no line on this machine.")


def _print_refused_here(here: list[dict], limit: int) -> None:
    shown = here[-limit:][::-1]
    count = len(here)
    lines = f"{count} line{'' if count == 1 else 's'}"
    table = Table(title=f"{lines} refused here by `seedline publish --file` before sending "
                  "(newest first; never sent, so not the platform's)", title_justify="left")
    for column in ("when", "file", "line", "why"):
        add_text_column(table, column)
    for row in shown:
        table.add_row(escape(str(row.get("at") or "-")), escape(str(row.get("file") or "-")),
                      str(row.get("line") or "-"), escape(str(row.get("error") or "")))
    out.print(table)


@rejected.command("show")
@reports_errors
def rejected_show(
    ctx: typer.Context,
    seq: int = typer.Argument(..., min=1, help="Its seq, as `seedline rejected` lists it."),
    json_out: bool = typer.Option(False, "--json", help="Print it as JSON."),
) -> None:
    """Print one rejected input whole: its reason and its original payload, decoded."""
    settings = load_settings(ctx)

    async def one() -> tuple[dict | None, tuple[int, int]]:
        async with connected(settings) as nc:
            return await _get(nc, seq), await _bounds(nc)

    found, (first, last) = asyncio.run(one())
    if found is None:
        held = f"it holds seq {first} to {last}" if last else "it is empty"
        raise OperationFailed(
            f"No rejected input has seq {seq} ({held}). `seedline rejected` lists them.",
            code="not_found",
        )
    if json_out:
        print_json({"ok": True, **found})
        return
    for name in ("seq", "subject", "received_at", "reason_code", "message", "ingest_seq"):
        out.print(Text.assemble((f"{name:<12}", "bold"), visible(str(found.get(name)))))
    note = "" if found["raw_is_utf8"] else " (not UTF-8: undecodable bytes shown as \\xNN)"
    if CONTROL.search(found["raw_text"]):
        note += " (control characters shown as \\xNN)"
    out.print(Text.assemble(("raw", "bold"), note, ":"))
    out.print(Text(visible(_pretty(found["raw_text"]))), soft_wrap=False)


# Control characters other than newline and tab: printed as they are, a NUL or an escape
# sequence from someone's input would reach the terminal and act on it.
CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def visible(text: str) -> str:
    return CONTROL.sub(lambda m: f"\\x{ord(m.group()):02x}", text)


def _pretty(raw: str) -> str:
    """JSON payloads indented, anything else as it came."""
    try:
        return json.dumps(json.loads(raw), indent=2, ensure_ascii=False)
    except (ValueError, RecursionError):
        return raw
