"""`seedline machines`: an operator adds and removes runner machines.

`add` makes the machine's own NATS user (the permissions nats_auth renders for every
runner) and prints the one line the machine joins with; `remove` stops what the machine
runs (its people told), takes its user away and ends its connection. Both write the users
file the platform's nats-server includes and make the server reload it (machines.py says
why a reload). They run where that file is, with the operator's NATS user.
"""

from __future__ import annotations

import asyncio
import getpass
import os
import re
from pathlib import Path
from typing import Optional

import typer
from rich.markup import escape

from seedline_cli.config import check_name, load_settings
from seedline_cli.console import err, out
from seedline_cli.errors import OperationFailed, UsageProblem, reports_errors

# `seedline --help` imports this module for its summary: what the commands need (NATS, the
# wire types, bcrypt) is imported when one runs.

machines = typer.Typer(help="Add and remove runner machines (the operator's side).",
                       no_args_is_help=True, rich_markup_mode=None)

USERS_HELP = ("The users file the platform's nats-server includes (deploy/nats-users.conf "
              "beside nats-secure.conf); default SEEDLINE_NATS_USERS_FILE.")
# Each conversation's machine is asked to stop it and save its checkout, one after another.
STOP_SECONDS = 120
PID_HELP = ("The nats-server's pid file (its config's pid_file), to make it reload; default "
            "SEEDLINE_NATS_PID_FILE. Without one, send the server SIGHUP yourself.")


def _users_file(value: Optional[Path]) -> Path:
    found = value or (Path(os.environ["SEEDLINE_NATS_USERS_FILE"])
                      if os.environ.get("SEEDLINE_NATS_USERS_FILE") else None)
    if found is None:
        raise UsageProblem(
            "Name the users file the platform's nats-server includes: --users-file, or "
            "SEEDLINE_NATS_USERS_FILE (deploy/nats-users.conf beside nats-secure.conf).")
    return found


def _pid_file(value: Optional[Path]) -> Optional[Path]:
    if value is not None:
        return value
    named = os.environ.get("SEEDLINE_NATS_PID_FILE")
    return Path(named) if named else None


def _plain(url: str) -> str:
    """A URL without the credentials it may carry."""
    return re.sub(r"://[^/@]*@", "://", url)


def _reload(users_file: Path, pid_file: Optional[Path], monitor_url: str) -> bool:
    """True when nats-server was made to reload (and, where its monitoring endpoint can be
    read, seen to)."""
    from . import machines as registry

    if pid_file is None:
        err.print(escape(f"{users_file} is written; nats-server takes it once it reloads "
                         "(send it SIGHUP, or nats-server --signal reload=<pid>)."))
        return False
    try:
        seen = asyncio.run(registry.reload_server(pid_file, monitor_url))
    except registry.MachinesError as exc:
        raise OperationFailed(str(exc)) from None
    if not seen and registry.config_load_time(monitor_url) is not None:
        raise OperationFailed(
            f"{users_file} is written, but nats-server did not read its configuration again: "
            "its log says why (a reload it refuses keeps the users it had).")
    return True


@machines.command("add")
@reports_errors
def add(
    ctx: typer.Context,
    node_id: str = typer.Argument(..., help="The machine's id, e.g. mac-mini-1."),
    label: Optional[str] = typer.Option(None, "--label",
                                        help='The name people see, e.g. "Mac mini".'),
    url: list[str] = typer.Option(
        [], "--url", help="A NATS URL the machine reaches the platform at; repeat for a "
        "cluster (default SEEDLINE_NATS_PUBLIC_URL, else SEEDLINE_NATS_URL)."),
    users_file: Optional[Path] = typer.Option(None, "--users-file", help=USERS_HELP),
    pid_file: Optional[Path] = typer.Option(None, "--pid-file", help=PID_HELP),
) -> None:
    """Add a runner machine: its own NATS user, and the line it joins with.

    Prints one line, `seedline runner join '...'`, to run on the machine. It holds the
    machine's password and, when the URL is tls://, the CA the machine trusts
    (SEEDLINE_NATS_CA_FILE); hand it over as you would a password. The user may do what
    every runner may and nothing else (deploy/nats-secure.conf).
    """
    from seedline_runner.machine.join_line import JoinLine

    from . import machines as registry

    check_name("NODE", node_id, "mac-mini-1")
    settings = load_settings(ctx)
    path = _users_file(users_file)
    known = _load(path)
    if node_id in known:
        raise OperationFailed(
            f"{node_id} is a machine of this platform already (added {known[node_id].added_at}); "
            f"to give it a new line, remove it first: seedline machines remove {node_id}.")
    urls = [u.strip() for u in (url or (os.environ.get("SEEDLINE_NATS_PUBLIC_URL")
                                        or settings.nats_url).split(",")) if u.strip()]
    urls = [_plain(u) for u in urls]
    ca = None
    if any(u.startswith("tls://") for u in urls):
        if not settings.nats_ca_file:
            raise UsageProblem("The machine reaches NATS over TLS: set SEEDLINE_NATS_CA_FILE "
                               "to the CA that signed the server's certificate.")
        ca = Path(settings.nats_ca_file).read_text()
    machine, password = registry.added(node_id, label or node_id, _operator())
    registry.save(path, {**known, node_id: machine})
    user = registry.user_of(node_id)
    if _reload(path, _pid_file(pid_file), settings.nats_monitor_url):
        servers = [_plain(s) for s in settings.nats_servers]
        if not asyncio.run(registry.settled(servers, user, password, settings.nats_tls(),
                                            want=True)):
            raise OperationFailed(
                f"The user {user} is written to {path}, but nats-server does not accept it "
                "yet: its log says why (a reload it refused keeps the old users).")
    line = JoinLine(node_id=node_id, label=machine.label, urls=urls, user=user,
                    password=password, ca=ca).encode()
    err.print(escape(f"{node_id} ({machine.label}) is added: NATS user {user}, reaching "
                     f"{', '.join(urls)}. On the machine, run this line (it holds the "
                     "machine's password):"))
    print(f"seedline runner join '{line}'")


@machines.command("remove")
@reports_errors
def remove(
    ctx: typer.Context,
    node_id: str = typer.Argument(..., help="The machine's id."),
    users_file: Optional[Path] = typer.Option(None, "--users-file", help=USERS_HELP),
    pid_file: Optional[Path] = typer.Option(None, "--pid-file", help=PID_HELP),
) -> None:
    """Remove a runner machine: stop what it runs, take its NATS user away.

    Its live conversations are stopped first (the machine saves their checkouts) and their
    people told; then its user is removed and nats-server reloaded, which ends the machine's
    connection; its presence is deleted, so it is offline at once.
    """
    from seedline_cli.nats_client import connected

    from . import machines as registry

    check_name("NODE", node_id, "mac-mini-1")
    settings = load_settings(ctx)
    path = _users_file(users_file)
    known = _load(path)
    if node_id not in known:
        raise OperationFailed(f"{node_id} is not a machine this platform added "
                              f"({registry.registry_path(path)}); nothing was changed.")
    machine = known.pop(node_id)

    async def stop_what_it_runs() -> list[str]:
        async with connected(settings, name="seedline-machines") as nc:
            return await _stop_on(nc, node_id)

    stopped = asyncio.run(stop_what_it_runs())
    registry.save(path, known)
    # Once reloaded, the server refuses the user and has closed the machine's connection.
    reloaded = _reload(path, _pid_file(pid_file), settings.nats_monitor_url)

    async def after() -> list[str]:
        async with connected(settings, name="seedline-machines") as nc:
            await _forget_presence(nc, node_id)
            return await _stop_on(nc, node_id)  # anything launched there meanwhile

    stopped += asyncio.run(after())
    what = (f"{len(stopped)} conversation(s) running on it stopped and their people told"
            if stopped else "nothing was running on it")
    user = ("its NATS user is gone and its connection closed" if reloaded else
            "its NATS user is out of the users file, gone once nats-server reloads")
    out.print(escape(f"{node_id} ({machine.label}) is removed: {user}; {what}."))


async def _stop_on(nc, node_id: str) -> list[str]:
    """The gateway stops what runs on the machine and tells its people (CONTRACT.md 6)."""
    from seedline_cli.nats_client import answered
    from seedline_client import SeedlineClient
    from seedline_contracts import channels
    from seedline_contracts.runner import MachineRemoveRequest

    request = MachineRemoveRequest(node_id=node_id, by=_operator())
    reply = await answered(SeedlineClient(nc).call(channels.MACHINES_REMOVE, request,
                                                   timeout=STOP_SECONDS))
    return reply.stopped


async def _forget_presence(nc, node_id: str) -> None:
    from seedline_contracts import subjects

    try:
        kv = await nc.jetstream().key_value(subjects.RUNNERS_BUCKET)
        await kv.delete(subjects.presence_key(node_id))
    except Exception:
        pass  # no presence, or the bucket is not there: its key ends by its TTL anyway


def _load(path: Path) -> dict:
    from . import machines as registry

    try:
        return registry.load(path)
    except registry.MachinesError as exc:
        raise OperationFailed(str(exc)) from None


def _operator() -> str | None:
    try:
        return getpass.getuser()
    except Exception:
        return None


@machines.command("list")
@reports_errors
def list_machines(
    ctx: typer.Context,
    users_file: Optional[Path] = typer.Option(None, "--users-file", help=USERS_HELP),
    json_out: bool = typer.Option(False, "--json", help="Print the machines as JSON."),
) -> None:
    """The machines this platform added: label, when, and whether each is online now."""
    from rich.table import Table

    from seedline_cli.console import add_id_column, add_text_column, print_json, print_table
    from seedline_cli.nats_client import connected
    from seedline_cli.runners_cmd import age_text, read_presence

    settings = load_settings(ctx)
    known = _load(_users_file(users_file))

    async def presence() -> dict[str, dict]:
        async with connected(settings, name="seedline-machines") as nc:
            return {row["node_id"]: row for row in await read_presence(nc)}

    online = asyncio.run(presence())
    rows = [{"node_id": m.node_id, "label": m.label, "added_at": m.added_at,
             "added_by": m.added_by, "online": m.node_id in online,
             "version": (online.get(m.node_id) or {}).get("version"),
             "heartbeat_age_seconds": (online.get(m.node_id) or {}).get(
                 "heartbeat_age_seconds")} for m in known.values()]
    if json_out:
        print_json({"ok": True, "machines": rows})
        return
    if not rows:
        out.print("No machine is added yet: seedline machines add NODE --label LABEL.")
        return
    table = Table(title=f"{len(rows)} machine(s) added", title_justify="left")
    add_id_column(table, "machine", [r["node_id"] for r in rows])
    for column in ("label", "added", "version", "last presence"):
        add_text_column(table, column)
    for r in rows:
        age = r["heartbeat_age_seconds"]
        table.add_row(escape(r["node_id"]), escape(r["label"]), escape(r["added_at"]),
                      escape(r["version"] or "-"),
                      f"{age_text(age)} ago" if age is not None else "offline")
    print_table(table)
