"""The machines an operator has added, and their NATS users, changed without restarting
nats-server.

Why a configuration reload and not NATS's decentralized JWT accounts: every service's user
and permissions are already generated from the routing tables into the server's
configuration (nats_auth.py), and a reload (SIGHUP, `nats-server --signal reload`) re-reads
it in place: a machine added is accepted at once, and a machine removed has its live
connection closed by the server, which checks every client against the new users as it
reloads. The account model would move every service and the admin onto operator, account
and user JWTs with a resolver, and need a signing tool, to revoke one machine a reload
handles too. The machine's password is stored as a bcrypt hash, which nats-server takes
for a password, so the users file holds nothing a machine could connect with.

The registry (machines.json) and the users file (nats_auth.users_file) sit side by side
where the server includes them; both are written whole, readable by their owner alone.
"""

from __future__ import annotations

import asyncio
import json
import os
import secrets
import signal
import ssl
import urllib.request
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

import bcrypt
import nats

from seedline_contracts.times import now_text

from . import nats_auth

REGISTRY = "machines.json"
# nats-server checks a bcrypt password at each connect: a machine connects seldom.
BCRYPT_ROUNDS = 11
SETTLE_SECONDS = 10.0


class MachinesError(Exception):
    """Something an operator must set right; the message says what."""


@dataclass(frozen=True)
class Machine:
    node_id: str
    label: str
    password_hash: str
    added_at: str
    added_by: str | None = None


def registry_path(users_file: Path) -> Path:
    return users_file.parent / REGISTRY


def load(users_file: Path) -> dict[str, Machine]:
    path = registry_path(users_file)
    try:
        rows = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return {}
    except (OSError, ValueError) as exc:
        raise MachinesError(f"The machines' registry {path} cannot be read ({exc}).") from None
    return {row["node_id"]: Machine(**row) for row in rows}


def new_password() -> str:
    return secrets.token_urlsafe(32)


def hashed(password: str) -> str:
    return bcrypt.hashpw(password.encode(), bcrypt.gensalt(BCRYPT_ROUNDS)).decode()


def save(users_file: Path, machines: dict[str, Machine]) -> None:
    """The registry and the users file the server reads, each written whole."""
    rows = [asdict(machines[node]) for node in sorted(machines)]
    _write_private(registry_path(users_file), json.dumps(rows, indent=2) + "\n")
    _write_private(users_file, nats_auth.users_file(
        {node: machines[node].password_hash for node in sorted(machines)}))


def _write_private(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(path.name + ".partial")
    fd = os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as out:
        out.write(text)
    os.replace(partial, path)


def config_load_time(monitor_url: str) -> str | None:
    """When the server last read its configuration (its /varz), or None when unreadable."""
    try:
        with urllib.request.urlopen(monitor_url.rstrip("/") + "/varz", timeout=2) as resp:
            return json.loads(resp.read()).get("config_load_time")
    except (OSError, ValueError):
        return None


async def reload_server(pid_file: Path, monitor_url: str,
                        within: float = SETTLE_SECONDS) -> bool:
    """Ask the nats-server whose pid file this is to reload its configuration (SIGHUP, what
    `nats-server --signal reload=PID` sends); True once its monitoring endpoint shows it
    read the configuration again, False when that cannot be seen."""
    before = config_load_time(monitor_url)
    try:
        pid = int(pid_file.read_text().strip())
        os.kill(pid, signal.SIGHUP)
    except (OSError, ValueError) as exc:
        raise MachinesError(
            f"nats-server could not be asked to reload through {pid_file} ({exc}); the users "
            "file is written: reload it by hand (nats-server --signal reload=<pid>, or send "
            "it SIGHUP).") from None
    if before is None:
        return False
    deadline = asyncio.get_running_loop().time() + within
    while asyncio.get_running_loop().time() < deadline:
        if config_load_time(monitor_url) not in (None, before):
            return True
        await asyncio.sleep(0.1)
    return False


async def accepted(servers: Sequence[str], user: str, password: str,
                   tls: ssl.SSLContext | None) -> bool | None:
    """Whether NATS lets this user in now: True, False (refused), None (not reachable)."""
    said: list[BaseException] = []

    async def record(error: BaseException) -> None:
        said.append(error)

    try:
        nc = await asyncio.wait_for(nats.connect(
            servers=list(servers), user=user, password=password, tls=tls,
            allow_reconnect=False, max_reconnect_attempts=0, connect_timeout=2,
            error_cb=record), 6)
    except Exception as exc:
        said.append(exc)
        refused = any("authorization violation" in str(e).lower() for e in said)
        return False if refused else None
    await nc.close()
    return True


async def settled(servers: Sequence[str], user: str, password: str,
                  tls: ssl.SSLContext | None, want: bool,
                  within: float = SETTLE_SECONDS) -> bool:
    """Wait until the server's answer for this user is `want` (the reload has taken)."""
    deadline = asyncio.get_running_loop().time() + within
    while True:
        if await accepted(servers, user, password, tls) is want:
            return True
        if asyncio.get_running_loop().time() >= deadline:
            return False
        await asyncio.sleep(0.2)


def added(node_id: str, label: str, by: str | None) -> tuple[Machine, str]:
    """A new machine and its password (shown once, in the join line; stored only hashed)."""
    password = new_password()
    return Machine(node_id, label, hashed(password), now_text(), by), password


def user_of(node_id: str) -> str:
    return nats_auth.runner_user_name(node_id)
