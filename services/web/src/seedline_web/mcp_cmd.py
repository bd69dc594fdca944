"""`seedline mcp`: the MCP server over stdio, for one instance."""

from __future__ import annotations

import asyncio

import typer

from seedline_cli.config import check_name, load_settings
from seedline_cli.errors import START_HINT, Unreachable, reports_errors


@reports_errors
def mcp(
    ctx: typer.Context,
    instance: str = typer.Option(..., "--instance", help="The instance the tools work on."),
) -> None:
    """Serve Seedline's MCP tools over stdio (an agent starts this command itself).

    Over HTTP the same tools are at the web process's /mcp, with a bearer token.
    """
    from .mcp_stdio import serve_stdio

    check_name("--instance", instance, "bd43f4de")
    settings = load_settings(ctx)
    try:
        asyncio.run(serve_stdio(settings, instance))
    except KeyboardInterrupt:
        pass
    except ConnectionError:
        raise Unreachable(
            f"Cannot reach NATS at {settings.nats_url}. {START_HINT}, or set SEEDLINE_NATS_URL."
        ) from None
