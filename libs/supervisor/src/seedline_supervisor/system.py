"""What `seedline up` runs once its command has checked the options and holds the data
folder: the embedded servers, the services, the web process and the demo runner, started
in order, supervised, and stopped in the reverse order."""

from __future__ import annotations

import asyncio
import os
import shlex
from dataclasses import dataclass, field
from pathlib import Path

from rich.markup import escape
from rich.table import Table

from seedline_cli import up_state
from seedline_cli.nats_client import connected
from seedline_cli.scripts import service_installed
from seedline_core.disk_full import DiskFull
from seedline_platform import disk_space
from seedline_devtools.embedded import (
    EmbeddedServerError,
    NatsProcess,
    PostgresProcess,
    nats_config,
    start_postgres,
)

from .ending_signals import describe, ending_signals
from .leftovers import adopted_postgres_text, left_postgres
from .lock import DataFolderLock
from .probes import is_ready
from .processes import (
    DEFAULT_WEB_PORT,
    DEMO_RUNNER,
    SERVICES,
    WEB,
    Child,
    command_hint,
    runner_available,
    runner_child,
    service_child,
    writer_children,
)
from .servers import SupervisedNats, SupervisedPostgres
from .supervisor import Supervisor
from .terminal import show

READY_LINE = "Seedline is up."


def _say(text: str, lines: list[str]) -> None:
    show(escape(text))
    for line in lines:
        show(f"  [dim]{escape(line)}[/]")


@dataclass
class System:
    home: Path
    nats_port: int
    monitor_port: int
    with_runner: bool
    ready_timeout: float
    lock: DataFolderLock
    web_port: int = DEFAULT_WEB_PORT
    partitions: int = 1  # SEEDLINE_INGEST_PARTITIONS: that many timeline-writers
    nats: NatsProcess | None = None
    postgres: PostgresProcess | None = None
    database_url: str = ""
    children: list[Child] = field(default_factory=list)
    missing: list[str] = field(default_factory=list)
    stop_requested: asyncio.Event = field(default_factory=asyncio.Event)

    @property
    def logs(self) -> Path:
        return self.home / "logs"

    async def run(self) -> int:
        loop = asyncio.get_running_loop()
        # Every signal that would end it (a closed terminal's SIGHUP too) stops everything
        # first: Postgres, started by pg_ctl, would otherwise run on with nobody to stop it.
        for sig in ending_signals():
            loop.add_signal_handler(sig, self._on_signal, sig)
        try:
            return await self._run()
        finally:
            await self._shutdown()

    def _on_signal(self, number: int) -> None:
        if not self.stop_requested.is_set():
            show(f"\nStopping everything ({describe(number)})…")
        self.stop_requested.set()

    async def _run(self) -> int:
        self.logs.mkdir(parents=True, exist_ok=True)
        show(f"Data and logs: {escape(str(self.home))}")
        await self._wait_for_room()
        if self.stop_requested.is_set():
            return 0
        if not await self._start_servers() or self.stop_requested.is_set():
            return 1 if not self.stop_requested.is_set() else 0
        env = self._environment()
        stages = self._stages()
        if self.missing:
            show(f"Not installed yet, so not started: {', '.join(self.missing)}.")
        for stage in stages:
            for child in stage:
                self.children.append(child)
                await child.start(env)
            dead = await self._wait_until_ready(stage)
            if dead is not None:
                return self._report_death(dead)
            if self.stop_requested.is_set():
                return 0
        supervisor = self._supervisor()
        supervisor.write_state()  # before the ready line: `seedline status` may come at once
        self._print_status()
        given_up = await supervisor.run()
        return 1 if given_up is not None else 0

    async def _start_servers(self) -> bool:
        nats_dir = self.home / "nats"
        nats_dir.mkdir(parents=True, exist_ok=True)
        config = nats_dir / "nats.conf"
        config.write_text(
            nats_config(self.nats_port, self.monitor_port, nats_dir / "jetstream", sync_always=True,
                        ingest_partitions=self.partitions)
        )
        self.nats = NatsProcess(config, self.nats_port, self.monitor_port, self.logs / "nats.log")
        show(f"Starting nats-server on 127.0.0.1:{self.nats_port} …")
        try:
            await asyncio.to_thread(self.nats.start)
        except EmbeddedServerError as exc:
            log = self.logs / "nats.log"
            show(f"[red]nats-server did not start: {escape(str(exc))}. Its log: {log}[/]")
            return False
        finally:
            if self.nats.proc is not None:
                self.lock.note_nats_pid(self.nats.proc.pid)
        if self.stop_requested.is_set():
            return False
        show("Starting Postgres …")
        left = left_postgres(self.home / "postgres")
        if left is not None:
            show(escape(adopted_postgres_text(left, self.home / "postgres")))
        try:
            self.postgres = await asyncio.to_thread(start_postgres, self.home / "postgres")
            self.database_url = await asyncio.to_thread(self.postgres.ensure_database, "seedline")
        except Exception as exc:
            log = self.home / "postgres" / "log"
            show(f"[red]Postgres did not start: {escape(str(exc))}. Its log: {log}[/]")
            return False
        link = self.logs / "postgres.log"
        if not link.exists() and not link.is_symlink():
            link.symlink_to(self.home / "postgres" / "log")
        return True

    def _stages(self) -> list[list[Child]]:
        """The timeline-writer first: it creates the streams and the shared tables, which
        services starting at the same moment would otherwise race to create."""
        first: list[Child] = []
        rest: list[Child] = []
        for name in SERVICES:
            if not service_installed(name):
                self.missing.append(name)
            elif name == "timeline-writer":
                first += writer_children(self.logs, self.partitions)
            else:
                rest.append(service_child(name, self.logs, self.web_port))
        if self.with_runner:
            if runner_available():
                rest.append(runner_child(self.logs))
            else:
                self.missing.append(DEMO_RUNNER)
        return [stage for stage in (first, rest) if stage]

    def _environment(self) -> dict[str, str]:
        env = dict(os.environ)
        env.update(
            SEEDLINE_WEB_PORT=str(self.web_port),
            SEEDLINE_NATS_URL=self.nats.url,
            SEEDLINE_NATS_MONITOR_URL=self.nats.monitor_url,
            SEEDLINE_DATABASE_URL=self.database_url,
            SEEDLINE_HOME=str(self.home),
            PYTHONUNBUFFERED="1",
        )
        return env

    async def _wait_until_ready(self, stage: list[Child]) -> Child | None:
        """Returns a child that died while starting, or None."""
        from seedline_platform.settings import Settings

        settings = Settings(nats_url=self.nats.url)
        deadline = asyncio.get_running_loop().time() + self.ready_timeout
        async with connected(settings, name="seedline-up") as nc:
            while not self.stop_requested.is_set():
                for child in self.children:
                    if not child.running:
                        return child
                for child in stage:
                    if not child.ready:
                        child.ready = await is_ready(child.name, nc, self.nats.monitor_url,
                                                     child.health_url)
                if all(c.ready for c in stage):
                    return None
                if asyncio.get_running_loop().time() > deadline:
                    for child in stage:
                        if not child.ready:
                            show(
                                f"[yellow]{child.name} has not answered after "
                                f"{self.ready_timeout:g} s; its log: {child.log_path}[/]"
                            )
                    return None
                await self._pause(0.25)
        return None

    def _supervisor(self) -> Supervisor:
        """From the ready line on, a process that ends is started again (supervisor.py)."""
        servers = [SupervisedNats(self.nats, self.lock.note_nats_pid),
                   SupervisedPostgres(self.postgres)]
        return Supervisor([*servers, *self.children], self.stop_requested, _say,
                          up_state.path_in(self.home),
                          essential=frozenset(s.name for s in servers),
                          look_at_disk=self._look_at_disk,
                          restart_when_room=frozenset({servers[0].name}))

    def _look_at_disk(self) -> DiskFull | None:
        return disk_space.check(self.home, disk_space.needed_bytes())

    async def _wait_for_room(self) -> None:
        """Nothing starts on a full disk: Postgres and nats-server would fail half-started."""
        full = self._look_at_disk()
        if full is not None:
            show(escape(f"{full.message()} Waiting for room before starting."))
        while full is not None and not self.stop_requested.is_set():
            await self._pause(1.0)
            full = self._look_at_disk()

    async def _pause(self, seconds: float) -> None:
        try:
            await asyncio.wait_for(self.stop_requested.wait(), seconds)
        except TimeoutError:
            pass

    def _report_death(self, child: Child) -> int:
        """While starting, a process that ends stops it all: it is more likely set up wrong
        than crashed, and starting it again would only repeat that."""
        code = f" (exit code {child.exit_code})" if child.exit_code is not None else ""
        show(
            f"[bold red]{child.name} stopped unexpectedly{code}.[/] Its log: {child.log_path}"
        )
        for line in child.log_tail():
            show(f"  [dim]{escape(line)}[/]")
        show("Stopping everything.")
        return 1

    def _print_status(self) -> None:
        table = Table(title=None, show_edge=False)
        table.add_column("process")
        table.add_column("state")
        table.add_column("where", overflow="fold")
        table.add_row(
            "nats-server", "[green]ready[/]", f"{self.nats.url} (monitor {self.nats.monitor_url})"
        )
        table.add_row("postgres", "[green]ready[/]", escape(self.database_url))
        for child in self.children:
            state = "[green]ready[/]" if child.ready else "[yellow]not answering yet[/]"
            where = str(child.log_path)
            if child.health_url:
                where += f" (health {child.health_url})"
            table.add_row(child.name, state, escape(where))
        for name in self.missing:
            table.add_row(name, "[dim]not installed yet[/]", "")
        show(table)
        show(f"\n[bold green]{READY_LINE}[/] Press Ctrl-C to stop everything.\n")
        self._print_next_steps()

    def _print_next_steps(self) -> None:
        cli = command_hint()
        show("[bold]What to do next[/], in another terminal:")
        for line in self.second_shell():
            show(f"  {escape(line)}")
        show(f"  {cli} status")
        show(
            f"  {cli} publish --instance demo --repo apps/hello --conversation first-chat "
            "--kind chat_user --content 'Add a README'"
        )
        show(f"  {cli} timeline --instance demo --repo apps/hello")
        ready = {c.name for c in self.children if c.ready}
        if {"continuity-resolver", "runner-gateway", DEMO_RUNNER} <= ready:
            show(
                f"  {cli} open --instance demo --repo apps/hello --engine scripted "
                "--node demo-runner 'What were we doing?'"
            )
        if WEB in ready:
            self._print_web_addresses(cli)
        show(f"Logs: {self.logs}/<name>.log")

    def second_shell(self) -> list[str]:
        """What a shell needs to reach this system, set whatever it had: the defaults of a
        fresh shell may point elsewhere (another nats-server, another data folder)."""
        exports = {
            "SEEDLINE_NATS_URL": self.nats.url,
            # `seedline status` checks durability (sync_interval) through it.
            "SEEDLINE_NATS_MONITOR_URL": self.nats.monitor_url,
            # Commands that open the database (rebuild, tokens) find it through SEEDLINE_HOME.
            "SEEDLINE_HOME": str(self.home),
            "SEEDLINE_WEB_PORT": str(self.web_port),
        }
        if os.environ.get(disk_space.NEEDED_SETTING):  # so that both tell a full disk alike
            exports[disk_space.NEEDED_SETTING] = os.environ[disk_space.NEEDED_SETTING]
        return [f"export {name}={shlex.quote(value)}" for name, value in exports.items()]

    def _print_web_addresses(self, cli: str) -> None:
        base = f"http://127.0.0.1:{self.web_port}"
        show(f"  {cli} tokens create --instance demo   [dim]# a token for the web process[/]")
        show(f"HTTP API: {base}/v1  (OpenAPI: {base}/openapi.json, reference: {base}/docs)")
        show(f"Console: {base}/console")
        show(f"MCP over HTTP: {base}/mcp  (over stdio: {cli} mcp --instance demo)")

    async def _shutdown(self) -> None:
        await asyncio.gather(*(child.stop() for child in self.children if child.running))
        if self.nats is not None:
            await asyncio.to_thread(self.nats.stop)
        if self.postgres is not None:
            try:
                await asyncio.to_thread(self.postgres.stop)
            except Exception as exc:
                show(f"[yellow]Postgres did not stop cleanly: {escape(str(exc))}[/]")
        if self.nats is not None:
            show("Stopped.")
