"""The `seedline` command: one Typer app, one module per command group.

Each command's module is imported only when that command runs (lazy_commands.py), so
`seedline --help` and a quick `seedline status` do not pay for every other command's imports.
Other packages add theirs through the `seedline.commands` entry points: `up` (the
supervisor), `tokens` and `mcp` (the web process), `eval` (the seed-composer) and `docs`
(the developer tools).
"""

from __future__ import annotations

from typing import Optional

import typer

from .app_group import SeedlineGroup
from .lazy_commands import LazyCommand as C

COMMANDS = (
    C("publish", "publish", "publish", "Publish one timeline entry, or many from a JSONL file."),
    C("import", "import_cmd", "importer",
      "Import existing Claude Code or Codex conversations into the timeline."),
    C("capture", "capture_cmd", "capture",
      "Follow Claude Code's or Codex's transcript folder and publish new lines as they "
      "are written."),
    C("timeline", "timeline_cmd", "timeline", "Read a repo's timeline, oldest first."),
    C("open", "conversations", "open_conversation",
      "Open a conversation on a repo (resume, or brief a fresh engine)."),
    C("brief", "conversations", "brief", "Briefs offered to conversations."),
    C("conversations", "conversations_cmd", "conversations",
      "List the live conversations: repo, machine, engine, outcome and idle time."),
    # The older name, for scripts.
    C("sessions", "conversations_cmd", "conversations",
      "List the live conversations: repo, machine, engine, outcome and idle time.",
      hidden=True),
    C("relocate", "relocate_cmd", "relocate", "Move a conversation to another machine."),
    C("worktree", "worktree_cmd", "worktree",
      "What was saved of a conversation's checkout as it stopped, and applying it by hand."),
    C("stop", "stop_cmd", "stop", "Stop a live conversation: its machine ends the engine."),
    C("runner", "machine_cmd", "runner", "Run this machine as a runner that hosts engines."),
    C("runners", "runners_cmd", "runners",
      "List the runner machines online now: label, engines and last heartbeat."),
    C("status", "status_cmd", "status",
      "Check the running system: NATS, services, consumer lag, machines online."),
    C("rejected", "rejected_cmd", "rejected",
      "Input that could not be accepted, with its reason (newest first)."),
    C("notices", "notices_cmd", "notices",
      "Print an instance's notices: the ones kept, then (with --follow) each as it comes."),
    C("schema", "schema_cmd", "schema", "Print or write the JSON Schemas of the wire messages."),
    C("acp", "acp_cmd", "acp",
      "Serve an editor on stdin/stdout (Zed, JetBrains, Neovim: an agent server command)."),
    C("rebuild", "rebuild_cmd", "rebuild",
      "Rebuild projections from the streams and compare digests."),
    C("keys", "keys_cmd", "keys", "The keys that seal each instance's content at rest."),
    C("forget", "forget_cmd", "forget",
      "Forget an instance: destroy its key and drop everything of it. Needs the operator's\n"
      "NATS user; it cannot be undone."),
    C("bench", "bench_cmd", "bench",
      "Run the benchmark suite on real servers and print its table (about 10 minutes)."),
)


class SeedlineCommands(SeedlineGroup):
    lazy = COMMANDS


app = typer.Typer(
    name="seedline",
    cls=SeedlineCommands,
    help="Seedline: conversations for coding agents that outlive their processes.",
    no_args_is_help=True,
    add_completion=False,
    # Plain help for the command list: rich's help formatting imports markdown-it and
    # pygments, several times what everything else at start-up costs.
    rich_markup_mode=None,
    pretty_exceptions_enable=False,
    context_settings={"help_option_names": ["-h", "--help"]},
)


@app.callback()
def root(
    ctx: typer.Context,
    nats_url: Optional[str] = typer.Option(
        None,
        "--nats-url",
        help="NATS server(s); defaults to SEEDLINE_NATS_URL or nats://127.0.0.1:4222.",
    ),
) -> None:
    """Settings come from the environment (SEEDLINE_*); see the README's Configuration table."""
    ctx.obj = {"nats_url": nats_url}


if __name__ == "__main__":
    app()
