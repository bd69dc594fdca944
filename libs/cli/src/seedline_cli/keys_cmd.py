"""`seedline keys rotate`: a new key for an instance's content at rest (Erasure)."""

from __future__ import annotations

import asyncio

import typer
from rich.markup import escape

from seedline_platform.sealing import CACHE_SECONDS, KvKeyStore
from seedline_platform.settings import Settings

from .config import check_name, load_settings
from .console import out, print_json
from .errors import reports_errors
from .nats_client import connected

keys = typer.Typer(help="The keys that seal each instance's content at rest.",
                   no_args_is_help=True)


async def _rotate(settings: Settings, instance: str) -> int:
    async with connected(settings) as nc:
        return await KvKeyStore(nc.jetstream(), settings.stream_replicas).rotate(instance)


@keys.command("rotate")
@reports_errors
def rotate(
    ctx: typer.Context,
    instance: str = typer.Option(..., "--instance", help="The instance whose key is rotated."),
    json_out: bool = typer.Option(False, "--json", help="Print the result as JSON."),
) -> None:
    """Seal the instance's new content with a new key; what is stored keeps opening with
    the key it was sealed with. Needs the operator's NATS user."""
    check_name("INSTANCE", instance, "bd43f4de")
    settings = load_settings(ctx)
    version = asyncio.run(_rotate(settings, instance))
    if json_out:
        print_json({"ok": True, "instance_id": instance, "key_version": version})
        return
    out.print(
        f"Instance {escape(instance)} now seals new content with key version {version}; "
        f"running services take it up within {CACHE_SECONDS:.0f} seconds."
    )
