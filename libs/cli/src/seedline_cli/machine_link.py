"""How `seedline runner` reaches NATS: as the machine it joined as (its configuration in the
user's config folder: URLs, its own user, its CA), or, when it never joined or is given
another node id, through SEEDLINE_NATS_URL and SEEDLINE_NATS_CA_FILE as every command does.

Nothing here needs the platform's packages: a machine with the runner alone runs it.
"""

from __future__ import annotations

import asyncio
import os
import ssl
from dataclasses import dataclass, field
from pathlib import Path

import typer

from seedline_runner.machine import config as machine_config
from seedline_runner.machine.check import JoinProblem, check
from seedline_runner.machine.service import REFUSED_EXIT

from .errors import START_HINT, CliError, OperationFailed, Unreachable, UsageProblem

DEFAULT_URL = "nats://127.0.0.1:4222"


class Refused(CliError):
    """NATS refused this machine's credentials: a service manager does not start it again."""

    exit_code = REFUSED_EXIT
    code = "refused"


def problem_error(problem: JoinProblem) -> CliError:
    if problem.kind == "unreachable":
        return Unreachable(problem.sentence)
    if problem.kind in ("credentials", "permissions"):
        return Refused(problem.sentence)
    return OperationFailed(problem.sentence, problem.kind)


@dataclass(frozen=True)
class Link:
    node_id: str
    servers: list[str]
    tls: ssl.SSLContext | None = None
    user: str | None = None
    password: str | None = None
    # Set when it runs as the machine it joined as.
    joined: machine_config.MachineConfig | None = None
    config_path: Path | None = None
    engines: list[str] = field(default_factory=list)

    @property
    def state_dir(self) -> Path | None:
        return machine_config.state_dir(self.config_path) if self.joined else None

    def check(self) -> None:
        """Before the runner starts: the connection works as this machine (CliError if not)."""
        try:
            if self.joined is not None:
                asyncio.run(check(self.joined))
            else:
                asyncio.run(self._answers())
        except JoinProblem as problem:
            raise problem_error(problem) from None

    async def _answers(self) -> None:
        import nats

        async def quiet(_error) -> None:
            pass

        try:
            nc = await asyncio.wait_for(nats.connect(
                servers=self.servers, tls=self.tls, allow_reconnect=False, connect_timeout=2,
                max_reconnect_attempts=1, error_cb=quiet), 6)
        except Exception:
            raise Unreachable(f"Cannot reach NATS at {', '.join(self.servers)}. {START_HINT}, "
                              "or set SEEDLINE_NATS_URL.") from None
        await nc.close()


def read_joined() -> tuple[machine_config.MachineConfig | None, Path]:
    path = machine_config.config_path()
    try:
        return machine_config.load(path), path
    except machine_config.ConfigError as exc:
        raise UsageProblem(str(exc)) from None


def link(ctx: typer.Context, node_id: str | None) -> Link:
    """As the joined machine when it is the one asked for (and no --nats-url says otherwise),
    else through the environment."""
    joined, path = read_joined()
    root_url = (ctx.find_root().obj or {}).get("nats_url")
    if joined is not None and node_id in (None, joined.node_id) and not root_url:
        try:
            tls = joined.tls()
        except machine_config.ConfigError as exc:
            raise UsageProblem(str(exc)) from None
        return Link(joined.node_id, list(joined.urls), tls, joined.user, joined.password,
                    joined, path, list(joined.engines))
    if node_id is None:
        raise UsageProblem(
            "Give this machine's id with --node-id (for example --node-id mac-mini-1), or join "
            "a platform first: seedline runner join '<the line `seedline machines add` "
            "printed>'.")
    url = root_url or os.environ.get("SEEDLINE_NATS_URL") or DEFAULT_URL
    try:
        tls = machine_config.tls_context(os.environ.get("SEEDLINE_NATS_CA_FILE"))
    except machine_config.ConfigError as exc:
        raise UsageProblem(str(exc).replace("join again with the line the operator gave",
                                            "correct SEEDLINE_NATS_CA_FILE")) from None
    return Link(node_id, [u.strip() for u in url.split(",") if u.strip()], tls)
