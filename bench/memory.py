"""Peak RSS of each service after ingesting 200,000 entries.

Starts nats-server (JetStream, sync_interval: always) and Postgres in a temporary
folder, and the four services as subprocesses of their console scripts
(.venv/bin/timeline-writer, ...), so each RSS is one service's own. Publishes
the entries to seedline.ingest.timeline through the real writer, waits until the
projection holds them and every durable consumer has drained (the resolver and
the gateway read the timeline too), then reads VmHWM (peak resident set) and
VmRSS from /proc/<pid>/status.

    python -m bench.memory [--entries 200000] [--size 512]

The system and the fill here are shared with bench.rebuild (one fill, two figures).
Writes bench/results/memory.json and .md and prints the markdown table.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path

from bench import report

SERVICES = ("timeline-writer", "continuity-resolver", "seed-composer", "runner-gateway")
# The one service that creates the tables (the timeline's and its offsets); it starts first.
TABLE_OWNER = "timeline-writer"
TARGET_MB = 150.0
ENTRIES = 200_000
SIZE = 512
INSTANCE = "benchfill"
REPOS = 16
SESSIONS_PER_REPO = 50
# chat_user is left out: with no runner attached it would make the gateway try to wake one.
KINDS = ("chat_assistant", "terminal", "command", "brain", "outcome", "system")
PUBLISH_CHUNK = 2_000
READY_TIMEOUT = 60.0


# -- services as subprocesses --------------------------------------------------------


class ServiceProcess:
    """One service's console script, logging to a file; ready when its /readyz says so.

    Each service serves /readyz on a port of its own (SEEDLINE_HTTP_PORT=0: any free
    one), which it names in its "ready" log line.
    """

    def __init__(
        self, name: str, env: dict, log_path: Path, profile_to: Path | None = None
    ) -> None:
        self.name = name
        self.log_path = log_path
        script = Path(sys.executable).with_name(name)
        if not script.exists():
            raise RuntimeError(f"{script} is missing: run `make install` (uv sync --all-packages)")
        argv = [str(script)]
        if profile_to is not None:  # the same service module under pyinstrument (the bench extra)
            argv = [
                sys.executable,
                "-m",
                "pyinstrument",
                "--renderer=text",
                "--interval=0.0005",
                f"--outfile={profile_to}",
                "-m",
                "seedline_" + name.replace("-", "_"),
            ]
        self._log_from = log_path.stat().st_size if log_path.exists() else 0
        with open(log_path, "ab") as log:
            self.proc = subprocess.Popen(argv, env=env, stdout=log, stderr=subprocess.STDOUT)

    @property
    def pid(self) -> int:
        return self.proc.pid

    async def wait_ready(self, timeout: float = READY_TIMEOUT) -> None:
        deadline = time.monotonic() + timeout
        health = None
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(
                    f"{self.name} exited with code {self.proc.returncode}; see {self.log_path}"
                )
            health = health or self._health_url()
            if health and await asyncio.to_thread(_answers_ok, f"{health}/readyz"):
                return
            await asyncio.sleep(0.1)
        raise RuntimeError(
            f"{self.name} was not ready within {timeout:.0f} s; see {self.log_path}"
        )

    def _health_url(self) -> str | None:
        """The health server's address, from this run's "ready" log line."""
        with open(self.log_path, "rb") as log:
            log.seek(self._log_from)
            for line in log:
                if b'"event": "ready"' in line:
                    try:
                        return json.loads(line)["health"]
                    except (ValueError, KeyError):
                        return None
        return None

    def status(self) -> dict:
        return proc_status(self.pid)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


def _answers_ok(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=2) as response:
            return response.status == 200
    except (urllib.error.URLError, OSError):
        return False


def proc_status(pid: int) -> dict:
    """VmHWM (peak RSS) and VmRSS in MB from /proc/<pid>/status."""
    out = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        key, _, value = line.partition(":")
        if key in ("VmHWM", "VmRSS"):
            out[key] = int(value.split()[0]) / 1024  # kB -> MB (MiB)
    return out


@dataclass
class System:
    tmp: Path
    nats: object
    postgres: object
    database_url: str
    env: dict
    settings: object
    nc: object = None
    js: object = None
    services: dict[str, ServiceProcess] = field(default_factory=dict)

    async def start_services(self, names: Sequence[str], profile: Sequence[str] = ()) -> None:
        """The table owner first, ready before the others start (they read its tables);
        then the rest together."""
        first = [name for name in names if name == TABLE_OWNER]
        for group in (first, [name for name in names if name != TABLE_OWNER]):
            for name in group:
                self.services[name] = ServiceProcess(
                    name,
                    self.env,
                    self.tmp / f"{name}.log",
                    profile_to=self.tmp / f"{name}.profile.txt" if name in profile else None,
                )
            for name in group:
                await self.services[name].wait_ready()

    def stop_services(self) -> None:
        for service in self.services.values():
            service.stop()
        self.services.clear()

    def facts(self) -> dict:
        return report.server_facts(self.nats.monitor_url, self.database_url)


@asynccontextmanager
async def system(
    services: Sequence[str] = SERVICES,
    prefix: str = "seedline-bench-",
    postgres=None,
    database: str = "seedline_bench",
) -> AsyncIterator[System]:
    """nats-server with sync_interval: always, Postgres, and the named services running.

    ``postgres`` reuses a running embedded Postgres (a fresh database is made on it).
    """
    import nats
    from seedline_devtools.embedded import start_nats, start_postgres
    from seedline_platform.settings import Settings

    tmp = Path(tempfile.mkdtemp(prefix=prefix))
    nats_proc = own_pg = None
    sys_ = None
    try:
        nats_proc = await asyncio.to_thread(start_nats, tmp / "nats")
        if postgres is None:
            postgres = own_pg = await asyncio.to_thread(start_postgres, tmp / "pg")
        database_url = await asyncio.to_thread(postgres.ensure_database, database)
        env = dict(
            os.environ,
            SEEDLINE_NATS_URL=nats_proc.url,
            SEEDLINE_NATS_MONITOR_URL=nats_proc.monitor_url,
            SEEDLINE_DATABASE_URL=database_url,
            SEEDLINE_HOME=str(tmp / "home"),
            SEEDLINE_STRICT_DURABILITY="1",
            SEEDLINE_LOG_LEVEL="info",  # the "ready" line names the health port
            SEEDLINE_HTTP_PORT="0",  # a free port each: four services share the host
        )
        settings = Settings.from_env(env)
        sys_ = System(tmp, nats_proc, postgres, database_url, env, settings)
        sys_.nc = await nats.connect(nats_proc.url, name="bench")
        sys_.js = sys_.nc.jetstream(publish_async_max_pending=PUBLISH_CHUNK)
        await sys_.start_services(services)
        yield sys_
    finally:
        if sys_ is not None:
            if sys_.nc is not None:
                await sys_.nc.close()
            sys_.stop_services()
        if nats_proc is not None:
            nats_proc.stop()
        if own_pg is not None:
            try:
                own_pg.stop()
            except Exception:
                pass
        shutil.rmtree(tmp, ignore_errors=True)


# -- filling through the real ingest path --------------------------------------------


def entry_body(tag: str, n: int, size: int, content: str) -> bytes:
    repo = n % REPOS
    return json.dumps(
        {
            "entry_id": f"{tag}-{n:07d}",
            "instance_id": INSTANCE,
            "repo": f"bench/repo-{repo}",
            "session_id": f"csess_{tag}{repo:02d}{(n // REPOS) % SESSIONS_PER_REPO:03d}",
            "kind": KINDS[n % len(KINDS)],
            "content": content,
            "at": "2026-08-17T10:00:00Z",
            "engine": "claude",
        }
    ).encode()


async def applied_seq(database_url: str) -> int:
    import psycopg

    async with await psycopg.AsyncConnection.connect(database_url, autocommit=True) as conn:
        return await read_applied(conn)


async def read_applied(conn) -> int:
    """The timeline projection's applied seq (0 before its first append): one writer, so
    the one offset row of partition 0."""
    from seedline_timeline_writer.schema import OFFSETS, TIMELINE_PROJECTION

    return await OFFSETS.read(conn, TIMELINE_PROJECTION)


async def fill(
    sys_: System, count: int, size: int = SIZE, tag: str = "fill", timeout: float = 900.0
) -> dict:
    """Publish `count` entries to ingest in windows and wait until the projection holds them."""
    from seedline_contracts import subjects
    from seedline_platform.natsio import publish_window
    from seedline_platform.replay import last_seq

    content = ("seedline " * (size // 9 + 1))[:size]
    target = await last_seq(sys_.js, subjects.TIMELINE_STREAM) + count
    started = time.perf_counter()
    for first in range(0, count, PUBLISH_CHUNK):
        batch = [
            (
                subjects.INGEST_TIMELINE,
                entry_body(tag, n, size, content),
                {"Nats-Msg-Id": f"{tag}-{n:07d}"},
            )
            for n in range(first, min(first + PUBLISH_CHUNK, count))
        ]
        await publish_window(sys_.js, batch)
    published = time.perf_counter() - started
    deadline = time.monotonic() + timeout
    while await applied_seq(sys_.database_url) < target:
        if time.monotonic() > deadline:
            raise RuntimeError(f"the projection did not reach seq {target} within {timeout:.0f} s")
        await asyncio.sleep(0.1)
    seconds = time.perf_counter() - started
    drained = await wait_drained(sys_.js, timeout)
    return {
        "entries": count,
        "content_bytes": size,
        "published_seconds": published,
        "readable_seconds": seconds,
        "rate_per_s": count / seconds,
        "all_consumers_drained_seconds": time.perf_counter() - started,
        "consumers": drained,
    }


async def wait_drained(js, timeout: float) -> dict:
    """Until every durable consumer on every stream has nothing pending or unacknowledged."""
    deadline = time.monotonic() + timeout
    while True:
        state = {}
        for stream in await js.streams_info():
            for info in await js.consumers_info(stream.config.name):
                if info.config.durable_name:
                    state[info.name] = (info.num_pending or 0) + (info.num_ack_pending or 0)
        if not any(state.values()):
            return state
        if time.monotonic() > deadline:
            raise RuntimeError(f"consumers still have work after {timeout:.0f} s: {state}")
        await asyncio.sleep(0.2)


# -- the benchmark ---------------------------------------------------------------------


def measure_memory(sys_: System) -> dict:
    per_service = {name: s.status() for name, s in sys_.services.items()}
    nats_pid = getattr(getattr(sys_.nats, "proc", None), "pid", None)
    return {
        "services_mb": per_service,
        "nats_server_mb": proc_status(nats_pid) if nats_pid else None,
        "target_mb": TARGET_MB,
        "target_met": all(v["VmHWM"] <= TARGET_MB for v in per_service.values()),
    }


def markdown(result: dict) -> str:
    fill_ = result["fill"]
    lines = [
        "# Memory: peak RSS per service",
        "",
        f"After ingesting {fill_['entries']:,} entries of {fill_['content_bytes']} B content through"
        f" seedline.ingest.timeline ({fill_['rate_per_s']:,.0f} entries/s until readable); each service"
        " runs as its own process (its console script).",
        "",
        "| service | peak RSS (VmHWM) MB | RSS now MB | target | met |",
        "|---|---:|---:|---:|---|",
    ]
    for name, v in result["services_mb"].items():
        lines.append(
            f"| {name} | {v['VmHWM']:.1f} | {v['VmRSS']:.1f} | <= {result['target_mb']:.0f} MB"
            f" | {report.yes_no(v['VmHWM'] <= result['target_mb'])} |"
        )
    if result.get("nats_server_mb"):
        v = result["nats_server_mb"]
        lines.append(
            f"| (nats-server, for reference) | {v['VmHWM']:.1f} | {v['VmRSS']:.1f} | - | - |"
        )
    return "\n".join(lines) + "\n"


async def _run(entries: int, size: int) -> dict:
    async with system(prefix="seedline-bench-memory-") as sys_:
        facts = sys_.facts()
        fill_ = await fill(sys_, entries, size)
        result = measure_memory(sys_)
    return {
        "benchmark": "memory",
        "generated_at": report.stamp(),
        "machine": report.machine(),
        "servers": facts,
        "fill": fill_,
        **result,
    }


def run_memory_bench(entries: int = ENTRIES, size: int = SIZE, write: bool = True) -> dict:
    result = asyncio.run(_run(entries, size))
    if write:
        report.write("memory", result, markdown(result))
    return result


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        prog="python -m bench.memory", description=__doc__.split("\n")[0]
    )
    parser.add_argument("--entries", type=int, default=ENTRIES)
    parser.add_argument("--size", type=int, default=SIZE)
    args = parser.parse_args(argv)
    print(markdown(run_memory_bench(args.entries, args.size)))


if __name__ == "__main__":
    main()
