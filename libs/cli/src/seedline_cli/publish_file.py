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
from seedline_platform.natsio import PUBLISH_ACK_TIMEOUT
from seedline_platform.settings import Settings

from .console import err, out, print_json
from .disk_guard import DISK_FULL, disk_full_here, refuse_new_work, store_full
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


async def publish_file(settings: Settings, path: Path, window: int,
                       summary: FileSummary | None = None) -> FileSummary:
    """Publish every line; ``summary`` counts as it goes (the caller's, to report an
    interrupted run)."""
    try:
        if path.is_dir():
            raise UsageProblem(f"--file {path} is a folder; give a JSONL file, one entry a line.")
        size = path.stat().st_size
        handle = path.open("rb")
    except OSError as exc:
        raise UsageProblem(f"Cannot read --file {path}: {exc.strerror}.") from None
    summary = FileSummary() if summary is None else summary
    refuse_new_work()
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
    """Publish the window. Each entry counts once, when NATS acknowledges it; the entries
    whose acks do not come (the server restarting, a timeline-writer far behind) are
    published again for up to ``patience`` seconds. That is safe: the stream and the
    timeline-writer drop what they already hold (same Nats-Msg-Id, same entry_id)."""
    if not pending:
        return
    loop = asyncio.get_running_loop()
    deadline = loop.time() + patience
    tries = 0
    while pending:
        tries += 1
        refuse_new_work_after(summary)
        results = await publish_settled(js, pending)
        acks = [r for r in results if not isinstance(r, BaseException)]
        failures = [r for r in results if isinstance(r, BaseException)]
        summary.published += len(acks)
        if tries == 1:  # after a retry a duplicate is most likely this run's own first try
            summary.duplicates += sum(1 for ack in acks if ack.duplicate)
        pending[:] = [m for m, r in zip(pending, results) if isinstance(r, BaseException)]
        if not pending:
            return
        refuse_new_work_after(summary)  # most likely why they failed: say so, not a timeout
        first = failures[0]
        if isinstance(first, NoRespondersError) and summary.published == 0 and tries == 1:
            raise Unreachable(
                f"No stream takes {subjects.INGEST_TIMELINE} yet: the timeline-writer "
                f"creates it when it starts. {START_HINT}."
            ) from None
        why = _why(first, len(pending))
        if store_full(first):
            raise _stopped(summary, f"{why}. Publish the file again once there is room")
        if loop.time() > deadline:
            nc = connection_of(js)
            server = nc.connected_url.geturl() if nc.connected_url else "the server"
            raise _stopped(summary, f"{why}, and that went on for {patience:g} s while trying "
                           f"again. Check NATS at {server} with `seedline status`, then "
                           "publish the file again")
        await asyncio.sleep(RETRY_PAUSE_SECONDS)


def refuse_new_work_after(summary: FileSummary) -> None:
    """Stop, with the count so far, once the disk of SEEDLINE_HOME is full."""
    full = disk_full_here()
    if full is not None:
        raise _stopped(summary, f"{full.message()} Publish the file again once there is room",
                       DISK_FULL)


def _stopped(summary: FileSummary, what: str, code: str | None = None) -> OperationFailed:
    failed = OperationFailed(
        f"Publishing stopped after {summary.published} entries (the ones NATS acknowledged): "
        f"{what}: entries already stored are not stored twice (they are deduplicated by "
        "entry_id).", code)
    failed.extra = {"published": summary.published}
    return failed


async def publish_settled(js, messages: list) -> list:
    """Publish with all acks pending at once; each message's ack, or why it has none."""
    futures: list = []
    for subject, payload, headers in messages:
        try:
            futures.append(await js.publish_async(subject, payload, headers=headers))
        except Exception as exc:  # the connection went, too many pending
            futures.append(exc)
    waiting = [f for f in futures if isinstance(f, asyncio.Future)]
    if waiting:
        await asyncio.wait(waiting, timeout=PUBLISH_ACK_TIMEOUT)
    results: list = []
    for future in futures:
        if not isinstance(future, asyncio.Future):
            results.append(future)
        elif not future.done():
            future.cancel()  # frees its place among the client's pending publishes
            results.append(NatsTimeout())
        else:
            results.append(future.exception() or future.result())
    return results


def _why(exc: BaseException, pending: int) -> str:
    """In words: nats-py's timeouts and closed connections have empty messages."""
    if store_full(exc):
        return (f"JetStream refused the {pending} entries sent: its store has no room left "
                "(insufficient resources): the disk of the nats-server is full, or its "
                "storage limit is reached")
    if isinstance(exc, (TimeoutError, NatsTimeout)):
        return (f"NATS did not acknowledge the {pending} entries sent within "
                f"{PUBLISH_ACK_TIMEOUT:g} s")
    if isinstance(exc, (ConnectionClosedError, StaleConnectionError)):
        return "the connection to NATS was lost"
    return f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__


def report_interrupted(summary: FileSummary) -> None:
    err.print(f"Stopped (Ctrl-C) after {summary.published} entries (the ones NATS "
              "acknowledged). Publish the file again to store the rest: entries already "
              "stored are not stored twice.")


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
            "They were not sent, so the platform never saw them (`seedline rejected` counts "
            "them apart); fix them and publish the file again: entries already stored are not "
            "duplicated."
        )
    out.print("The timeline-writer stores them in order; read them back with `seedline timeline`.")
