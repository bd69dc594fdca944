"""The platform as a person runs it: the four services and runner machines as processes of
their own console scripts, against a real nats-server and Postgres, driven over NATS.

Everything it reports is read from the wire: the streams (by sequence, so nothing is
missed or read twice), the notices of each instance, the presence bucket and the APIs.
``Loop`` runs one asyncio loop on a thread so that a synchronous caller (a Hypothesis
state machine) can drive it while subscriptions keep receiving between calls.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
from collections.abc import Awaitable, Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import nats
import psycopg
from nats.js.errors import KeyDeletedError, KeyNotFoundError, NotFoundError

from seedline_contracts import subjects
from seedline_devtools.embedded import NatsProcess, start_nats
from seedline_devtools.processes import stop_processes
from seedline_devtools.testing import with_plan_opened
from seedline_platform.tasks import cancel_and_wait

BIN = Path(sys.executable).parent
SERVICES = ("timeline-writer", "continuity-resolver", "seed-composer", "runner-gateway")
STREAMS = (
    subjects.INGEST_STREAM, subjects.TIMELINE_STREAM, subjects.SESSIONS_STREAM,
    subjects.REJECTED_STREAM,
)
T = TypeVar("T")


_databases = itertools.count(1)


@contextmanager
def servers(postgres_server, name: str) -> Iterator[tuple[NatsProcess, str, Path]]:
    """A nats-server of its own, a fresh database on the shared Postgres, a folder for logs
    (kept afterwards: the services', the runners' and the test's own)."""
    workdir = Path(tempfile.mkdtemp(prefix=f"seedline-{name}-"))
    nats_proc = start_nats(workdir / "nats", sync_always=False)
    database = f"seedline_{name}_{os.getpid()}_{next(_databases)}"
    with psycopg.connect(postgres_server.admin_url, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{database}"')
        conn.execute(f'CREATE DATABASE "{database}"')
    try:
        yield nats_proc, postgres_server.url_for(database), workdir
    finally:
        nats_proc.stop()
        shutil.rmtree(workdir / "nats" / "jetstream", ignore_errors=True)  # the logs stay
        with psycopg.connect(postgres_server.admin_url, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{database}" WITH (FORCE)')


class Loop:
    """An event loop on a thread of its own; ``run`` waits for one coroutine."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self._thread.start()

    def run(self, coro: Awaitable[T], timeout: float = 180.0) -> T:
        future = asyncio.run_coroutine_threadsafe(coro, self.loop)
        try:
            return future.result(timeout)
        finally:
            future.cancel()  # never left running beside the next call

    def close(self) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(10)


class NotSettled(AssertionError):
    """The system did not reach what was expected in time."""


GIT_ENV = {"GIT_AUTHOR_NAME": "m", "GIT_AUTHOR_EMAIL": "m@example.invalid",
           "GIT_COMMITTER_NAME": "m", "GIT_COMMITTER_EMAIL": "m@example.invalid"}


def _git(cwd: Path, *args: str) -> bytes:
    return subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True,
                          env={**os.environ, **GIT_ENV}).stdout


class Checkouts:
    """Each machine's repos folder, a clone of every repo of the world in it: what its
    engines change there is saved as a conversation stops and carried where it moves."""

    def __init__(self, root: Path, machines: Iterable[str], repos: Iterable[str]) -> None:
        self.root = root
        self.repos = tuple(repos)
        for repo in self.repos:
            origin = root / "origin" / f"{repo}.git"
            origin.parent.mkdir(parents=True, exist_ok=True)
            _git(root, "init", "-q", "--bare", "-b", "main", str(origin))
            seed = root / "seed" / repo
            _git(root, "clone", "-q", str(origin), str(seed))
            (seed / "README.md").write_text(f"# {repo}\n")
            _git(seed, "add", ".")
            _git(seed, "commit", "-qm", "first")
            _git(seed, "push", "-q", "origin", "main")
            for node in machines:
                target = self.folder(node) / repo
                target.parent.mkdir(parents=True, exist_ok=True)
                _git(root, "clone", "-q", str(origin), str(target))

    def folder(self, node_id: str) -> Path:
        return self.root / "machines" / node_id

    def listing(self, node_id: str, repo: str) -> dict[str, bytes | None]:
        """The checkout's uncommitted files and what each holds (None: deleted)."""
        checkout = self.folder(node_id) / repo
        out = _git(checkout, "status", "--porcelain=v1", "-z", "--untracked-files=all")
        found: dict[str, bytes | None] = {}
        for item in out.split(b"\0"):
            if len(item) > 3:
                path = item[3:].decode()
                file = checkout / path
                found[path] = file.read_bytes() if file.is_file() else None
        return found

    def reset(self) -> None:
        """Every checkout back at its commit, with nothing uncommitted."""
        for node in (p.name for p in (self.root / "machines").iterdir()):
            for repo in self.repos:
                checkout = self.folder(node) / repo
                _git(checkout, "checkout", "-q", "-f", "main")
                _git(checkout, "reset", "-q", "--hard", "origin/main")
                _git(checkout, "clean", "-q", "-f", "-d")

    def markers(self) -> list[Path]:
        """Every apply that is not finished or rolled back."""
        return sorted(self.root.glob("machines/*/*/*/.git/seedline-apply.json"))


@dataclass
class Machine:
    node_id: str
    label: str
    proc: subprocess.Popen | None = None
    # Each runner process is a generation: the scripted engine resumes only keys of its own.
    generation: int = 0

    @property
    def online(self) -> bool:
        return self.proc is not None and self.proc.poll() is None


@dataclass
class Observed:
    """Everything read from the streams and notices since the platform started."""

    timeline: list[dict] = field(default_factory=list)
    events: list[dict] = field(default_factory=list)
    rejected: list[dict] = field(default_factory=list)
    notices: dict[str, list[dict]] = field(default_factory=dict)


class Platform:
    def __init__(
        self, *, nats_url: str, monitor_url: str, database_url: str, logs: Path,
        launch_timeout: int = 3, open_timeout: int = 10,
    ) -> None:
        self.env = dict(
            os.environ, SEEDLINE_NATS_URL=nats_url, SEEDLINE_NATS_MONITOR_URL=monitor_url,
            SEEDLINE_DATABASE_URL=database_url, SEEDLINE_HTTP_PORT="0",
            SEEDLINE_LAUNCH_TIMEOUT_SECONDS=str(launch_timeout),
            SEEDLINE_OPEN_TIMEOUT_SECONDS=str(open_timeout), SEEDLINE_LOG_LEVEL="warning",
            # A data folder of its own: a runner keeps what its engines left by node id
            # there, and another platform's machine of the same name must not share it.
            SEEDLINE_HOME=str(logs / "home"),
        )
        self.nats_url = nats_url
        self.logs = logs
        self.services: dict[str, subprocess.Popen] = {}
        # Further copies of each service, beside the one in `services` (SEEDLINE_MODEL_COPIES).
        self.copies: dict[str, list[subprocess.Popen]] = {name: [] for name in SERVICES}
        self.watch = HostingWatch()
        self._service_ids: dict[str, set[str]] = {name: set() for name in SERVICES}
        self.machines: dict[str, Machine] = {}
        self.checkouts: Checkouts | None = None
        self.seen = Observed()
        self._cursor = {name: 0 for name in STREAMS}
        self._notice_subs: dict[str, Any] = {}
        self.nc = None
        self.js = None
        self.kv = None

    # -- processes ------------------------------------------------------------------

    def _spawn(self, argv: list[str], log_name: str) -> subprocess.Popen:
        log = open(self.logs / f"{log_name}.log", "ab")
        return subprocess.Popen(argv, env=self.env, stdout=log, stderr=subprocess.STDOUT,
                                start_new_session=True)

    async def start(self, machines: dict[str, str], copies: int = 1,
                    repos: tuple[str, ...] = ()) -> None:
        self.checkouts = Checkouts(self.logs / "repos", machines, repos)
        self.nc = await nats.connect(self.nats_url, max_reconnect_attempts=-1)
        self.js = self.nc.jetstream()
        # The writer first: it creates the streams the others bind to.
        await self.start_service("timeline-writer")
        await asyncio.gather(*(self.start_service(n) for n in SERVICES[1:]))
        for _ in range(copies - 1):
            for name in SERVICES:  # one at a time: each is told apart by its discovery id
                await self.start_copy(name)
        self.kv = await self.js.key_value(subjects.RUNNERS_BUCKET)
        for node_id, label in machines.items():
            self.machines[node_id] = Machine(node_id, label)
            await self.start_machine(node_id)
        self.watch.start(self)

    async def start_copy(self, name: str) -> None:
        index = len(self.copies[name]) + 2
        proc = self._spawn([str(BIN / name)], f"{name}-{index}")
        self.copies[name].append(proc)
        await self._until(lambda: self._ready(name, proc, f"{name}-{index}"), 60,
                          f"{name} copy {index} ready")

    def every_copy(self, name: str) -> list[subprocess.Popen]:
        return [self.services[name], *self.copies[name]]

    async def pause(self, proc: subprocess.Popen, seconds: float) -> None:
        """SIGSTOP for a span, then SIGCONT: a process that is slow, not gone."""
        proc.send_signal(signal.SIGSTOP)
        try:
            await asyncio.sleep(seconds)
        finally:
            proc.send_signal(signal.SIGCONT)

    async def start_service(self, name: str) -> None:
        proc = self.services[name] = self._spawn([str(BIN / name)], name)
        await self._until(lambda: self._ready(name, proc, name), 60, f"{name} ready")

    async def _ready(self, name: str, proc: subprocess.Popen, log_name: str) -> bool:
        """Whether the copy answers; a copy that exited while starting fails the run at
        once, with why (a start that fails is a defect, not something to wait out)."""
        if proc.poll() is not None:
            tail = (self.logs / f"{log_name}.log").read_text(errors="replace")[-2000:]
            raise NotSettled(f"{log_name} exited with {proc.returncode} while starting:\n{tail}")
        return await self._new_service_id(name)

    async def _new_service_id(self, name: str) -> bool:
        """True once a copy of the service not seen before answers its discovery ping."""
        try:
            msg = await self.nc.request(f"$SRV.INFO.{name}", b"", timeout=0.5)
        except Exception:
            return False
        service_id = json.loads(msg.data).get("id")
        if not service_id or service_id in self._service_ids[name]:
            return False
        self._service_ids[name].add(service_id)
        return True

    async def kill_service(self, name: str) -> None:
        """SIGKILL, then the same console script again, ready."""
        proc = self.services[name]
        proc.send_signal(signal.SIGKILL)
        await asyncio.to_thread(proc.wait)
        await self.start_service(name)

    async def start_machine(self, node_id: str) -> None:
        machine = self.machines[node_id]
        before = await self._presence_revision(node_id)
        self.checkouts.folder(node_id).mkdir(parents=True, exist_ok=True)  # no repo in it, too
        machine.proc = self._spawn(
            [str(BIN / "seedline"), "runner", "--node-id", node_id, "--label", machine.label,
             "--engine", "scripted", "--repos-dir", str(self.checkouts.folder(node_id))],
            f"runner-{node_id}")
        machine.generation += 1

        async def put_by_the_new_process() -> bool:
            revision = await self._presence_revision(node_id)
            return revision is not None and revision != before

        await self._until(put_by_the_new_process, 60, f"runner {node_id} present")

    async def stop_machine(self, node_id: str) -> None:
        """A clean stop (SIGTERM): the runner ends its conversations and deletes its key."""
        machine = self.machines[node_id]
        machine.proc.terminate()
        # A clean stop ends the keeper and flushes NATS; on two cores shared with another
        # test's platform that has taken most of 30 s (seen twice in full runs).
        try:
            await asyncio.to_thread(machine.proc.wait, 90)
        except subprocess.TimeoutExpired:
            # Seen once in a full run: say what the runner was doing.
            log = (self.logs / f"runner-{node_id}.log").read_text(errors="replace")
            raise NotSettled(f"runner {node_id} still running 90 s after SIGTERM; the end of "
                             f"its log:\n{log[-4000:]}") from None

        async def key_gone() -> bool:
            return await self._presence_revision(node_id) is None

        await self._until(key_gone, 30, f"runner {node_id} key deleted")

    async def restart_machine(self, node_id: str) -> None:
        """kill -9 and start again at once: the key stays until the new process puts one."""
        machine = self.machines[node_id]
        machine.proc.send_signal(signal.SIGKILL)
        await asyncio.to_thread(machine.proc.wait)
        await self.start_machine(node_id)

    async def presence(self, node_id: str) -> dict | None:
        try:
            entry = await self.kv.get(subjects.presence_key(node_id))
        except (KeyNotFoundError, KeyDeletedError, NotFoundError):
            return None
        return json.loads(entry.value) if entry.value else None

    async def _presence_revision(self, node_id: str) -> int | None:
        try:
            entry = await self.kv.get(subjects.presence_key(node_id))
        except (KeyNotFoundError, KeyDeletedError, NotFoundError):
            return None
        return entry.revision

    def close(self) -> None:
        for proc in [*self.services.values(), *(p for c in self.copies.values() for p in c)]:
            if proc.poll() is None:
                proc.send_signal(signal.SIGCONT)  # a paused one must be able to stop
        stop_processes([m.proc for m in self.machines.values() if m.proc]
                       + list(self.services.values())
                       + [p for c in self.copies.values() for p in c])

    async def disconnect(self) -> None:
        await self.watch.stop()
        if self.nc is not None and not self.nc.is_closed:
            await self.nc.close()

    # -- requests and notices ---------------------------------------------------------

    async def request(self, subject: str, body: dict, timeout: float = 30.0) -> dict:
        msg = await self.nc.request(subject, json.dumps(body).encode(), timeout=timeout)
        return json.loads(msg.data)

    async def publish_ingest(self, entry: dict) -> None:
        await self.js.publish(subjects.INGEST_TIMELINE, json.dumps(entry).encode(),
                              headers={"Nats-Msg-Id": entry["entry_id"]})

    async def runner_event(self, node_id: str, event: dict) -> None:
        """What a runner publishes about its conversations (CONTRACT.md 6)."""
        await self.nc.publish(subjects.runner_subject(node_id, "events"),
                              json.dumps(event).encode())
        await self.nc.flush()

    async def follow_notices(self, instance_id: str) -> None:
        received = self.seen.notices.setdefault(instance_id, [])

        async def on_notice(msg) -> None:
            received.append(json.loads(msg.data))

        self._notice_subs[instance_id] = await self.nc.subscribe(
            subjects.notify_subject(instance_id), cb=on_notice)
        await self.nc.flush()

    async def unfollow_notices(self, instance_id: str) -> None:
        sub = self._notice_subs.pop(instance_id, None)
        if sub is not None:
            await sub.unsubscribe()

    # -- what the streams hold ----------------------------------------------------------

    async def pull(self) -> None:
        """Read every stream message not read yet, in sequence order."""
        lists = {subjects.TIMELINE_STREAM: self.seen.timeline,
                 subjects.SESSIONS_STREAM: self.seen.events,
                 subjects.REJECTED_STREAM: self.seen.rejected}
        for stream, into in lists.items():
            last = (await self.js.stream_info(stream)).state.last_seq
            for seq in range(self._cursor[stream] + 1, last + 1):
                msg = await self.js.get_msg(stream, seq)
                body = json.loads(msg.data)
                if stream == subjects.TIMELINE_STREAM:
                    # Content is sealed at rest with its instance's key (1.2): read it opened.
                    body["content"] = await self._sealer().open(
                        body.get("instance_id"), body.get("content", ""))
                elif stream == subjects.SESSIONS_STREAM:
                    body = await with_plan_opened(body, self._sealer())
                body["_seq"], body["_subject"] = seq, msg.subject
                into.append(body)
                self._cursor[stream] = seq

    def _sealer(self):
        if getattr(self, "_opener", None) is None:
            from seedline_platform.sealing import KvKeyStore, Sealer

            self._opener = Sealer(KvKeyStore(self.js, 1))
        return self._opener

    async def idle(self) -> bool:
        """Every durable consumer (ingest's too) with nothing pending or unacknowledged."""
        for stream in STREAMS[:3]:
            for info in await self.js.consumers_info(stream):
                if not info.config.durable_name:
                    continue  # a catch-up read, not a service's consumer
                if info.num_pending or info.num_ack_pending:
                    return False
        return True

    async def _until(self, probe: Callable[[], Awaitable[Any]], timeout: float, what: str):
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while True:
            value = await probe()
            if value:
                return value
            if loop.time() > deadline:
                raise NotSettled(f"not in {timeout:.0f} s: {what}")
            await asyncio.sleep(0.02)


class HostingWatch:
    """What every machine says it hosts (its presence `live`), sampled all the time.

    Keeps each sample that names more than one conversation, so that a caller who knows
    which repo each conversation is of can tell whether any moment had one repo hosted
    twice (CONTRACT.md 4, 1.2), not only whether the settled state is right.
    """

    def __init__(self, every: float = 0.05) -> None:
        self.every = every
        self.samples = 0
        self.crowded: list[frozenset[str]] = []
        self._task: asyncio.Task | None = None

    def start(self, platform: "Platform") -> None:
        self._task = asyncio.get_running_loop().create_task(self._sample(platform))

    async def _sample(self, platform: "Platform") -> None:
        while True:
            hosted: set[str] = set()
            for node_id in list(platform.machines):
                try:
                    presence = await platform.presence(node_id)
                except Exception:
                    presence = None
                hosted |= set((presence or {}).get("live") or [])
            self.samples += 1
            if len(hosted) > 1 and (not self.crowded or self.crowded[-1] != hosted):
                self.crowded.append(frozenset(hosted))
            await asyncio.sleep(self.every)

    def take(self) -> list[frozenset[str]]:
        taken, self.crowded = self.crowded, []
        return taken

    async def stop(self) -> None:
        if self._task is not None:
            await cancel_and_wait(self._task)
            self._task = None
