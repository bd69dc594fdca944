"""`seedline publish --file`: every line of a JSONL file to seedline.ingest.timeline."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import BinaryIO

from nats.errors import NoRespondersError
from rich.markup import escape
from rich.progress import BarColumn, Progress, TaskProgressColumn, TextColumn, TimeRemainingColumn

from seedline_contracts import subjects
from seedline_contracts.normalise import Accepted, normalise
from seedline_contracts.timeline import MAX_CONTENT_CHARS
from seedline_contracts.times import now_text
from seedline_platform.natsio import publish_window
from seedline_platform.settings import Settings

from .console import err, out, print_json
from .errors import START_HINT, OperationFailed, Unreachable, UsageProblem
from .nats_client import connected
from .sizes import size_text

DEFAULT_WINDOW = 256
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
    async with connected(settings) as nc:
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


async def _flush(js, pending: list, summary: FileSummary) -> None:
    if not pending:
        return
    try:
        acks = await publish_window(js, pending)
    except NoRespondersError:
        raise Unreachable(
            f"No stream takes {subjects.INGEST_TIMELINE} yet: the timeline-writer creates it "
            f"when it starts. {START_HINT}."
        ) from None
    except Exception as exc:
        raise OperationFailed(
            f"Publishing stopped after {summary.published} entries ({type(exc).__name__}: {exc}). "
            "Publishing the file again is safe: entries are deduplicated by entry_id."
        ) from None
    summary.published += len(acks)
    summary.duplicates += sum(1 for ack in acks if ack.duplicate)
    pending.clear()


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
