"""`seedline timeline`: read a repo's timeline, oldest first, conversations marked."""

from __future__ import annotations

import asyncio
import json
from typing import Optional

import typer
from rich.text import Text

from seedline_contracts import subjects
from seedline_contracts.timeline import MAX_READ_LIMIT
from seedline_platform.settings import Settings

from .config import check_name, load_settings
from .console import out, print_json
from .errors import reports_errors
from .nats_client import call, connected

KIND_STYLES = {
    "chat_user": "bold cyan",
    "chat_assistant": "bold green",
    "terminal": "magenta",
    "command": "yellow",
    "outcome": "bold",
    "brain": "blue",
    "system": "dim",
}


@reports_errors
def timeline(
    ctx: typer.Context,
    instance: str = typer.Option(..., "--instance", help="Instance to read."),
    repo: str = typer.Option(..., "--repo", help="Repository to read, e.g. apps/chess-academy."),
    session: Optional[str] = typer.Option(None, "--session", help="Only this conversation."),
    limit: int = typer.Option(
        100, "--limit", min=1, help="How many of the newest entries to show."
    ),
    before_seq: Optional[int] = typer.Option(
        None, "--before-seq", min=1, help="Only entries older than this seq."
    ),
    min_seq: Optional[int] = typer.Option(
        None, "--min-seq", min=1, help="Wait (up to 5 s) until the entry with this seq is readable."
    ),
    json_out: bool = typer.Option(False, "--json", help="Print the entries as JSON."),
) -> None:
    """Read a repo's timeline, oldest first.

    A rule line names each conversation where the next one begins, with the
    continuity decision that opened it when the platform opened it.
    """
    check_name("--instance", instance, "bd43f4de")
    check_name("--repo", repo, "apps/chess-academy")
    if session is not None:
        check_name("--session", session, "csess_21b8d1b9")
    settings = load_settings(ctx)
    entries, has_more, reasons = asyncio.run(
        _read(settings, instance, repo, session, limit, before_seq, min_seq)
    )
    if json_out:
        print_json(
            {
                "ok": True,
                "instance_id": instance,
                "repo": repo,
                "session_id": session,
                "entries": entries,
                "has_more": has_more,
                "continuity": reasons,
            }
        )
        return
    _render(entries, has_more, instance, repo, session, reasons)


async def _read(
    settings: Settings,
    instance: str,
    repo: str,
    session: str | None,
    limit: int,
    before_seq: int | None,
    min_seq: int | None,
) -> tuple[list[dict], bool, dict[str, dict]]:
    """The newest ``limit`` entries, fetched a page at a time from newest to oldest,
    and the continuity decision of each conversation among them that the platform opened."""
    entries: list[dict] = []
    has_more = False
    async with connected(settings) as nc:
        while len(entries) < limit:
            body = {
                "instance_id": instance,
                "repo": repo,
                "session_id": session,
                "before_seq": before_seq,
                "limit": min(limit - len(entries), MAX_READ_LIMIT),
            }
            if min_seq is not None:
                body["min_seq"] = min_seq
            reply = await call(nc, subjects.API_TIMELINE_READ, body, service="timeline-writer")
            page = reply["entries"]
            entries = page + entries
            has_more = bool(reply["has_more"])
            if not has_more or not page:
                break
            before_seq = page[0]["seq"]
            min_seq = None
        reasons = await _continuity_of(nc, {e["session_id"] for e in entries})
    return entries, has_more, reasons


async def _continuity_of(nc, session_ids: set[str]) -> dict[str, dict]:
    """The last continuity_decided event of each conversation, read from SEEDLINE_SESSIONS."""
    js = nc.jetstream()
    found: dict[str, dict] = {}
    for session_id in sorted(session_ids):
        try:
            msg = await js.get_last_msg(
                subjects.SESSIONS_STREAM, subjects.session_event_subject(session_id, "continuity_decided")
            )
        except Exception:
            continue  # seen only in the timeline, or the stream is not readable from here
        found[session_id] = json.loads(msg.data)["continuity"]
    return found


def _render(
    entries: list[dict], has_more: bool, instance: str, repo: str, session: str | None,
    reasons: dict[str, dict],
) -> None:
    if not entries:
        scope = f"conversation {session} of " if session else ""
        out.print(Text(f"No entries for {scope}{repo} on instance {instance}."))
        return
    current = None
    for entry in entries:
        if entry["session_id"] != current:
            current = entry["session_id"]
            out.rule(Text(f"conversation {current}"), style="dim")
            if current in reasons:
                decided = reasons[current]
                out.print(Text(f"opened {decided['mode']}: {decided['reason']}", style="dim italic"))
        header = Text.assemble(
            (f"#{entry['seq']}", "bold"),
            "  ",
            (entry["at"], "dim"),
            "  ",
            (entry["kind"], KIND_STYLES.get(entry["kind"], "")),
        )
        if entry.get("engine"):
            header.append(f"  {entry['engine']}", style="dim")
        if entry.get("truncated_from"):
            header.append(f"  (cut from {entry['truncated_from']} characters)", style="yellow")
        out.print(header)
        out.print(Text(entry["content"]), style="", soft_wrap=False)
        out.print()
    if has_more:
        out.print(
            Text(
                f"Older entries exist: add --before-seq {entries[0]['seq']} or a larger --limit.",
                style="dim",
            )
        )
