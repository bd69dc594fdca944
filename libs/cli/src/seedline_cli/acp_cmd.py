"""`seedline acp`: Seedline as an Agent Client Protocol agent on stdio, for editors."""

from __future__ import annotations

import asyncio
import logging
import sys
from pathlib import Path
from typing import Optional

import typer

from .config import check_name, load_settings
from .errors import reports_errors
from .nats_client import connected


@reports_errors
def acp(
    ctx: typer.Context,
    instance: str = typer.Option(..., "--instance", help="Instance the conversations are on."),
    repo: Optional[str] = typer.Option(
        None, "--repo", help="The repo, whatever folder the editor opens (default: by --repos-dir)."
    ),
    repos_dir: Optional[Path] = typer.Option(
        None,
        "--repos-dir",
        help="Folder holding the checkouts: the editor's folder DIR/apps/x is repo apps/x "
        "(default, and outside DIR: the folder's own name).",
    ),
    node: Optional[str] = typer.Option(
        None, "--node", help="Machine for a repo with no live conversation (its node id)."
    ),
    engine: Optional[str] = typer.Option(
        None, "--engine", help="Engine for a repo with no live conversation, e.g. claude."
    ),
) -> None:
    """Serve an editor on stdin/stdout (Zed, JetBrains, Neovim: an agent server command).

    New conversations open on the repo of the editor's folder, on the machine and engine
    of the repo's live conversation (else --node and --engine). A turn ends when the
    engine ends it, or when the editor cancels it. Nothing but the protocol is written
    to stdout.
    """
    from .acp_agent import AcpOptions, SeedlineAcpAgent

    check_name("--instance", instance, "bd43f4de")
    if repo is not None:
        check_name("--repo", repo, "apps/chess-academy")
    settings = load_settings(ctx)
    options = AcpOptions(
        instance=instance, repo=repo, repos_dir=repos_dir, node=node, engine=engine,
    )
    # stdout carries the protocol: every log line goes to stderr.
    logging.basicConfig(stream=sys.stderr, level=logging.WARNING)
    asyncio.run(_serve(settings, options, SeedlineAcpAgent))


async def _serve(settings, options, agent_class) -> None:
    from acp import run_agent

    async with connected(settings, name="seedline-acp") as nc:
        await run_agent(agent_class(nc, options))
