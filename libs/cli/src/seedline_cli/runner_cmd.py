"""`seedline runner`: run this machine as a runner (presence, launches, turns); as the
machine it joined as (machine_link.py) unless told another node id."""

from __future__ import annotations

import asyncio
import inspect
import signal
from pathlib import Path
from typing import Optional

import typer
from rich.markup import escape

from .config import check_name
from .console import err
from .errors import OperationFailed, UsageProblem, reports_errors
from .machine_link import Refused, link


def _run_runner_function():
    try:
        from seedline_runner import run_runner
    except ImportError:
        raise OperationFailed(
            "This installation has no runner yet (seedline_runner.run_runner is missing). "
            "Update the seedline-runner package and run the command again."
        ) from None
    return run_runner


@reports_errors
def runner(
    ctx: typer.Context,
    node_id: Optional[str] = typer.Option(
        None, "--node-id",
        help="This machine's id, e.g. mac-mini-1 (default: the one it joined as)."),
    label: Optional[str] = typer.Option(
        None, "--label", help='The name people see, e.g. "Your Mac mini".'
    ),
    engine: list[str] = typer.Option(
        [],
        "--engine",
        help="Engine to offer (scripted, claude, codex, openai, acp:NAME); repeat for more "
        "(default: the joined configuration's, else scripted).",
    ),
    instances: Optional[str] = typer.Option(
        None,
        "--instances",
        help="Serve only these instances, comma-separated (default: every instance).",
    ),
    repos_dir: Optional[Path] = typer.Option(
        None,
        "--repos-dir",
        help="Folder holding the checkouts: repo apps/x runs in DIR/apps/x.",
    ),
    repos_map: Optional[Path] = typer.Option(
        None,
        "--repos-map",
        help='TOML or JSON file mapping repos that live elsewhere: "apps/x" = "/src/x".',
    ),
    claude_bin: str = typer.Option(
        "claude", "--claude-bin", help="The Claude Code executable (engine claude)."
    ),
    claude_arg: list[str] = typer.Option(
        [], "--claude-arg", help="Extra argument for every claude run; repeat for more."
    ),
    claude_permission_mode: str = typer.Option(
        "acceptEdits", "--claude-permission-mode",
        help="Claude Code's permission mode (acceptEdits: it edits files in the checkout "
        "without asking; bypassPermissions: anything).",
    ),
    claude_allowed_tools: str = typer.Option(
        "Bash", "--claude-allowed-tools",
        help="Tools Claude Code uses without asking, comma-separated (Bash: commands, run "
        "in the checkout; empty: none).",
    ),
    codex_sandbox: str = typer.Option(
        "workspace-write", "--codex-sandbox",
        help="Codex's sandbox: read-only, workspace-write (the checkout) or danger-full-access.",
    ),
    codex_approval: str = typer.Option(
        "never", "--codex-approval",
        help="Codex's approval policy (never: what the sandbox refuses is refused, not asked).",
    ),
    codex_bin: str = typer.Option(
        "codex", "--codex-bin", help="The Codex executable (engine codex)."
    ),
    codex_arg: list[str] = typer.Option(
        [], "--codex-arg", help="Extra argument for every codex exec run; repeat for more."
    ),
    acp: list[str] = typer.Option(
        [],
        "--acp",
        help='An ACP agent for engine acp:NAME, as NAME="COMMAND ARGS"; repeat for more '
        "(default: the lines of SEEDLINE_ACP_AGENTS).",
    ),
    acp_permissions: str = typer.Option(
        "checkout",
        "--acp-permissions",
        help="How this machine answers an ACP agent's permission requests: checkout (allow "
        "what touches only the conversation's checkout), allow or reject.",
    ),
    worktree_max_mb: int = typer.Option(
        50, "--worktree-max-mb", min=1, max=1024,
        help="The most uncommitted changes a stopping conversation's checkout is saved with, "
             "in MB; over it the save says so and stores nothing.",
    ),
    worktree_max_files: int = typer.Option(
        5_000, "--worktree-max-files", min=1, max=100_000,
        help="The most uncommitted files a stopping conversation's checkout is saved with.",
    ),
) -> None:
    """Run this machine as a runner that hosts engines.

    Announces itself in the seedline_runners bucket and serves launches, turns and
    stops until Ctrl-C or SIGTERM. With --repos-dir or --repos-map each conversation
    runs in its repo's checkout, and a repo this machine does not have is refused.
    """
    from seedline_runner.cli import CredentialsRefused
    from seedline_runner.pens import NodeInUse
    from seedline_runner.worktree.snapshot import Limits

    if node_id is not None:
        check_name("--node-id", node_id, "mac-mini-1")
    connection = link(ctx, node_id)
    node_id = connection.node_id
    engine = engine or connection.engines or ["scripted"]
    if connection.joined is not None:
        label = label or connection.joined.label
        if repos_dir is None and connection.joined.repos_dir:
            repos_dir = Path(connection.joined.repos_dir)
    if not all(name.strip() for name in engine):
        raise UsageProblem("--engine must not be empty; for example --engine scripted.")
    served = _instances(instances)
    checkouts = _checkouts(repos_dir, repos_map)
    acp_options = _acp_options(acp, acp_permissions)
    permissions = _permissions(claude_permission_mode, claude_allowed_tools, codex_sandbox,
                               codex_approval)
    run_runner = _run_runner_function()
    connection.check()
    label = label or node_id
    where = ""
    if checkouts.repos_dir is not None:
        where += f"; conversations run in their checkouts under {checkouts.repos_dir}"
    if checkouts.mapping:
        where += f"; {len(checkouts.mapping)} repo(s) mapped elsewhere"
    err.print(
        f"Runner {escape(node_id)} ({escape(label)}) with engines {escape(', '.join(engine))}"
        f"{escape(where)}; Ctrl-C stops it."
    )
    try:
        result = run_runner(
            connection.servers,
            node_id,
            label,
            list(engine),
            instances=served,
            checkouts=checkouts,
            claude_executable=claude_bin,
            claude_args=tuple(claude_arg),
            codex_executable=codex_bin,
            codex_args=tuple(codex_arg),
            worktree_limits=Limits(worktree_max_mb * 1024 * 1024, worktree_max_files),
            tls=connection.tls, user=connection.user, password=connection.password,
            state_dir=connection.state_dir,
            **permissions,
            **acp_options,
        )
        if inspect.isawaitable(result):
            asyncio.run(_until_signalled(result))
    except KeyboardInterrupt:
        pass
    except CredentialsRefused:
        raise Refused(
            f"NATS refused this machine's credentials while it ran, so the runner {node_id} "
            "stopped: an operator removed it (`seedline machines remove`) or gave it a new "
            "line; join again with a new line to bring it back.") from None
    except NodeInUse as exc:  # a second copy of the same machine: it says which and what to do
        raise OperationFailed(str(exc)) from None
    except ValueError as exc:
        # The runner checks its engines before it connects: an unknown name, a missing setting.
        raise UsageProblem(str(exc)) from None


def _checkouts(repos_dir: Optional[Path], repos_map: Optional[Path]):
    from seedline_runner.checkouts import CheckoutsError, load_checkouts

    try:
        return load_checkouts(repos_dir, repos_map)
    except CheckoutsError as exc:
        raise UsageProblem(str(exc)) from None


def _instances(value: Optional[str]) -> list[str]:
    if value is None:
        return []
    names = [name.strip() for name in value.split(",")]
    if not all(names):
        raise UsageProblem("--instances takes names separated by commas, e.g. --instances a,b.")
    for name in names:
        check_name("--instances", name, "bd43f4de")
    return names


async def _until_signalled(awaitable) -> None:
    """Cancel the runner on SIGTERM or SIGINT so it can withdraw its presence cleanly."""
    task = asyncio.ensure_future(awaitable)
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, task.cancel)
    try:
        await task
    except asyncio.CancelledError:
        pass


def _permissions(claude_mode: str, claude_tools: str, codex_sandbox: str,
                 codex_approval: str) -> dict[str, object]:
    """Each engine's permission settings, checked before anything starts."""
    from seedline_runner.engines.permissions import (
        ClaudePermissions,
        CodexPermissions,
        parse_tools,
    )

    tools = parse_tools(claude_tools)
    try:
        ClaudePermissions(claude_mode, tools)
        CodexPermissions(codex_sandbox, codex_approval)
    except ValueError as error:
        raise UsageProblem(str(error)) from None
    return {"claude_permission_mode": claude_mode, "claude_allowed_tools": tools,
            "codex_sandbox": codex_sandbox, "codex_approval": codex_approval}


def _acp_options(specs: list[str], permissions: str) -> dict[str, object]:
    """The runner's ACP options; none at all when no ACP agent is configured here."""
    from seedline_runner.engines.acp_config import PERMISSION_POLICIES, parse_acp_agents

    if permissions not in PERMISSION_POLICIES:
        raise UsageProblem(f"--acp-permissions is {', '.join(PERMISSION_POLICIES)}, "
                           f"not {permissions!r}.")
    try:
        agents = parse_acp_agents(specs)
    except ValueError as error:
        raise UsageProblem(str(error)) from error
    options: dict[str, object] = {"acp_permission_policy": permissions}
    if agents:
        options["acp_agents"] = agents
    return options
