"""`seedline publish`: one entry from flags, or many from a JSONL file."""

from __future__ import annotations

import asyncio
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

import typer
from nats.errors import NoRespondersError
from rich.markup import escape
from rich.progress import BarColumn, Progress, TaskProgressColumn, TextColumn, TimeRemainingColumn

from seedline_contracts import subjects
from seedline_contracts.timeline import KINDS
from seedline_platform.clock import now_text, parse_rfc3339
from seedline_platform.natsio import publish_window
from seedline_platform.settings import Settings
from seedline_timeline_writer.normalise import Accepted, normalise

from .config import check_name, load_settings
from .console import err, out, print_json
from .errors import START_HINT, OperationFailed, Unreachable, UsageProblem, reports_errors
from .ids import new_entry_id
from .nats_client import call, connected

DEFAULT_WINDOW = 256


@reports_errors
def publish(
    ctx: typer.Context,
    instance: Optional[str] = typer.Option(
        None, "--instance", help="Instance the entry belongs to."
    ),
    repo: Optional[str] = typer.Option(None, "--repo", help="Repository, e.g. apps/chess-academy."),
    session: Optional[str] = typer.Option(
        None, "--session", help="Conversation id the entry belongs to."
    ),
    kind: Optional[str] = typer.Option(None, "--kind", help=f"One of: {', '.join(KINDS)}."),
    content: Optional[str] = typer.Option(None, "--content", help="The entry's text."),
    content_file: Optional[Path] = typer.Option(
        None, "--content-file", help="Read the entry's text from this file ('-' for stdin)."
    ),
    entry_id: Optional[str] = typer.Option(
        None, "--entry-id", help="Dedupe key; a fresh time-ordered id when left out."
    ),
    at: Optional[str] = typer.Option(
        None, "--at", help="RFC 3339 time; the writer's clock when left out."
    ),
    engine: Optional[str] = typer.Option(
        None, "--engine", help="Engine that produced it, e.g. claude."
    ),
    file: Optional[Path] = typer.Option(
        None, "--file", help="Publish every line of this JSONL file to seedline.ingest.timeline."
    ),
    window: int = typer.Option(
        DEFAULT_WINDOW,
        "--window",
        min=1,
        max=10_000,
        help="Publishes awaiting their ack at once (--file).",
    ),
    json_out: bool = typer.Option(False, "--json", help="Print the result as JSON."),
) -> None:
    """Publish one timeline entry, or many from a JSONL file.

    One entry goes through seedline.api.timeline.append and shows its seq. With --file,
    every line goes to seedline.ingest.timeline; bad lines are reported and skipped
    (exit code 1 when any was).
    """
    settings = load_settings(ctx)
    if file is not None:
        given = [
            name
            for name, value in [
                ("--instance", instance),
                ("--repo", repo),
                ("--session", session),
                ("--kind", kind),
                ("--content", content),
                ("--content-file", content_file),
                ("--entry-id", entry_id),
                ("--at", at),
                ("--engine", engine),
            ]
            if value is not None
        ]
        if given:
            raise UsageProblem(
                f"--file takes every field from the file's lines; leave out {', '.join(given)}."
            )
        summary = asyncio.run(_publish_file(settings, file, window))
        _report_file(summary, file, json_out)
        if summary.skipped:
            raise typer.Exit(1)
        return
    body = _entry_from_flags(
        instance, repo, session, kind, content, content_file, entry_id, at, engine
    )
    reply = asyncio.run(_append(settings, body))
    if json_out:
        print_json(
            {
                "ok": True,
                "entry_id": body["entry_id"],
                "seq": reply["seq"],
                "duplicate": reply["duplicate"],
            }
        )
    elif reply["duplicate"]:
        out.print(
            f"Entry {escape(body['entry_id'])} was already stored as seq {reply['seq']}; "
            "the first copy stands."
        )
    else:
        out.print(f"Stored entry {escape(body['entry_id'])} as seq {reply['seq']}.")


def _entry_from_flags(
    instance, repo, session, kind, content, content_file, entry_id, at, engine
) -> dict:
    missing = [
        flag
        for flag, value in [
            ("--instance", instance),
            ("--repo", repo),
            ("--session", session),
            ("--kind", kind),
        ]
        if value is None
    ]
    if missing:
        raise UsageProblem(f"Missing {', '.join(missing)}; or publish a JSONL file with --file.")
    check_name("--instance", instance, "bd43f4de")
    check_name("--repo", repo, "apps/chess-academy")
    check_name("--session", session, "csess_21b8d1b9")
    if kind not in KINDS:
        raise UsageProblem(f"--kind {kind!r} is not one of {', '.join(KINDS)}.")
    if (content is None) == (content_file is None):
        raise UsageProblem("Give exactly one of --content and --content-file.")
    if content_file is not None:
        content = _read_content(content_file)
    if at is not None:
        try:
            parse_rfc3339(at)
        except ValueError:
            raise UsageProblem(
                f"--at {at!r} is not an RFC 3339 time such as 2026-08-17T10:00:00Z."
            ) from None
    body = {
        "entry_id": entry_id if entry_id is not None else new_entry_id(),
        "instance_id": instance,
        "repo": repo,
        "session_id": session,
        "kind": kind,
        "content": content,
    }
    if at is not None:
        body["at"] = at
    if engine is not None:
        body["engine"] = engine
    result = normalise(_encode(body), now_text())
    if not isinstance(result, Accepted):
        raise UsageProblem(result.message)
    return body


def _encode(body: dict) -> bytes:
    from seedline_contracts.codec import encode

    return encode(body)


def _read_content(path: Path) -> str:
    try:
        if str(path) == "-":
            return sys.stdin.read()
        return path.read_text(encoding="utf-8")
    except OSError as exc:
        raise UsageProblem(f"Cannot read --content-file {path}: {exc.strerror}.") from None
    except UnicodeDecodeError:
        raise UsageProblem(f"--content-file {path} is not UTF-8 text.") from None


async def _append(settings: Settings, body: dict) -> dict:
    async with connected(settings) as nc:
        return await call(nc, subjects.API_TIMELINE_APPEND, body, service="timeline-writer")


@dataclass
class FileSummary:
    published: int = 0
    duplicates: int = 0
    skipped: list[tuple[int, str]] = field(default_factory=list)


async def _publish_file(settings: Settings, path: Path, window: int) -> FileSummary:
    try:
        size = path.stat().st_size
        handle = path.open("rb")
    except OSError as exc:
        raise UsageProblem(f"Cannot read --file {path}: {exc.strerror}.") from None
    summary = FileSummary()
    async with connected(settings) as nc:
        js = nc.jetstream()
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
            for line_number, raw in enumerate(handle, start=1):
                progress.advance(task, len(raw))
                line = raw.strip()
                if not line:
                    continue
                result = normalise(line, now_text())
                if not isinstance(result, Accepted):
                    summary.skipped.append((line_number, result.message))
                    progress.console.print(
                        f"[yellow]line {line_number}:[/] {escape(result.message)}; skipped"
                    )
                    continue
                pending.append(
                    (subjects.INGEST_TIMELINE, line, {"Nats-Msg-Id": result.entry.entry_id})
                )
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


def _report_file(summary: FileSummary, path: Path, json_out: bool) -> None:
    if json_out:
        print_json(
            {
                "ok": not summary.skipped,
                "published": summary.published,
                "duplicates": summary.duplicates,
                "skipped": [{"line": n, "error": message} for n, message in summary.skipped],
            }
        )
        return
    text = f"Published {summary.published} entries from {escape(str(path))}"
    if summary.duplicates:
        text += f" ({summary.duplicates} had been published already)"
    out.print(text + ".")
    if summary.skipped:
        lines = ", ".join(str(n) for n, _ in summary.skipped)
        out.print(
            f"[yellow]Skipped {len(summary.skipped)} bad line(s): {lines}.[/] "
            "Fix them and publish the file again; entries already stored are not duplicated."
        )
    out.print("The timeline-writer stores them in order; read them back with `seedline timeline`.")
