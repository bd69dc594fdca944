"""`seedline runner` and what a machine does to become one: `join` a platform with the line
an operator printed, `check` the connection, and install the runner as a user `service`
that starts with the machine. Without a subcommand `seedline runner` runs the runner
(runner_cmd.py)."""

from __future__ import annotations

import asyncio
import functools
import os
import sys
from pathlib import Path
from typing import Optional

import typer
from rich.markup import escape

from . import runner_cmd
from .console import err, out
from .errors import OperationFailed, UsageProblem, reports_errors
from .machine_link import problem_error, read_joined

runner = typer.Typer(
    invoke_without_command=True, no_args_is_help=False, add_completion=False,
    help=runner_cmd.runner.__doc__, rich_markup_mode=None)
service = typer.Typer(help="The runner as a user service that starts with the machine.",
                      no_args_is_help=True, rich_markup_mode=None)
runner.add_typer(service, name="service")


@runner.callback()
@functools.wraps(runner_cmd.runner)
def run_unless_told_otherwise(ctx: typer.Context, **options) -> None:
    if ctx.invoked_subcommand is None:
        runner_cmd.runner(ctx, **options)


@runner.command()
@reports_errors
def join(
    line: str = typer.Argument(..., help="The line `seedline machines add` printed."),
    engine: list[str] = typer.Option(
        [], "--engine", help="Engines this machine offers (default: scripted); repeat for more."),
    repos_dir: Optional[Path] = typer.Option(
        None, "--repos-dir", help="Folder holding the checkouts: repo apps/x runs in DIR/apps/x."),
) -> None:
    """Join a platform: write this machine's runner configuration and check it works.

    The configuration goes to the user's config folder (~/.config/seedline/runner.toml on
    Linux, ~/Library/Application Support/Seedline on macOS; SEEDLINE_RUNNER_CONFIG names
    another file), readable by the user alone. Then `seedline runner` runs as this machine,
    and `seedline runner service install` starts it with the machine.
    """
    from seedline_runner.machine import config as machine_config
    from seedline_runner.machine.check import JoinProblem, check
    from seedline_runner.machine.join_line import JoinLineError, decode

    try:
        joined = decode(line)
    except JoinLineError as exc:
        raise UsageProblem(str(exc)) from None
    if repos_dir is not None and not repos_dir.is_dir():
        raise UsageProblem(f"--repos-dir {repos_dir} is not a folder.")
    path = machine_config.config_path()
    config = machine_config.from_join_line(
        joined, path, list(engine) or None, str(repos_dir.resolve()) if repos_dir else None)
    try:
        checked = asyncio.run(check(config))
    except JoinProblem as problem:
        # Nothing is written: the machine's earlier configuration, if any, stays in force.
        raise problem_error(problem) from None
    machine_config.save(config, path)
    skew = "" if checked.skew_seconds is None else \
        f"; its clock is within {max(1, round(abs(checked.skew_seconds)))} s of the platform's"
    out.print(escape(
        f"This machine joined as {config.node_id} ({config.label}), reaching NATS at "
        f"{', '.join(config.urls)} as {config.user}{skew}. Its configuration is in {path}."))
    out.print("Next: `seedline runner service install` starts the runner now and whenever "
              "you log in (or run `seedline runner` in a terminal).")


@runner.command("check")
@reports_errors
def check_cmd() -> None:
    """Check that this machine reaches its platform as the machine it joined as."""
    from seedline_runner.machine.check import JoinProblem, check

    config, path = _joined_or_say_so()
    try:
        asyncio.run(check(config))
    except JoinProblem as problem:
        raise problem_error(problem) from None
    out.print(escape(f"This machine reaches NATS at {', '.join(config.urls)} as "
                     f"{config.node_id} ({config.user}); its configuration is {path}."))


def _joined_or_say_so():
    config, path = read_joined()
    if config is None:
        raise UsageProblem(
            f"This machine has not joined a platform ({path} does not exist): run seedline "
            "runner join '<the line `seedline machines add` printed>' first.")
    return config, path


def _system() -> str:
    return "darwin" if sys.platform == "darwin" else "linux"


@service.command("install")
@reports_errors
def service_install(
    show: bool = typer.Option(False, "--print",
                              help="Print the unit (or agent) file instead of installing it."),
) -> None:
    """Start the runner at login, and again whenever it exits.

    A systemd user unit on Linux, a launchd agent on macOS; it runs `seedline runner` as the
    machine it joined as."""
    from seedline_runner.machine import service as svc

    config, path = _joined_or_say_so()
    spec = svc.ServiceSpec(executable=svc.seedline_executable(), config_path=path.resolve(),
                           node_id=config.node_id,
                           path_env=os.environ.get("PATH", "/usr/local/bin:/usr/bin:/bin"))
    home = Path.home()
    if show:
        sys.stdout.write(svc.service_text(spec, _system(), home).decode())
        return
    done = svc.install(spec, _system(), home)
    if done.failed:
        command, code, said = done.failed[0]
        raise OperationFailed(
            f"The service file is written ({done.path}), but `{' '.join(command)}` failed "
            f"({said or f'exit code {code}'}); run it by hand once the user's service manager "
            "runs (on Linux a login session, or `loginctl enable-linger` for one at boot).")
    out.print(escape(f"The runner {config.node_id} runs as a user service now ({done.path}); "
                     "it starts whenever you log in and again whenever it exits. "
                     "`seedline runner service uninstall` removes it."))


@service.command("uninstall")
@reports_errors
def service_uninstall() -> None:
    """Stop the runner's user service and remove its file."""
    from seedline_runner.machine import service as svc

    done = svc.uninstall(_system(), Path.home())
    if done is None:
        err.print("No runner service is installed for this user; nothing to remove.")
        return
    failed = f" (`{' '.join(done.failed[0][0])}` failed: {done.failed[0][2]})" \
        if done.failed else ""
    out.print(escape(f"The runner's service is stopped and removed ({done.path}){failed}."))
