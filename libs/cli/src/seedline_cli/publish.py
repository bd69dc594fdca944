"""`seedline publish`: one entry from flags, or many from a JSONL file (publish_file.py)."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path
from typing import Optional

import msgspec
import typer
from msgspec import to_builtins
from rich.markup import escape

from seedline_client import SeedlineClient
from seedline_contracts.codec import encode
from seedline_contracts.normalise import Accepted, normalise
from seedline_contracts.timeline import KINDS, MAX_CONTENT_CHARS, TimelineEntryIn
from seedline_contracts.times import now_text, parse_rfc3339
from seedline_platform.settings import Settings

from . import refused_here
from .config import check_name, conversation_flag, load_settings
from .console import out, print_json
from .disk_guard import refuse_new_work
from .errors import UsageProblem, reports_errors
from .ids import new_entry_id
from .nats_client import answered, connected
from .publish_file import (
    DEFAULT_WINDOW,
    FileSummary,
    publish_file,
    report_file,
    report_interrupted,
)
from .sizes import size_text

# NATS itself takes no message over 64 MiB, whatever a server's max_payload says.
MAX_CONTENT_FILE_BYTES = 64 << 20


@reports_errors
def publish(
    ctx: typer.Context,
    instance: Optional[str] = typer.Option(
        None, "--instance", help="Instance the entry belongs to."
    ),
    repo: Optional[str] = typer.Option(None, "--repo", help="Repository, e.g. apps/chess-academy."),
    conversation: Optional[str] = typer.Option(
        None, "--conversation", help="Conversation id the entry belongs to."
    ),
    old_flag: Optional[str] = typer.Option(None, "--session", hidden=True),
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
    as_import: bool = typer.Option(
        False, "--import",
        help='History, not new words: origin "import" (it never wakes a conversation).',
    ),
    json_out: bool = typer.Option(False, "--json", help="Print the result as JSON."),
) -> None:
    """Publish one timeline entry, or many from a JSONL file.

    One entry goes through seedline.api.timeline.append and shows its seq. With --file,
    every line goes to seedline.ingest.timeline; bad lines are reported and skipped
    (exit code 1 when any was).
    """
    conversation = conversation_flag(conversation, old_flag)
    settings = load_settings(ctx)
    if file is not None:
        given = [
            name
            for name, value in [
                ("--instance", instance),
                ("--repo", repo),
                ("--conversation", conversation),
                ("--kind", kind),
                ("--content", content),
                ("--content-file", content_file),
                ("--entry-id", entry_id),
                ("--at", at),
                ("--engine", engine),
                ("--import", True if as_import else None),
            ]
            if value is not None
        ]
        if given:
            raise UsageProblem(
                f"--file takes every field from the file's lines (origin too); leave out "
                f"{', '.join(given)}."
            )
        summary = FileSummary()
        try:
            asyncio.run(publish_file(settings, file, window, summary))
        except KeyboardInterrupt:
            refused_here.record(settings.home, file.resolve(), summary.skipped, now_text())
            report_interrupted(summary)
            raise typer.Exit(130) from None
        refused_here.record(settings.home, file.resolve(), summary.skipped, now_text())
        report_file(summary, file, json_out)
        if summary.skipped:
            raise typer.Exit(1)
        return
    body = _entry_from_flags(
        instance, repo, conversation, kind, content, content_file, entry_id, at, engine
    )
    if as_import:
        body["origin"] = "import"
    refuse_new_work()
    reply = asyncio.run(_append(settings, body))
    length = len(body["content"])
    truncated_from = length if length > MAX_CONTENT_CHARS and not reply["duplicate"] else None
    if json_out:
        print_json(
            {
                "ok": True,
                "entry_id": body["entry_id"],
                "seq": reply["seq"],
                "duplicate": reply["duplicate"],
                "truncated_from": truncated_from,
            }
        )
    elif reply["duplicate"]:
        out.print(
            f"Entry {escape(body['entry_id'])} was already stored as seq {reply['seq']}; "
            "the first copy stands."
        )
    else:
        out.print(f"Stored entry {escape(body['entry_id'])} as seq {reply['seq']}.")
        if truncated_from is not None:
            out.print(
                f"[yellow]Its content was cut to {MAX_CONTENT_CHARS:,} characters from "
                f"{truncated_from:,}[/] (an entry keeps at most {MAX_CONTENT_CHARS:,}; the "
                "original length is recorded with it)."
            )


def _entry_from_flags(
    instance, repo, conversation, kind, content, content_file, entry_id, at, engine
) -> dict:
    missing = [
        flag
        for flag, value in [
            ("--instance", instance),
            ("--repo", repo),
            ("--conversation", conversation),
            ("--kind", kind),
        ]
        if value is None
    ]
    if missing:
        raise UsageProblem(f"Missing {', '.join(missing)}; or publish a JSONL file with --file.")
    check_name("--instance", instance, "bd43f4de")
    check_name("--repo", repo, "apps/chess-academy")
    check_name("--conversation", conversation, "csess_21b8d1b9")
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
        "session_id": conversation,
        "kind": kind,
        "content": content,
    }
    if at is not None:
        body["at"] = at
    if engine is not None:
        body["engine"] = engine
    result = normalise(encode(body), now_text())
    if not isinstance(result, Accepted):
        raise UsageProblem(result.message)
    return body


def _read_content(path: Path) -> str:
    name = "-" if str(path) == "-" else str(path)
    try:
        if name == "-":
            data = sys.stdin.buffer.read(MAX_CONTENT_FILE_BYTES + 1)
        elif path.is_dir():
            raise UsageProblem(f"--content-file {name} is a folder; give a file, or - for stdin.")
        else:
            with path.open("rb") as handle:
                data = handle.read(MAX_CONTENT_FILE_BYTES + 1)
    except OSError as exc:
        raise UsageProblem(f"Cannot read --content-file {name}: {exc.strerror}.") from None
    if len(data) > MAX_CONTENT_FILE_BYTES:
        raise UsageProblem(
            f"--content-file {name} is over {size_text(MAX_CONTENT_FILE_BYTES)}, more than NATS "
            f"carries in one message. An entry keeps at most {MAX_CONTENT_CHARS:,} characters: "
            "publish the part that matters, or split it into several entries."
        )
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise UsageProblem(
            f"--content-file {name} is not UTF-8 text (byte 0x{data[exc.start]:02X} at offset "
            f"{exc.start:,} cannot be read). Convert it first, for example with "
            "`iconv -f latin1 -t utf-8`."
        ) from None


async def _append(settings: Settings, body: dict) -> dict:
    payload = encode(body)
    async with connected(settings) as nc:
        if len(payload) > nc.max_payload:
            raise UsageProblem(
                f"The entry is {size_text(len(payload))} as JSON, over this NATS server's max "
                f"payload of {size_text(nc.max_payload)}, so it cannot be sent. Its content is "
                f"{len(body['content']):,} characters and an entry keeps at most "
                f"{MAX_CONTENT_CHARS:,} (longer content is cut, its length recorded): publish "
                "the part that matters, or split it into several entries."
            )
        entry = msgspec.convert(body, TimelineEntryIn)
        return to_builtins(await answered(SeedlineClient(nc).append(entry)))
