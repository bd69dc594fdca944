"""The whole system as hosts: three nats-server nodes, two copies of every service and of the
web, Postgres and two runner machines, each on a host (network namespace) of its own.

    client  the workload and the checker (the harness's own event loop runs here)
    n1 n2 n3  one nats-server each: deploy/cluster/n1.conf .. n3.conf, rendered with the
            host's address (a JetStream cluster, R3 streams)
    a  b    one copy each of timeline-writer, continuity-resolver, seed-composer,
            runner-gateway and seedline-web
    db      Postgres, over TCP
    r1 r2   the runner machines m1 and m2 (the scripted engine)

Every process is started with `ip netns exec`, which becomes the process itself, so its pid
is the one signals go to (SIGSTOP, SIGKILL). Ports are fixed: each host is a network of its
own, so nothing else can hold them.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from seedline_devtools.embedded import PostgresProcess, nats_server_binary
from seedline_devtools.processes import die_with_parent

from .network import Network

REPO_ROOT = Path(__file__).resolve().parents[2]
CLUSTER_CONFIGS = REPO_ROOT / "deploy" / "cluster"
BIN = Path(sys.executable).parent
HOST_NUMBERS = {"client": 2, "n1": 11, "n2": 12, "n3": 13, "a": 21, "b": 22, "db": 31,
                "r1": 41, "r2": 42}
NODES = ("n1", "n2", "n3")
SERVICE_HOSTS = ("a", "b")
SERVICES = ("timeline-writer", "continuity-resolver", "seed-composer", "runner-gateway")
WEB = "seedline-web"
MACHINES = {"r1": ("m1", "Machine one"), "r2": ("m2", "Machine two")}
CLIENT_PORT, ROUTE_PORT, MONITOR_PORT, PG_PORT, WEB_PORT = 4222, 6222, 8222, 5432, 8080
DATABASE = "seedline"


@dataclass
class Proc:
    """One process on one host, started again with the same command line."""

    name: str
    host: str
    argv: list[str]
    env: dict[str, str]
    log: Path
    popen: subprocess.Popen | None = None
    paused: bool = False
    starts: int = 0

    def start(self) -> None:
        out = open(self.log, "ab")
        out.write(f"\n== start {self.starts + 1} at {time.strftime('%H:%M:%S')}\n".encode())
        out.flush()
        self.popen = subprocess.Popen(self.argv, env=self.env, stdout=out,
                                      stderr=subprocess.STDOUT, start_new_session=True,
                                      preexec_fn=die_with_parent)
        self.starts += 1
        self.paused = False

    @property
    def running(self) -> bool:
        return self.popen is not None and self.popen.poll() is None

    def signal(self, signum: int) -> None:
        if self.running:
            os.kill(self.popen.pid, signum)

    def pause(self) -> None:
        self.signal(signal.SIGSTOP)
        self.paused = True

    def resume(self) -> None:
        self.signal(signal.SIGCONT)
        self.paused = False

    def kill(self) -> None:
        """kill -9 of the process and all it started (Postgres runs under `runuser`, which
        a kill of its own pid would leave running): each starts a session of its own."""
        if self.running:
            self.resume()
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.popen.pid, signal.SIGKILL)
            self.popen.wait()

    def stop(self, timeout: float = 10.0) -> None:
        if not self.running:
            return
        self.resume()
        self.popen.terminate()
        try:
            self.popen.wait(timeout)
        except subprocess.TimeoutExpired:
            self.kill()


def render_node_config(node: str, addresses: dict[str, str], store_dir: Path) -> str:
    """deploy/cluster/<node>.conf with each loopback address replaced by its host's address.

    The files name the three nodes by their loopback ports (clients 4222-4224, monitoring
    8222-8224, routes 6222-6224, in node order); here every node has its own address and
    the first port of each kind."""
    text = (CLUSTER_CONFIGS / f"{node}.conf").read_text()
    owners = {}
    for index, other in enumerate(NODES):
        for base in (CLIENT_PORT, MONITOR_PORT, ROUTE_PORT):
            owners[base + index] = (addresses[other], base)

    def moved(match: re.Match) -> str:
        address, port = owners[int(match.group(1))]
        return f"{address}:{port}"

    text = re.sub(r"127\.0\.0\.1:(\d+)", moved, text)
    text = re.sub(r'store_dir:\s*"[^"]*"', f'store_dir: "{store_dir}"', text)
    return text


@dataclass
class Cluster:
    network: Network
    workdir: Path
    procs: dict[str, Proc] = field(default_factory=dict)

    @property
    def address(self) -> dict[str, str]:
        return {name: host.address for name, host in self.network.hosts.items()}

    @property
    def nats_urls(self) -> list[str]:
        return [f"nats://{self.address[n]}:{CLIENT_PORT}" for n in NODES]

    @property
    def database_url(self) -> str:
        return f"postgresql://postgres@{self.address['db']}:{PG_PORT}/{DATABASE}"

    def monitor_url(self, node: str) -> str:
        return f"http://{self.address[node]}:{MONITOR_PORT}"

    def web_url(self, host: str) -> str:
        return f"http://{self.address[host]}:{WEB_PORT}"

    def store_dir(self, node: str) -> Path:
        return self.workdir / node / "jetstream"

    def _proc(self, name: str, host: str, argv: list[str], env: dict[str, str]) -> Proc:
        proc = Proc(name, host, self.network.exec_argv(host, argv), env,
                    self.workdir / "logs" / f"{name}.log")
        self.procs[name] = proc
        return proc

    def service_env(self, host: str) -> dict[str, str]:
        return dict(
            os.environ,
            SEEDLINE_NATS_URL=",".join(self.nats_urls),
            SEEDLINE_NATS_MONITOR_URL=",".join(self.monitor_url(n) for n in NODES),
            SEEDLINE_DATABASE_URL=self.database_url,
            SEEDLINE_STREAM_REPLICAS="3",
            SEEDLINE_STRICT_DURABILITY="1",
            SEEDLINE_HOME=str(self.workdir / host / "home"),
            SEEDLINE_HTTP_HOST=self.address[host],
            SEEDLINE_HTTP_PORT="0",
            SEEDLINE_WEB_HOST=self.address[host],
            SEEDLINE_WEB_PORT=str(WEB_PORT),
            SEEDLINE_LOG_LEVEL="info",
        )

    # -- the parts ----------------------------------------------------------------------

    def add_node(self, node: str) -> Proc:
        folder = self.workdir / node
        folder.mkdir(parents=True, exist_ok=True)
        config = folder / f"{node}.conf"
        config.write_text(render_node_config(node, self.address, self.store_dir(node)))
        return self._proc(node, node, [nats_server_binary(), "-c", str(config)], dict(os.environ))

    def wipe_node(self, node: str) -> None:
        """A lost disk: the node's whole JetStream folder gone."""
        shutil.rmtree(self.store_dir(node), ignore_errors=True)

    def add_postgres(self, template: Path) -> Proc:
        """Postgres on the db host, from a data folder initialised once (`template`)."""
        data = self.workdir / "db" / "pgdata"
        data.parent.mkdir(parents=True, exist_ok=True)
        subprocess.run(["cp", "-a", str(template), str(data)], check=True)
        with open(data / "pg_hba.conf", "a") as hba:
            hba.write(f"host all all {self.address['client'].rsplit('.', 1)[0]}.0/24 trust\n")
        postgres = Path(template_bin()) / "postgres"
        argv = ["runuser", "-u", "pgserver", "--", str(postgres), "-D", str(data),
                "-c", f"listen_addresses={self.address['db']}", "-c", f"port={PG_PORT}",
                "-c", f"unix_socket_directories={data}", "-c", "fsync=on",
                "-c", "max_connections=200"]
        return self._proc("postgres", "db", argv, dict(os.environ))

    def add_service(self, name: str, host: str) -> Proc:
        return self._proc(f"{name}@{host}", host, [str(BIN / name)], self.service_env(host))

    def add_runner(self, host: str) -> Proc:
        node_id, label = MACHINES[host]
        argv = [str(BIN / "seedline"), "runner", "--node-id", node_id, "--label", label,
                "--engine", "scripted"]
        return self._proc(f"runner@{host}", host, argv, self.service_env(host))

    def services_on(self, host: str) -> list[Proc]:
        return [p for p in self.procs.values() if p.host == host and p.name.split("@")[0]
                in (*SERVICES, WEB)]

    def kill_all(self) -> None:
        """Everything ended at once: the run is over and its record read, so nothing of a
        clean stop matters (and Postgres' backends follow their postmaster)."""
        for proc in self.procs.values():
            proc.kill()


_TEMPLATE: Path | None = None


def template_bin() -> str:
    import pgserver._commands as commands

    return str(commands.POSTGRES_BIN_PATH)


def postgres_template(root: Path) -> Path:
    """A Postgres data folder initialised once per process (initdb takes seconds), with the
    database the services use; each run copies it."""
    global _TEMPLATE
    if _TEMPLATE is not None and (_TEMPLATE / "PG_VERSION").exists():
        return _TEMPLATE
    data = root / "pg-template"
    shutil.rmtree(data, ignore_errors=True)
    server = PostgresProcess(data).start()
    server.admin_sql(f'CREATE DATABASE "{DATABASE}"')
    server.stop()
    _TEMPLATE = data
    return data
