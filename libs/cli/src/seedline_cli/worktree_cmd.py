"""`seedline worktree`: what was saved of a conversation's checkout each time it stopped
(CONTRACT.md 6), and applying a save to a checkout by hand.

Saves are sealed with keys derived from the instance's key; opening one needs what the
platform's services may read (the operator's NATS user), as `seedline keys` does.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import typer
from rich.markup import escape

from seedline_contracts.events import WorktreeApplied, WorktreeSaved
from seedline_platform.lifecycle_events import saved_work
from seedline_platform.sealing import KvKeyStore, Sealer
from seedline_platform.session_reads import conversation_events
from seedline_platform.settings import Settings

from .config import check_name, load_settings
from .console import out, print_json
from .errors import OperationFailed, UsageProblem, reports_errors
from .nats_client import connected

worktree = typer.Typer(
    help="What was saved of a conversation's checkout as it stopped, and applying it by hand.",
    no_args_is_help=True)


async def _events(settings: Settings, conversation: str) -> list:
    async with connected(settings) as nc:
        return [e for _, e in await conversation_events(nc.jetstream(), conversation, None)
                if isinstance(e, (WorktreeSaved, WorktreeApplied))]


def _saved_line(saved: WorktreeSaved) -> str:
    tree = saved.worktree
    where = f"{tree.base_commit[:12]}" + (f" on {tree.branch}" if tree.branch else "")
    if tree.clean:
        what = "no uncommitted changes"
    elif tree.over_limit:
        what = "uncommitted changes over the size limits, not stored"
    elif tree.snapshot is None:
        what = "uncommitted changes that could not be stored"
    else:
        n = tree.snapshot.files
        what = (f"{n} file{'' if n == 1 else 's'} ({tree.snapshot.bytes:,} bytes) in "
                f"{tree.snapshot.object}")
    left = f"; left out: {', '.join(i.path for i in tree.left_out)}" if tree.left_out else ""
    record = "; the engine's record too" if tree.engine_record else ""
    return f"{saved.at}  saved on {saved.label} at {where}: {what}{left}{record}"


def _applied_line(applied: WorktreeApplied) -> str:
    tree = applied.worktree
    said = tree.sentence if tree is not None else "the machine did not say"
    return f"{applied.at}  carried to {applied.node_id} from {applied.from_node}: {said}"


@worktree.command("show")
@reports_errors
def show(
    ctx: typer.Context,
    conversation: str = typer.Argument(..., help="Conversation id."),
    json_out: bool = typer.Option(False, "--json", help="Print the saves as JSON."),
) -> None:
    """Each save of the conversation's checkout, and where each was carried."""
    check_name("CONVERSATION", conversation, "csess_21b8d1b9")
    found = asyncio.run(_events(load_settings(ctx), conversation))
    if json_out:
        import msgspec

        print_json({"ok": True, "session_id": conversation,
                    "events": [msgspec.to_builtins(e) for e in found]})
        return
    if not found:
        out.print(f"Nothing was saved of {escape(conversation)}'s checkout: it has not stopped "
                  "in one yet (or the id is not a conversation Seedline opened).")
        return
    for event in found:
        line = _saved_line(event) if isinstance(event, WorktreeSaved) else _applied_line(event)
        out.print(escape(line))


async def _apply(settings: Settings, conversation: str, checkout: Path):
    from seedline_runner.worktree.apply import apply_tree
    from seedline_runner.worktree.store import SavedObjects

    async with connected(settings) as nc:
        js = nc.jetstream()
        saves = [e for _, e in await conversation_events(js, conversation, None)
                 if isinstance(e, WorktreeSaved)]
        if not saves:
            raise UsageProblem(f"Nothing was saved of {conversation}'s checkout; `seedline "
                               "worktree show` lists what was.")
        work = saved_work(saves[-1])
        tree = work.worktree
        archive = None
        if tree.snapshot is not None:
            key = await Sealer(KvKeyStore(js, settings.stream_replicas)).object_key(
                saves[-1].instance_id, conversation, tree.key_version)
            if key is None:
                raise OperationFailed("The key that sealed this save is gone (the instance was "
                                      "forgotten); it can no longer be opened.")
            archive = await SavedObjects(js).get(tree.snapshot.object, key)
        return work, await apply_tree(checkout, tree, archive)


@worktree.command("apply")
@reports_errors
def apply(
    ctx: typer.Context,
    conversation: str = typer.Argument(..., help="Conversation id."),
    to: Path = typer.Option(..., "--to", help="The git checkout to apply it to."),
    json_out: bool = typer.Option(False, "--json", help="Print the result as JSON."),
) -> None:
    """Apply the conversation's newest save to a checkout, as a machine it moves to would:
    at its base commit, all or nothing, never over uncommitted changes of the checkout's
    own. Needs the operator's NATS user (it opens the save)."""
    check_name("CONVERSATION", conversation, "csess_21b8d1b9")
    from seedline_runner.worktree.sentences import applied_sentence

    work, outcome = asyncio.run(_apply(load_settings(ctx), conversation, to.resolve()))
    sentence = applied_sentence(outcome, work.worktree, work.label, str(to))
    if json_out:
        print_json({"ok": outcome.applied, "applied": outcome.applied, "files": outcome.files,
                    "reason": outcome.reason, "sentence": sentence})
    else:
        out.print(escape(sentence))
    if not outcome.applied:
        raise typer.Exit(1)
