"""`seedline timeline`: read a repo's timeline, oldest first, conversations marked."""

from __future__ import annotations

import asyncio
from typing import Optional

import typer
from msgspec import to_builtins
from rich.text import Text

from seedline_client import SeedlineClient
from seedline_contracts.timeline import MAX_READ_LIMIT, TimelineReadRequest
from seedline_platform.settings import Settings

from .config import check_name, conversation_flag, load_settings
from .console import out, print_json
from .errors import reports_errors
from .nats_client import answered, connected
from .timeline_opens import OpenMark, first_decisions, interleave, read_marks

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
    conversation: Optional[str] = typer.Option(
        None, "--conversation", help="Only this conversation."
    ),
    old_flag: Optional[str] = typer.Option(None, "--session", hidden=True),
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

    A rule line names each conversation where it begins. Each open the platform made is
    drawn where it happened, with the continuity decision made then; a wake or a
    relocation is a line of its own.
    """
    conversation = conversation_flag(conversation, old_flag)
    check_name("--instance", instance, "bd43f4de")
    check_name("--repo", repo, "apps/chess-academy")
    if conversation is not None:
        check_name("--conversation", conversation, "csess_21b8d1b9")
    settings = load_settings(ctx)
    entries, has_more, marks, older_seq = asyncio.run(
        _read(settings, instance, repo, conversation, limit, before_seq, min_seq)
    )
    if json_out:
        print_json(
            {
                "ok": True,
                "instance_id": instance,
                "repo": repo,
                "session_id": conversation,
                "entries": entries,
                "has_more": has_more,
                "continuity": first_decisions(marks),
                "opens": [
                    m.to_json() for m in interleave(entries, marks, older_seq, before_seq)
                    if isinstance(m, OpenMark)
                ],
            }
        )
        return
    _render(interleave(entries, marks, older_seq, before_seq), has_more, instance, repo,
            conversation)


async def _read(
    settings: Settings,
    instance: str,
    repo: str,
    conversation: str | None,
    limit: int,
    before_seq: int | None,
    min_seq: int | None,
) -> tuple[list[dict], bool, list[OpenMark], int | None]:
    """The newest ``limit`` entries, fetched a page at a time from newest to oldest; the
    opens of the conversations among them; the seq of the entry just older than them."""
    entries: list[dict] = []
    has_more = False
    async with connected(settings) as nc:

        async def page(before: int | None, size: int, wait_for: int | None) -> dict:
            request = TimelineReadRequest(instance, repo, conversation, before, size, wait_for)
            return to_builtins(await answered(SeedlineClient(nc).read(request)))

        while len(entries) < limit:
            reply = await page(before_seq if not entries else entries[0]["seq"],
                               min(limit - len(entries), MAX_READ_LIMIT),
                               min_seq if not entries else None)
            entries = reply["entries"] + entries
            has_more = bool(reply["has_more"])
            if not has_more or not reply["entries"]:
                break
        older_seq = None
        if has_more and entries:
            older = (await page(entries[0]["seq"], 1, None))["entries"]
            older_seq = older[-1]["seq"] if older else None
        marks = await read_marks(nc, {e["session_id"] for e in entries})
    return entries, has_more, marks, older_seq


def _render(
    items: list[dict | OpenMark], has_more: bool, instance: str, repo: str,
    conversation: str | None,
) -> None:
    entries = [item for item in items if not isinstance(item, OpenMark)]
    if not entries:
        scope = f"conversation {conversation} of " if conversation else ""
        out.print(Text(f"No entries for {scope}{repo} on instance {instance}."))
        return
    current = None
    for item in items:
        if item_conversation(item) != current:
            current = item_conversation(item)
            out.rule(Text(f"conversation {current}"), style="dim")
        if isinstance(item, OpenMark):
            out.print(Text(item.text(), style="dim italic"))
            continue
        header = Text.assemble(
            (f"#{item['seq']}", "bold"),
            "  ",
            (item["at"], "dim"),
            "  ",
            (item["kind"], KIND_STYLES.get(item["kind"], "")),
        )
        if item.get("engine"):
            header.append(f"  {item['engine']}", style="dim")
        if item.get("truncated_from"):
            header.append(f"  (cut from {item['truncated_from']:,} characters)", style="yellow")
        out.print(header)
        out.print(Text(item["content"]), style="", soft_wrap=False)
        out.print()
    if has_more:
        out.print(
            Text(
                f"Older entries exist: add --before-seq {entries[0]['seq']} or a larger --limit.",
                style="dim",
            )
        )


def item_conversation(item: dict | OpenMark) -> str:
    return item.session_id if isinstance(item, OpenMark) else item["session_id"]
