"""The `seedline` command: one Typer app, one module per command group."""

from __future__ import annotations

from typing import Optional

import typer

from .app_group import SeedlineGroup
from .bench_cmd import bench
from .conversations import brief, open_conversation
from .conversations_cmd import conversations
from .docs_cmd import docs
from .eval_cmd import eval_app
from .import_cmd import importer
from .mcp_cmd import mcp
from .acp_cmd import acp
from .notices_cmd import notices
from .publish import publish
from .rebuild_cmd import rebuild
from .rejected_cmd import rejected
from .relocate_cmd import relocate
from .runner_cmd import runner
from .runners_cmd import runners
from .schema_cmd import schema
from .status_cmd import status
from .stop_cmd import stop
from .timeline_cmd import timeline
from .tokens_cmd import tokens
from .up import up

app = typer.Typer(
    name="seedline",
    cls=SeedlineGroup,
    help="Seedline: conversations for coding agents that outlive their processes.",
    no_args_is_help=True,
    add_completion=False,
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


app.command("up")(up)
app.command("publish")(publish)
app.add_typer(importer, name="import")
app.command("timeline")(timeline)
app.command("open")(open_conversation)
app.add_typer(brief, name="brief")
app.command("conversations")(conversations)
app.command("sessions", hidden=True)(conversations)  # the older name, for scripts
app.command("relocate")(relocate)
app.command("stop")(stop)
app.command("runner")(runner)
app.command("runners")(runners)
app.command("status")(status)
app.add_typer(rejected, name="rejected")
app.command("notices")(notices)
app.command("schema")(schema)
app.command("docs")(docs)
app.command("mcp")(mcp)
app.command("acp")(acp)
app.add_typer(tokens, name="tokens")
app.add_typer(rebuild, name="rebuild")
app.command("bench")(bench)
app.add_typer(eval_app, name="eval")

if __name__ == "__main__":
    app()
