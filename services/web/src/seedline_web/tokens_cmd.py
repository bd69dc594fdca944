"""`seedline tokens`: API tokens for the web process, each for one instance."""

from __future__ import annotations

import asyncio
from typing import Optional

import typer
from rich.markup import escape
from rich.table import Table

from seedline_cli.config import load_settings
from seedline_cli.console import out, print_json
from seedline_cli.errors import OperationFailed, UsageProblem, reports_errors

tokens = typer.Typer(help="API tokens for the HTTP API, the console and MCP over HTTP.",
                     no_args_is_help=True)


def _record(record) -> dict:
    return {"token_id": record.token_id, "instance_id": record.instance_id,
            "label": record.label, "created_at": record.created_at.isoformat(),
            "revoked_at": record.revoked_at.isoformat() if record.revoked_at else None}


def _run(ctx: typer.Context, work):
    from .token_admin import TokenAdminError, UnknownToken

    from seedline_cli.preflight import postgres_answers

    settings = load_settings(ctx)
    asyncio.run(postgres_answers(settings))
    try:
        return asyncio.run(work(settings))
    except UnknownToken as exc:
        raise OperationFailed(str(exc)) from None
    except TokenAdminError as exc:
        raise UsageProblem(str(exc)) from None


@tokens.command("create")
@reports_errors
def create(
    ctx: typer.Context,
    instance: str = typer.Option(..., "--instance", help="The one instance the token may use."),
    label: str = typer.Option("", "--label", help="Who or what the token is for."),
    json_out: bool = typer.Option(False, "--json", help="Print the token as JSON."),
) -> None:
    """Create a token for one instance. It is printed once and cannot be shown again."""
    from .token_admin import create_token

    record, token = _run(ctx, lambda s: create_token(s, instance, label))
    if json_out:
        print_json({"ok": True, **_record(record), "token": token})
        return
    out.print(f"Token {escape(record.token_id)} for instance {escape(record.instance_id)}:")
    out.print(token)
    out.print("Keep it now: only its hash is stored. Send it as `Authorization: Bearer <token>`, "
              "or paste it into the console's login form.")


@tokens.command("list")
@reports_errors
def list_(
    ctx: typer.Context,
    instance: Optional[str] = typer.Option(None, "--instance", help="Only this instance's."),
    json_out: bool = typer.Option(False, "--json", help="Print the tokens as JSON."),
) -> None:
    """List tokens (never their secrets)."""
    from .token_admin import list_tokens

    records = _run(ctx, lambda s: list_tokens(s, instance))
    if json_out:
        print_json({"ok": True, "tokens": [_record(r) for r in records]})
        return
    if not records:
        out.print("No tokens yet. Create one with `seedline tokens create --instance <instance>`.")
        return
    table = Table(show_edge=False)
    for column in ("token id", "instance", "label", "created", "revoked"):
        table.add_column(column, overflow="fold")
    for r in records:
        table.add_row(r.token_id, escape(r.instance_id), escape(r.label),
                      f"{r.created_at:%Y-%m-%d %H:%M}",
                      f"{r.revoked_at:%Y-%m-%d %H:%M}" if r.revoked_at else "")
    out.print(table)


@tokens.command("revoke")
@reports_errors
def revoke(
    ctx: typer.Context,
    token_id: str = typer.Argument(..., help="The token's id, as `seedline tokens list` shows."),
    json_out: bool = typer.Option(False, "--json", help="Print the result as JSON."),
) -> None:
    """Revoke a token: requests with it are refused from now on."""
    from .token_admin import revoke_token

    record = _run(ctx, lambda s: revoke_token(s, token_id))
    if json_out:
        print_json({"ok": True, **_record(record)})
        return
    out.print(f"Revoked token {escape(record.token_id)} of instance {escape(record.instance_id)}.")
