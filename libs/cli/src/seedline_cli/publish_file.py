"""`seedline publish --file`: every line of a JSONL file to seedline.ingest.timeline."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import BinaryIO

from nats.errors import ConnectionClosedError, NoRespondersError, StaleConnectionError
from nats.errors import TimeoutError as NatsTimeout
from rich.markup import escape
from rich.progress import BarColumn, Progress, TaskProgressColumn, TextColumn, TimeRemainingColumn

from seedline_contracts import subjects
from seedline_contracts.normalise import Accepted, normalise
from seedline_contracts.timeline import MAX_CONTENT_CHARS
from seedline_contracts.times import now_text
from seedline_platform.nats_workarounds import connection_of
from seedline_platform.natsio import PUBLISH_ACK_TIMEOUT, publish_window
from seedline_platform.settings import Settings

from .console import err, out, print_json
from .errors import START_HINT, OperationFailed, Unreachable, UsageProblem
from .nats_client import connected
from .sizes import size_text

DEFAULT_WINDOW = 256
# How long a window is published again while NATS does not acknowledge it: long enough for
# `seedline up` to start a killed nats-server again, short enough to tell a person soon.
RETRY_SECONDS = 60.0
RETRY_PAUSE_SECONDS = 0.5
READ_CHUNK = 1 << 20


@dataclass
class FileSummary:
    published: int = 0
    duplicates: int = 0
    skipped: list[tuple[int, str]] = field(default_factory=list)
    cut: list[tuple[int, int]] = field(default_factory=list)  # (line, original length)


def capped_lines(handle: BinaryIO, limit: int) -> Iterator[tuple[int, bytes | None, int]]:
    """(line number, line, bytes read) for each line; the line is None when it is longer
    than ``limit`` bytes, and then only its length is kept, never the line itself."""
    number = 0
    while True:
        raw = handle.readline(limit + 1)
        if not raw:
            return
        number += 1
        if len(raw) <= limit or raw.endswith(b"\n"):
            yield number, raw, len(raw)
            continue
        length = len(raw)
        while not raw.endswith(b"\n"):
            raw = handle.readline(READ_CHUNK)
            if not raw:
                break
            length += len(raw)
        yield number, None, length


async def publish_file(settings: Settings, path: Path, window: int) -> FileSummary:
    try:
        if path.is_dir():
            raise UsageProblem(f"--file {path} is a folder; give a JSONL file, one entry a line.")
        size = path.stat().st_size
        handle = path.open("rb")
    except OSError as exc:
        raise UsageProblem(f"Cannot read --file {path}: {exc.strerror}.") from None
    summary = FileSummary()
    async with connected(settings, reconnect=True) as nc:
        js = nc.jetstream()
        limit = nc.max_payload
        progress = Progress(
            TextColumn("[progress.description]{task.description}"),
            BarColumn(),
            TaskProgressColumn(),
            TimeRemainingColumn(),
            console=err,
            transient=True,
            disable=not err.is_terminal,
        )
        with handle, progress:
            task = progress.add_task(f"Publishing {path.name}", total=size or None)
            pending: list[tuple[str, bytes, dict]] = []

            def skip(number: int, message: str) -> None:
                summary.skipped.append((number, message))
                progress.console.print(f"[yellow]line {number}:[/] {escape(message)}; skipped")

            for number, raw, length in capped_lines(handle, limit):
                progress.advance(task, length)
                if raw is None:
                    skip(number, f"the line is {size_text(length)}, over this NATS server's "
                         f"max payload of {size_text(limit)}")
                    continue
                line = raw.strip()
                if not line:
                    continue
                result = normalise(line, now_text())
                if not isinstance(result, Accepted):
                    skip(number, result.message)
                    continue
                if result.entry.truncated_from is not None:
                    summary.cut.append((number, result.entry.truncated_from))
                subject = subjects.ingest_timeline_subject(result.entry.instance_id)
                pending.append((subject, line, {"Nats-Msg-Id": result.entry.entry_id}))
                if len(pending) >= window:
                    await _flush(js, pending, summary)
            await _flush(js, pending, summary)
    return summary


async def _flush(js, pending: list, summary: FileSummary,
                 patience: float = RETRY_SECONDS) -> None:
    """Publish the window; a window whose acks do not all come (the server restarting, a
    timeline-writer far behind) is published again, as a whole, for up to ``patience``
    seconds. That is safe: the stream and the timeline-writer drop what they already hold
    (same Nats-Msg-Id, same entry_id)."""
    if not pending:
        return
    loop = asyncio.get_running_loop()
    deadline = loop.time() + patience
    tries = 0
    while True:
        tries += 1
        try:
            acks = await publish_window(js, pending)
            break
        except NoRespondersError:
            if summary.published == 0 and tries == 1:
                raise Unreachable(
                    f"No stream takes {subjects.INGEST_TIMELINE} yet: the timeline-writer "
                    f"creates it when it starts. {START_HINT}."
                ) from None
            why = "JetStream did not answer (the server may be starting again)"
        except Exception as exc:
            why = _why(exc, len(pending))
        if loop.time() > deadline:
            nc = connection_of(js)
            server = nc.connected_url.geturl() if nc.connected_url else "the server"
            raise OperationFailed(
                f"Publishing stopped after {summary.published} entries: {why}, and that went "
                f"on for {patience:g} s while trying again. Check NATS at {server} with "
                "`seedline status`, then publish the file again: entries already stored are "
                "not duplicated (they are deduplicated by entry_id)."
            )
        await asyncio.sleep(RETRY_PAUSE_SECONDS)
    summary.published += len(acks)
    if tries == 1:  # after a retry a duplicate is most likely this run's own first try
        summary.duplicates += sum(1 for ack in acks if ack.duplicate)
    pending.clear()


def _why(exc: BaseException, pending: int) -> str:
    """In words: nats-py's timeouts and closed connections have empty messages."""
    if isinstance(exc, (TimeoutError, NatsTimeout)):
        return (f"NATS did not acknowledge the {pending} entries sent within "
                f"{PUBLISH_ACK_TIMEOUT:g} s")
    if isinstance(exc, (ConnectionClosedError, StaleConnectionError)):
        return "the connection to NATS was lost"
    return f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__


def report_file(summary: FileSummary, path: Path, json_out: bool) -> None:
    if json_out:
        print_json(
            {
                "ok": not summary.skipped,
                "published": summary.published,
                "duplicates": summary.duplicates,
                "skipped": [{"line": n, "error": message} for n, message in summary.skipped],
                "cut": [{"line": n, "truncated_from": length} for n, length in summary.cut],
            }
        )
        return
    text = f"Published {summary.published} entries from {escape(str(path))}"
    if summary.duplicates:
        text += f" ({summary.duplicates} had been published already)"
    out.print(text + ".")
    if summary.cut:
        lines = ", ".join(f"{n} (from {length:,})" for n, length in summary.cut)
        out.print(
            f"[yellow]{len(summary.cut)} entr{'y was' if len(summary.cut) == 1 else 'ies were'} "
            f"cut to {MAX_CONTENT_CHARS:,} characters:[/] line {lines}."
        )
    if summary.skipped:
        lines = ", ".join(str(n) for n, _ in summary.skipped)
        out.print(
            f"[yellow]Skipped {len(summary.skipped)} bad line(s): {lines}.[/] "
            "Fix them and publish the file again; entries already stored are not duplicated."
        )
    out.print("The timeline-writer stores them in order; read them back with `seedline timeline`.")
