"""pytest fixtures that provide real servers (DESIGN.md "Tests").

Order of preference: ``SEEDLINE_NATS_URL`` / ``SEEDLINE_DATABASE_URL`` when set,
else testcontainers when a Docker engine answers, else the embedded binaries.
Every test gets a nats-server of its own (or, on a shared server, streams wiped
first) and a database of its own.
"""

from __future__ import annotations

import itertools
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

import pytest
import structlog

from .embedded import NatsProcess, PostgresProcess, start_nats, start_postgres
from seedline_platform.settings import Settings


def _docker_answers() -> bool:
    try:
        import docker

        docker.from_env(timeout=2).ping()
        return True
    except Exception:
        return False


@dataclass
class NatsEndpoint:
    url: str
    monitor_url: str
    process: NatsProcess | None = None


@pytest.fixture(scope="session")
def _docker() -> bool:
    return _docker_answers() and not os.environ.get("SEEDLINE_NATS_URL")


async def _wipe_shared_server(url: str) -> None:
    import nats

    from seedline_contracts import subjects
    from seedline_contracts.streams import ALL_STREAMS

    nc = await nats.connect(url)
    js = nc.jetstream()
    for name in [s.name for s in ALL_STREAMS] + ["KV_" + subjects.RUNNERS_BUCKET]:
        try:
            await js.delete_stream(name)
        except Exception:
            pass
    await nc.close()


@pytest.fixture
def nats_server(tmp_path: Path, _docker: bool) -> Iterator[NatsEndpoint]:
    shared = os.environ.get("SEEDLINE_NATS_URL")
    if shared:
        import asyncio

        asyncio.run(_wipe_shared_server(shared))
        yield NatsEndpoint(shared, os.environ.get("SEEDLINE_NATS_MONITOR_URL", "http://127.0.0.1:8222"))
        return
    if _docker:
        yield from _nats_container(tmp_path)
        return
    proc = start_nats(tmp_path / "nats")
    try:
        yield NatsEndpoint(proc.url, proc.monitor_url, proc)
    finally:
        proc.kill()  # thrown away with its data: nothing to shut down cleanly for


def _nats_container(tmp_path: Path) -> Iterator[NatsEndpoint]:
    from testcontainers.core.container import DockerContainer
    from testcontainers.core.waiting_utils import wait_for_logs

    conf = tmp_path / "nats.conf"
    conf.write_text(
        "listen: 0.0.0.0:4222\nhttp: 0.0.0.0:8222\n"
        'jetstream { store_dir: "/data", sync_interval: always }\n'
    )
    container = (
        DockerContainer("nats:2.12")
        .with_volume_mapping(str(conf), "/etc/nats/nats.conf", "ro")
        .with_command("-c /etc/nats/nats.conf")
        .with_exposed_ports(4222, 8222)
    )
    with container:
        wait_for_logs(container, "Server is ready")
        host = container.get_container_host_ip()
        yield NatsEndpoint(
            f"nats://{host}:{container.get_exposed_port(4222)}",
            f"http://{host}:{container.get_exposed_port(8222)}",
        )


@dataclass
class PostgresEndpoint:
    admin_url: str
    process: PostgresProcess | None = None

    def url_for(self, database: str) -> str:
        from psycopg.conninfo import conninfo_to_dict, make_conninfo

        params = conninfo_to_dict(self.admin_url)
        params["dbname"] = database
        return make_conninfo(**params)


@pytest.fixture(scope="session")
def postgres_server(tmp_path_factory: pytest.TempPathFactory, _docker: bool) -> Iterator[PostgresEndpoint]:
    shared = os.environ.get("SEEDLINE_DATABASE_URL")
    if shared:
        yield PostgresEndpoint(shared)
        return
    if _docker:
        from testcontainers.postgres import PostgresContainer

        with PostgresContainer("postgres:16", driver=None) as container:
            yield PostgresEndpoint(container.get_connection_url())
        return
    # Outside pytest's own temp folders: pytest prunes old ones while a
    # concurrent run may still have its server in them.
    import shutil
    import tempfile

    data_dir = Path(tempfile.mkdtemp(prefix="seedline-test-pg-"))
    proc = start_postgres(data_dir)
    try:
        yield PostgresEndpoint(proc.url(), proc)
    finally:
        try:
            proc.stop()
        finally:
            shutil.rmtree(data_dir, ignore_errors=True)


_db_counter = itertools.count(1)


@pytest.fixture
def database_url(postgres_server: PostgresEndpoint) -> Iterator[str]:
    import psycopg

    name = f"seedline_test_{os.getpid()}_{next(_db_counter)}"
    with psycopg.connect(postgres_server.admin_url, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}"')
        conn.execute(f'CREATE DATABASE "{name}"')
    yield postgres_server.url_for(name)
    with psycopg.connect(postgres_server.admin_url, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.fixture
def settings(nats_server: NatsEndpoint, database_url: str, tmp_path: Path) -> Settings:
    env = {
        "SEEDLINE_NATS_URL": nats_server.url,
        "SEEDLINE_NATS_MONITOR_URL": nats_server.monitor_url,
        "SEEDLINE_DATABASE_URL": database_url,
        "SEEDLINE_HOME": str(tmp_path / "home"),
        "SEEDLINE_STRICT_DURABILITY": "1",
        "SEEDLINE_LAUNCH_TIMEOUT_SECONDS": "3",
        "SEEDLINE_OPEN_TIMEOUT_SECONDS": "10",
        "SEEDLINE_HTTP_PORT": "0",
    }
    return Settings.from_env(env)


class running:
    """``async with running(app):`` starts a service in this event loop and stops it after."""

    def __init__(self, app) -> None:
        self.app = app
        self._task = None

    async def __aenter__(self):
        import asyncio

        await self.app.start()
        self._task = asyncio.create_task(self.app.run())
        return self.app

    async def __aexit__(self, *exc) -> None:
        from seedline_platform.tasks import cancel_and_wait

        quiesce = getattr(self.app, "quiesce", None)
        if quiesce is not None:
            await quiesce()
        await cancel_and_wait(self._task)
        await self.app.stop()


async def request(nc, subject: str, body, timeout: float = 10.0) -> dict:
    """Send a JSON request and decode the JSON reply."""
    import json

    from seedline_contracts.codec import encode

    data = body if isinstance(body, bytes) else encode(body)
    msg = await nc.request(subject, data, timeout=timeout)
    return json.loads(msg.data)


@pytest.fixture(autouse=True)
def _logging_as_it_was():
    """A test that runs a command in-process (which configures logging for a process:
    level and output) must not change what the next test's ``capture_logs`` sees."""
    yield
    structlog.reset_defaults()


async def with_plan_opened(event: dict, sealer) -> dict:
    """A session event as a test reads it: the launch plan's instruction, stored sealed with
    its instance's key (CONTRACT.md Conventions, Erasure), opened."""
    plan = event.get("plan")
    if isinstance(plan, dict) and isinstance(plan.get("instruction"), str):
        plan["instruction"] = await sealer.open(plan.get("instance_id"), plan["instruction"])
    return event


def between_read_and_write(monkeypatch: pytest.MonkeyPatch, offsets, meanwhile) -> None:
    """`meanwhile` (a coroutine function) runs once, right after a fold's next read of its
    rows with the offset (pg.Offsets.read_with_rows): another copy's batch, a rebuild or
    an erasure that commits before the fold writes."""
    read = offsets.read_with_rows
    pending = [meanwhile]

    async def read_then(conn, *args):
        found = await read(conn, *args)
        if pending:
            await pending.pop()()
        return found
    monkeypatch.setattr(offsets, "read_with_rows", read_then)


def statements_sent(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The first word of each statement any psycopg connection sends from now on."""
    import psycopg

    sent: list[str] = []
    execute = psycopg.AsyncConnection.execute

    async def counted(conn, query, *args, **kw):
        sent.append(str(query).split()[0])
        return await execute(conn, query, *args, **kw)
    monkeypatch.setattr(psycopg.AsyncConnection, "execute", counted)
    return sent
