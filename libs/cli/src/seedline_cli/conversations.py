"""`seedline open` and `seedline brief show`: start a conversation, read the brief offered to it."""

from __future__ import annotations

import asyncio
import secrets
import sys
from collections.abc import Awaitable, Callable
from typing import Optional

import msgspec
import typer
from msgspec import to_builtins
from rich.markup import escape
from rich.table import Table

from seedline_client import SeedlineClient
from seedline_contracts.sessions import BriefGetRequest, OpenAnswerRequest, OpenRequest
from seedline_core.notices import (
    brief_receipt_words,
    no_brief_receipt,
    no_brief_text,
    no_such_conversation_text,
)
from seedline_platform.lifecycle_events import conversation_record
from seedline_platform.session_reads import conversation_events

from .config import check_name, load_settings
from .console import err, out, print_json
from .disk_guard import refuse_new_work
from .errors import UsageProblem, Unreachable, reports_errors
from .nats_client import ReplyError, answered, connected

TONE_STYLES = {"info": "green", "warning": "yellow"}


@reports_errors
def open_conversation(
    ctx: typer.Context,
    instruction: Optional[str] = typer.Argument(
        None, help="The message that starts the conversation."
    ),
    instance: str = typer.Option(..., "--instance", help="Instance to open it on."),
    repo: Optional[str] = typer.Option(
        None, "--repo", help="Repository, e.g. apps/chess-academy."),
    engine: Optional[str] = typer.Option(
        None, "--engine", help="Engine to run, e.g. claude or scripted."),
    node: Optional[str] = typer.Option(
        None, "--node", help="Machine to run it on (its node id)."),
    fresh: bool = typer.Option(False, "--fresh", help="Start fresh: no resume and no brief."),
    clean_slate: bool = typer.Option(
        False, "--clean-slate", help="Offer no brief whatever the decision."
    ),
    request_id: Optional[str] = typer.Option(
        None, "--request-id",
        help="Sending the same id again returns the first answer and never opens a second "
        "conversation; alone with --instance it asks for the answer of an open that timed out.",
    ),
    json_out: bool = typer.Option(False, "--json", help="Print the reply as JSON."),
) -> None:
    """Open a conversation on a repo (resume, or brief a fresh engine).

    Prints the notice a person would see, the continuity decision and the brief's size.
    Every open carries a request_id (one is made up when none is given); when the answer
    does not come in time, the open goes on and `seedline open --instance I --request-id
    ID` asks for its answer.
    """
    check_name("--instance", instance, "bd43f4de")
    asking_again = repo is None and engine is None and node is None
    if asking_again and request_id is None:
        raise UsageProblem(
            "Say what to open (--repo, --engine and --node), or give --request-id alone to "
            "ask for the answer of an earlier open.")
    if not asking_again:
        for option, value in (("--repo", repo), ("--engine", engine), ("--node", node)):
            if value is None:
                raise UsageProblem(f"Missing option {option}: an open needs --repo, --engine "
                                   "and --node.")
        check_name("--repo", repo, "apps/chess-academy")
        check_name("--node", node, "mac-mini-1")
    request_id = request_id or new_request_id()
    settings = load_settings(ctx)
    request = OpenAnswerRequest(instance, request_id) if asking_again else OpenRequest(
        instance, repo, engine, node, request_id, fresh, clean_slate, instruction)
    timeout = settings.open_timeout_seconds + 5
    if not asking_again:
        refuse_new_work()
    try:
        reply = asyncio.run(
            _request(settings, lambda client: client.open(request, timeout), OPEN_HINTS))
    except (ReplyError, Unreachable) as exc:
        if isinstance(exc, Unreachable) and "did not answer" not in exc.message:
            raise
        if isinstance(exc, ReplyError) and exc.code != "timeout":
            raise
        raise ReplyError("timeout", still_going(instance, request_id)) from None
    if json_out:
        print_json(reply)
        return
    print_open_reply(reply)


def new_request_id() -> str:
    return "cli-" + secrets.token_hex(8)


def still_going(instance: str, request_id: str) -> str:
    """What a person reads when an open's answer did not come in time (CONTRACT.md 4)."""
    return (
        f"No answer yet; the open goes on (request_id {request_id}). Ask for its answer with "
        f"`seedline open --instance {instance} --request-id {request_id}`: that never opens "
        "a second conversation."
    )


def print_open_reply(reply: dict) -> None:
    """The notice a person would see, then the decision and the brief's receipt."""
    notice = reply.get("notice") or {}
    if notice.get("console"):
        out.print(f"[{TONE_STYLES.get(notice.get('tone'), '')}]{escape(notice['console'])}[/]")
    continuity = reply.get("continuity") or {}
    table = Table(show_header=False, box=None)
    table.add_column(no_wrap=True)
    table.add_column(overflow="fold")
    table.add_row("conversation", escape(reply["session_id"]))
    table.add_row("machine", escape(reply["node_id"]))
    table.add_row("outcome", escape(reply["outcome"]))
    table.add_row("decision", escape(f"{continuity.get('mode')}: {continuity.get('reason')}"))
    brief = reply.get("brief")
    table.add_row(
        "brief",
        escape(no_brief_receipt(reply.get("no_brief")))
        if brief is None
        else f"{brief_numbers(brief)} ({_receipt(reply)})",
    )
    out.print(table)


def _receipt(reply: dict) -> str:
    """Whether the engine was given the reply's brief, or why not (CONTRACT.md 3.2)."""
    return brief_receipt_words((reply.get("brief") or {}).get("spent"),
                               bool(reply.get("seeded")), bool(reply.get("resumed")),
                               ended=False)


def brief_numbers(brief: dict) -> str:
    rows = brief["rows"]
    return (f"{rows} {'entry' if rows == 1 else 'entries'}, {brief['chars']} characters, "
            f"{brief['omitted_rows']} left out, up to seq {brief['until_seq']}")


brief = typer.Typer(help="Briefs offered to conversations.", no_args_is_help=True)


@brief.command("show")
@reports_errors
def brief_show(
    ctx: typer.Context,
    conversation: str = typer.Argument(..., help="Conversation id, as `seedline open` printed it."),
    json_out: bool = typer.Option(False, "--json", help="Print the brief and its numbers as JSON."),
) -> None:
    """Print the brief last offered to a conversation.

    The text goes to stdout byte for byte; its numbers, and whether the engine was given
    it, go to stderr.
    """
    check_name("CONVERSATION", conversation, "csess_21b8d1b9")
    settings = load_settings(ctx)
    reply, record = asyncio.run(_brief_and_record(settings, conversation))
    if json_out:
        print_json(reply)
        return
    sys.stdout.write(reply["text"])
    sys.stdout.flush()
    receipt = record.brief_receipt(reply["sha256"]) if record is not None else None
    told = f"; {receipt}" if receipt else ""
    err.print(
        f"[dim]{escape(brief_numbers(reply))}, sha256 {reply['sha256']}{escape(told)}[/]"
    )


async def _brief_and_record(settings, session_id: str):
    """The brief last offered and the conversation's record, read through the one typed
    reader. When no brief was offered, the error says why, as recorded (CONTRACT.md 3.1),
    or that no conversation has that id: two different things to be told."""
    async with connected(settings) as nc:
        try:
            reply = to_builtins(await answered(
                SeedlineClient(nc).brief(BriefGetRequest(session_id))))
        except ReplyError as exc:
            if exc.code != "not_found":
                raise
            record = await _record(nc, session_id)
            if record is None:
                raise
            if not record.events:
                raise ReplyError("not_found", no_such_conversation_text(session_id)) from None
            raise ReplyError("not_found", no_brief_text(session_id, record.why_no_brief())) \
                from None
        return reply, await _record(nc, session_id)


async def _record(nc, session_id: str):
    """The conversation's record (None: it could not be read)."""
    try:
        return conversation_record(await conversation_events(nc.jetstream(), session_id, None))
    except Exception:
        return None


# Where a refusal leaves a person, said after the service's own sentence.
OPEN_HINTS = {
    "runner_offline": "A machine is online while `seedline runner` runs on it; `seedline "
                      "runners` lists the machines online now.",
}


async def _request(settings, ask: Callable[[SeedlineClient], Awaitable[msgspec.Struct]],
                   hints: dict[str, str] | None = None) -> dict:
    """The reply `ask` gets from the typed client, as JSON-ready data; a refusal the hints
    name says where it leaves the person."""
    async with connected(settings) as nc:
        try:
            return to_builtins(await answered(ask(SeedlineClient(nc))))
        except ReplyError as exc:
            hint = (hints or {}).get(exc.code)
            if hint is None:
                raise
            raise ReplyError(exc.code, f"{exc.message} {hint}") from None
