"""Durable work per operation: what one open and one wake cost, counted.

Time depends on the machine; these counts do not, so they are the targets. For each kind
of operation, on the four services and one scripted runner as their own processes (real
servers, `sync_interval: always`; bench.open_latency.start_system), counted over a window
that holds only that work and ends when every consumer has caught up:

- events appended to SEEDLINE_SESSIONS, entries to SEEDLINE_INGEST and SEEDLINE_TIMELINE,
  notices;
- deliveries to durable consumers (the sum over every consumer of every stream of its
  delivered sequence, redeliveries included) and acknowledgements (every message a client
  sent to `$JS.ACK.>`, seen by a subscription of the bench's own);
- JetStream API requests of the services and runners (seen by a subscription of the
  bench's own): pull requests, and the rest by kind (stream and consumer info, message
  gets, KV reads), each a request, a reply and an advisory the server writes;
- nats-server's fsync and fdatasync calls (strace -f on its process);
- Postgres statements (the server's own log with `log_statement = all`: every statement and
  every execute of a prepared one) and transactions (pg_stat_database commits and rollbacks,
  the bench's own reads taken out);
- CPU milliseconds per process.

Operations: wakes one at a time (a person's message to a stopped conversation; each waited
for before the next), opens one at a time (an instruction, on a stopped repo), and a storm
of wakes published at once. Idle: the same counts per second with nothing sent, ten
runner machines keeping their presence.

Then, back to back on the same machine, the lean floor (bench.lean_floor): the same durable
work per storm wake and per open done with nats-py and psycopg alone, so Seedline's CPU per
wake has a baseline of the same run (target: at most FLOOR_RATIO_MAX times the floor's).

    python -m bench.durable_work [--wakes 10] [--opens 10] [--storm 100] [--idle 30]
                                 [--runners 10] [--no-floor]

Writes bench/results/durable_work.json and .md and prints the markdown table.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import contextlib
import json
import re
import signal
import statistics
import subprocess
import tempfile
import time
import uuid
from contextlib import AsyncExitStack
from dataclasses import dataclass, field
from pathlib import Path

from bench import cpu_accounting, report
from bench.open_latency import ENGINE, NODE, SERVICES, request_json, start_system, stop_live

NAME = "durable_work"
INSTANCE = "durable01"
MESSAGE = "Good morning. Where were we?"
SETTLE_SECONDS = 0.5  # nothing new anywhere for this long: the window's work is done
# nats-server writes some consumer state a moment later: fsyncs are counted from this long
# before a window to this long after it (at idle it syncs about once in 5 s).
FLUSH_SECONDS = 3.0
IDLE_AFTER_SECONDS = 10.0  # idle is measured this long after the last work
STREAMS = ("SEEDLINE_INGEST", "SEEDLINE_TIMELINE", "SEEDLINE_SESSIONS", "SEEDLINE_NOTICES")
# The targets, per storm wake and per one-at-a-time wake.
TARGETS = {"storm_statements": 20, "storm_transactions": 8, "storm_deliveries": 10,
           "single_fsyncs": 15, "idle_cpu_ms_per_s": 10.0}
FLOOR_RATIO_MAX = 1.3  # Seedline's CPU per storm wake against the lean floor's
_STATEMENT = re.compile(r"LOG:  (statement|execute [^:]*): ")


def _short(sql: str) -> str:
    """A statement's text to count it by: its start and, when long, its WHERE clause (the
    columns a SELECT reads are alike; what it reads by tells the statements apart)."""
    if len(sql) <= STATEMENT_CHARS:
        return sql
    where = sql.find(" WHERE ")
    if where < 0:
        return sql[:STATEMENT_CHARS]
    return f"{sql[:STATEMENT_CHARS // 2]} …{sql[where:where + STATEMENT_CHARS]}"
_LITERAL = re.compile(r"'[^']*'|\b\d+\b")
STATEMENT_CHARS = 120


@dataclass
class Counts:
    """Totals at one moment; a window is the difference of two."""

    streams: dict[str, int] = field(default_factory=dict)
    delivered: dict[str, int] = field(default_factory=dict)  # per consumer
    acks: int = 0
    # JetStream API requests of the services and runners: pull requests apart from the rest
    # (stream and consumer info, message gets, KV reads), by kind.
    pulls: int = 0
    api: dict[str, int] = field(default_factory=dict)
    statements: int = 0
    transactions: int = 0
    cpu: dict[str, float] = field(default_factory=dict)
    # Statements per service and per statement (its text, literals aside), where the
    # statements go.
    by_service: dict[str, int] = field(default_factory=dict)
    by_statement: dict[str, int] = field(default_factory=dict)
    transactions_by_service: dict[str, int] = field(default_factory=dict)
    by_shape: dict[str, int] = field(default_factory=dict)

    def minus(self, before: "Counts") -> dict:
        return {
            "events": self.streams["SEEDLINE_SESSIONS"] - before.streams["SEEDLINE_SESSIONS"],
            "ingest_entries": self.streams["SEEDLINE_INGEST"] - before.streams["SEEDLINE_INGEST"],
            "timeline_entries": (self.streams["SEEDLINE_TIMELINE"]
                                 - before.streams["SEEDLINE_TIMELINE"]),
            "notices": self.streams["SEEDLINE_NOTICES"] - before.streams["SEEDLINE_NOTICES"],
            "deliveries": sum(self.delivered.values()) - sum(before.delivered.values()),
            "deliveries_by_consumer": {
                name: n - before.delivered.get(name, 0) for name, n in self.delivered.items()
                if n - before.delivered.get(name, 0)},
            "acks": self.acks - before.acks,
            "pull_requests": self.pulls - before.pulls,
            "api_requests": sum(self.api.values()) - sum(before.api.values()),
            "api_requests_by_kind": _difference(self.api, before.api),
            "statements": self.statements - before.statements,
            "transactions": self.transactions - before.transactions,
            "cpu_ms": {p: (self.cpu[p] - before.cpu[p]) * 1000 for p in self.cpu},
            "statements_by_service": _difference(self.by_service, before.by_service),
            "statements_by_text": _difference(self.by_statement, before.by_statement),
            "transactions_by_service": _difference(self.transactions_by_service,
                                                   before.transactions_by_service),
            "transactions_by_shape": _difference(self.by_shape, before.by_shape),
        }


def _difference(after: dict[str, int], before: dict[str, int]) -> dict[str, int]:
    """What was added to each count, largest first."""
    added = {k: n - before.get(k, 0) for k, n in after.items() if n - before.get(k, 0)}
    return dict(sorted(added.items(), key=lambda kv: -kv[1]))


class Counter:
    """Reads every count of a running system (module docstring)."""

    def __init__(self, system: dict) -> None:
        self.system = system
        self.nc = system["nc"]
        self.js = self.nc.jetstream()
        self.acks = 0
        self.pulls = 0
        self.api: dict[str, int] = {}
        self.log = Path(system["postgres"].data_dir) / "log"
        self._offset = 0
        self._statements = self._transactions = 0
        # Backends inside an explicit transaction, with what each ran in it so far.
        self._open: dict[str, list[str]] = {}
        self._by_service: dict[str, int] = {}
        self._by_statement: dict[str, int] = {}
        self._transactions_by_service: dict[str, int] = {}
        self._by_shape: dict[str, int] = {}

    async def start(self) -> None:
        async def ack(_msg) -> None:
            self.acks += 1
        await self.nc.subscribe("$JS.ACK.>", cb=ack)
        # The bench's own reads are not counted (the services' inboxes are _INBOX_<name>).
        own_inbox = self.nc._inbox_prefix.decode() + "."

        async def api(msg) -> None:
            if (msg.reply or "").startswith(own_inbox):
                return
            if msg.subject.startswith("$JS.API.CONSUMER.MSG.NEXT."):
                self.pulls += 1
                return
            kind = ".".join(msg.subject.split(".")[2:5 if ".MSG." in msg.subject else 4])
            self.api[kind] = self.api.get(kind, 0) + 1
        await self.nc.subscribe("$JS.API.>", cb=api)
        await self.nc.flush()
        pg = self.system["postgres"]
        for sql in ("ALTER SYSTEM SET log_statement = 'all'",
                    "ALTER SYSTEM SET log_line_prefix = '%m [%p] %d <%a> '",
                    "SELECT pg_reload_conf()"):
            await asyncio.to_thread(pg.admin_sql, sql)
        await asyncio.to_thread(self._read_log)  # what came before is not counted
        self._statements = self._transactions = 0
        self._by_service.clear()
        self._by_statement.clear()
        self._transactions_by_service.clear()
        self._by_shape.clear()

    async def now(self) -> Counts:
        streams: dict[str, int] = {}
        delivered: dict[str, int] = {}
        for stream in STREAMS:
            info = await self.js.stream_info(stream)
            streams[stream] = info.state.last_seq
            for consumer in await self.js.consumers_info(stream):
                delivered[consumer.name] = consumer.delivered.consumer_seq or 0
        statements, transactions = await asyncio.to_thread(self._read_log)
        return Counts(streams, delivered, self.acks, self.pulls, dict(self.api), statements,
                      transactions, self._cpu(),
                      dict(self._by_service), dict(self._by_statement),
                      dict(self._transactions_by_service), dict(self._by_shape))

    async def settled(self, timeout: float = 120.0) -> None:
        """Every consumer has caught up and nothing new came for SETTLE_SECONDS."""
        deadline = time.monotonic() + timeout
        last, quiet_since = None, time.monotonic()
        while time.monotonic() < deadline:
            seen = []
            for stream in STREAMS:
                info = await self.js.stream_info(stream)
                seen.append(info.state.last_seq)
                for consumer in await self.js.consumers_info(stream):
                    seen.append(consumer.delivered.stream_seq)
                    if consumer.num_pending or consumer.num_ack_pending:
                        quiet_since = time.monotonic()
            if seen != last:
                last, quiet_since = seen, time.monotonic()
            elif time.monotonic() - quiet_since >= SETTLE_SECONDS:
                return
            await asyncio.sleep(0.05)
        raise RuntimeError("the system did not settle")

    def _read_log(self) -> tuple[int, int]:
        """Statements and transactions of the services so far, from the server's log: a
        transaction is an explicit BEGIN ... COMMIT/ROLLBACK, or a statement outside one."""
        try:
            with self.log.open("rb") as log:
                log.seek(self._offset)
                chunk = log.read()
        except OSError:
            return self._statements, self._transactions
        complete = chunk.rfind(b"\n") + 1
        self._offset += complete
        lines = chunk[:complete].decode(errors="replace").splitlines()
        for n, line in enumerate(lines):
            match = _STATEMENT.search(line)
            if match is None or " seedline_bench " not in line:
                continue
            pid = line.split("[", 1)[1].split("]", 1)[0]
            sql = line[match.end():].strip().rstrip(";").upper()
            if not sql and n + 1 < len(lines):  # a statement that starts on its next line
                sql = lines[n + 1].strip().upper()
            self._statements += 1
            service = line.split("<", 1)[1].split(">", 1)[0]
            self._by_service[service] = self._by_service.get(service, 0) + 1
            text = _short(_LITERAL.sub("?", " ".join(sql.split())))
            self._by_statement[text] = self._by_statement.get(text, 0) + 1
            if sql in ("BEGIN", "START TRANSACTION") or sql.startswith("BEGIN "):
                self._open[pid] = []
            elif sql in ("COMMIT", "ROLLBACK", "END"):
                if pid in self._open:
                    self._transaction(service, self._open.pop(pid))
            elif pid in self._open:
                self._open[pid].append(text)
            else:
                self._transaction(service, [text], explicit=False)
        return self._statements, self._transactions

    def _transaction(self, service: str, statements: list[str], explicit: bool = True) -> None:
        self._transactions += 1
        self._transactions_by_service[service] = self._transactions_by_service.get(service, 0) + 1
        # Its shape: what ran in it, each statement cut to its first words; a statement
        # outside BEGIN ... COMMIT is shown without them.
        inside = " | ".join(t[:48] for t in statements) or "(nothing)"
        shape = f"{service}: " + (f"BEGIN | {inside} | COMMIT" if explicit else inside)
        self._by_shape[shape] = self._by_shape.get(shape, 0) + 1

    def _cpu(self) -> dict[str, float]:
        parts: dict[str, float] = {}
        for name, pid in self.system["pids"].items():
            part = "runners" if name.startswith("runner") and name != "runner-gateway" else name
            parts[part] = parts.get(part, 0.0) + cpu_accounting.tree_cpu_seconds(pid)
        parts["nats-server"] = cpu_accounting.tree_cpu_seconds(self.system["nats"].proc.pid)
        parts["postgres"] = cpu_accounting.tree_cpu_seconds(
            self.system["postgres"].postmaster_pid())
        return parts


# What nats-server syncs, by the file strace names (`-y`): the first that matches. A
# presence put is a KV append; an atomic batch is staged in a directory of its own.
SYNCED_FILES = (("presence", "/streams/KV_seedline_runners/"), ("consumer state", "/obs/"),
                ("atomic batch staging", "/batches/"), ("appends", "/msgs/"))
_SYNC_CALL = re.compile(r"\b(?:fsync|fdatasync)\(\d+<([^>]*)>")


def synced_file_kind(path: str) -> str:
    return next((kind for kind, part in SYNCED_FILES if part in path), "other")


class Fsyncs:
    """nats-server's fsync and fdatasync calls over a window, traced by strace, each with
    the file it syncs."""

    def __init__(self, pid: int, out: Path) -> None:
        self.pid = pid
        self.out = out
        self.proc: subprocess.Popen | None = None

    def __enter__(self) -> "Fsyncs":
        self.proc = subprocess.Popen(
            # seccomp-bpf: only the traced calls stop the server, so its CPU stays its own.
            ["strace", "-f", "--seccomp-bpf", "-y", "-e", "trace=fsync,fdatasync",
             "-o", str(self.out),
             "-p", str(self.pid)], stderr=subprocess.DEVNULL)
        time.sleep(0.5)  # attached to every thread before the window opens
        return self

    def __exit__(self, *_exc) -> None:
        assert self.proc is not None
        self.proc.send_signal(signal.SIGINT)
        self.proc.wait(30)

    def by_file(self) -> dict[str, int]:
        """How many calls synced each kind of file (SYNCED_FILES)."""
        kinds: collections.Counter[str] = collections.Counter()
        for line in self.out.read_text().splitlines():
            # A call another thread interrupts is written twice, begun and resumed: the
            # resumed half names no file.
            if found := _SYNC_CALL.search(line):
                kinds[synced_file_kind(found.group(1))] += 1
        return dict(kinds)


async def _window(counter: Counter, tmp: Path, label: str, work,
                  count_fsyncs: bool = False) -> dict:
    """The counts of `work` (a coroutine function), from a settled system to a settled one.
    With `count_fsyncs`, strace counts nats-server's syncs and its CPU is not its own."""
    await counter.settled()
    await asyncio.sleep(FLUSH_SECONDS)
    fsyncs = Fsyncs(counter.system["nats"].proc.pid, tmp / f"strace-{label}.txt")
    with fsyncs if count_fsyncs else contextlib.nullcontext():
        before = await counter.now()
        began = time.monotonic()
        operations = await work()
        await counter.settled()
        seconds = time.monotonic() - began - SETTLE_SECONDS
        after = await counter.now()
        if count_fsyncs:
            await asyncio.sleep(FLUSH_SECONDS)
    counts = after.minus(before)
    synced = fsyncs.by_file() if count_fsyncs else None
    counts["fsyncs"] = None if synced is None else sum(synced.values())
    counts["fsyncs_by_file"] = synced
    counts["operations"] = operations
    counts["seconds"] = round(seconds, 3)
    return counts


async def _open(nc, repo: str, instruction: str | None = None) -> dict:
    from seedline_contracts import subjects

    body = {"request_id": f"dw-{uuid.uuid4().hex}", "instance_id": INSTANCE, "repo": repo,
            "engine": ENGINE, "node_id": NODE}
    if instruction:
        body["instruction"] = instruction
    reply = await request_json(nc, subjects.API_SESSIONS_OPEN, body)
    if not reply.get("ok"):
        raise RuntimeError(f"opening {repo} failed: {reply}")
    return reply


async def _stopped_repos(nc, count: int, tag: str) -> dict[str, str]:
    """`count` repos opened once and stopped: repo -> its conversation."""

    out = {}
    for n in range(count):
        repo = f"bench/dw-{tag}-{n:03d}"
        reply = await _open(nc, repo)
        await stop_live(nc, reply["session_id"])
        out[repo] = reply["session_id"]
    return out


class Launched:
    """Each repo whose `opened` event this process has seen."""

    def __init__(self) -> None:
        self.repos: set[str] = set()

    async def on_event(self, msg) -> None:
        self.repos.add(json.loads(msg.data)["plan"]["repo"])

    async def until(self, repos: set[str], timeout: float = 300.0) -> None:
        deadline = time.monotonic() + timeout
        while not repos <= self.repos:
            if time.monotonic() > deadline:
                raise RuntimeError(f"{len(repos - self.repos)} wakes never launched")
            await asyncio.sleep(0.02)


def _message(repo: str, session_id: str) -> tuple[bytes, str]:
    from seedline_contracts.times import now_text

    entry_id = f"dw-{uuid.uuid4().hex}"
    return json.dumps({"entry_id": entry_id, "instance_id": INSTANCE, "repo": repo,
                       "session_id": session_id, "kind": "chat_user", "content": MESSAGE,
                       "at": now_text()}).encode(), entry_id


async def _wake(js, launched: Launched, stopped: dict[str, str], at_once: bool) -> int:
    from seedline_contracts import subjects

    subject = subjects.ingest_timeline_subject(INSTANCE)
    if at_once:
        acks = []
        for repo, session_id in stopped.items():
            body, entry_id = _message(repo, session_id)
            acks.append(await js.publish_async(subject, body, headers={"Nats-Msg-Id": entry_id}))
        await asyncio.gather(*acks)
        await launched.until(set(stopped))
    else:
        for repo, session_id in stopped.items():
            body, entry_id = _message(repo, session_id)
            await js.publish(subject, body, headers={"Nats-Msg-Id": entry_id})
            await launched.until({repo})
    return len(stopped)


async def _stop_all(nc, repos: dict[str, str]) -> None:
    from seedline_contracts import subjects

    listed = await request_json(nc, subjects.API_SESSIONS_LIST, {"instance_id": INSTANCE})
    for row in listed.get("conversations", []):
        await request_json(nc, subjects.API_SESSIONS_STOP,
                           {"session_id": row["session_id"], "reason": "idle"})


def per_operation(counts: dict) -> dict:
    n = max(counts["operations"], 1)
    out = {k: round(v / n, 2) for k, v in counts.items()
           if isinstance(v, (int, float)) and k not in ("operations", "seconds", "fsyncs",
                                                         "fsync_operations")}
    if counts.get("fsyncs") is not None:
        out["fsyncs"] = round(counts["fsyncs"] / counts["fsync_operations"], 2)
        out["fsyncs_by_file"] = {kind: round(v / counts["fsync_operations"], 2)
                                 for kind, v in sorted(counts["fsyncs_by_file"].items())}
    out["cpu_ms"] = {p: round(v / n, 2) for p, v in counts["cpu_ms"].items()}
    out["deliveries_by_consumer"] = {
        c: round(v / n, 2) for c, v in sorted(counts["deliveries_by_consumer"].items())}
    out["cpu_ms_total"] = round(sum(counts["cpu_ms"].values()) / n, 2)
    for key in ("statements_by_service", "statements_by_text", "transactions_by_service",
                "transactions_by_shape", "api_requests_by_kind"):
        out[key] = {k: round(v / n, 2) for k, v in counts[key].items()}
    return out


async def run(wakes: int, opens: int, storm: int, idle: float, runners: int,
              floor: bool = True) -> dict:
    from seedline_contracts import subjects

    with tempfile.TemporaryDirectory(prefix="seedline-dw-") as folder:
        tmp = Path(folder)
        async with AsyncExitStack() as stack:
            # NODE hosts every conversation; the others only keep presence, as idle
            # machines of a team do.
            nodes = (NODE, *(f"bench-idle-{n:02d}" for n in range(1, runners)))
            system = await start_system(tmp, stack, nodes=nodes)
            nc = system["nc"]
            counter = Counter(system)
            await counter.start()
            launched = Launched()
            await nc.subscribe(subjects.session_event_filter("opened"), cb=launched.on_event)
            js = nc.jetstream(publish_async_max_pending=1_000)
            single = await _stopped_repos(nc, wakes, "single")
            synced = await _stopped_repos(nc, wakes, "synced")
            storming = await _stopped_repos(nc, storm, "storm")
            to_open = await _stopped_repos(nc, opens, "open")
            await counter.settled()

            async def nothing() -> int:
                await asyncio.sleep(idle)
                return 1

            # Idle first: what a system that has done work and now waits costs.
            await asyncio.sleep(IDLE_AFTER_SECONDS)
            windows = {"idle": await _window(counter, tmp, "idle", nothing)}
            launched.repos.clear()
            windows["wake, one at a time"] = await _window(
                counter, tmp, "single", lambda: _wake(js, launched, single, at_once=False))
            await _stop_all(nc, single)

            latencies: list[float] = []

            async def open_each() -> int:
                for repo in to_open:
                    began = time.perf_counter()
                    await _open(nc, repo, instruction=MESSAGE)
                    latencies.append((time.perf_counter() - began) * 1000)
                return len(to_open)

            windows["open, one at a time"] = await _window(counter, tmp, "open", open_each)
            await _stop_all(nc, to_open)
            launched.repos.clear()
            windows["wake, in a storm"] = await _window(
                counter, tmp, "storm", lambda: _wake(js, launched, storming, at_once=True))
            await _stop_all(nc, storming)
            # Syncs apart: strace slows nats-server, so these windows count nothing else.
            launched.repos.clear()
            syncs = {"wake, one at a time": await _window(
                counter, tmp, "synced", lambda: _wake(js, launched, synced, at_once=False),
                count_fsyncs=True)}
            syncs["idle"] = await _window(counter, tmp, "idle-synced", nothing,
                                          count_fsyncs=True)
    for kind, counts in syncs.items():
        windows[kind]["fsyncs"] = counts["fsyncs"]
        windows[kind]["fsyncs_by_file"] = counts["fsyncs_by_file"]
        windows[kind]["fsync_operations"] = counts["operations"]
    idle_counts = windows.pop("idle")
    idle = idle_counts["seconds"]  # the whole window, nothing sent in it
    idle_fsyncs = idle_counts["fsyncs"] / idle_counts["fsync_operations"] / idle
    result = {
        "conditions": {"wakes": wakes, "opens": opens, "storm": storm, "idle_seconds": idle,
                       "runners": runners,
                       "engine": ENGINE, "services": list(SERVICES), "sync_interval": "always",
                       "machine": report.machine()},
        "targets": TARGETS,
        "idle_per_second": {
            k: round(v / idle, 2) for k, v in idle_counts.items()
            if isinstance(v, (int, float)) and k not in ("operations", "seconds", "fsyncs",
                                                         "fsync_operations")},
        "idle_cpu_ms_per_s": {p: round(v / idle, 2) for p, v in idle_counts["cpu_ms"].items()},
        "per_operation": {kind: per_operation(c) for kind, c in windows.items()},
        "windows": windows,
    }
    result["idle_cpu_ms_per_s_total"] = round(sum(result["idle_cpu_ms_per_s"].values()), 2)
    result["idle_per_second"]["fsyncs"] = round(idle_fsyncs, 2)
    result["idle_per_second"]["fsyncs_by_file"] = {
        kind: round(v / idle_counts["fsync_operations"] / idle, 2)
        for kind, v in sorted(idle_counts["fsyncs_by_file"].items())}
    stormed = windows["wake, in a storm"]
    result["storm_wakes_per_s"] = round(stormed["operations"] / stormed["seconds"], 1)
    result["open_p50_ms"] = round(statistics.median(latencies), 2)
    if floor:  # right after, on the same machine in the same state
        from bench import lean_floor

        result["floor"] = await lean_floor.run(storm, opens)
        result["floor_ratio_max"] = FLOOR_RATIO_MAX
    return result


COLUMNS = ("events", "ingest_entries", "timeline_entries", "deliveries", "acks",
           "pull_requests", "api_requests", "fsyncs", "statements", "transactions",
           "cpu_ms_total")


def markdown(result: dict) -> str:
    lines = ["| operation | " + " | ".join(c.replace("_", " ") for c in COLUMNS) + " |",
             "|---|" + "---|" * len(COLUMNS)]
    for kind, per in result["per_operation"].items():
        lines.append(f"| {kind} | " + " | ".join(
            f"{per[c]:g}" if c in per else "-" for c in COLUMNS) + " |")
    idle = result["idle_per_second"]
    lines.append("| idle, per second | " + " | ".join(
        f"{idle.get(c, result['idle_cpu_ms_per_s_total'] if c == 'cpu_ms_total' else 0):g}"
        for c in COLUMNS) + " |")
    by_process = ["", "CPU ms per operation by process:", "",
                  "| operation | " + " | ".join(result["idle_cpu_ms_per_s"]) + " |",
                  "|---|" + "---|" * len(result["idle_cpu_ms_per_s"])]
    for kind, per in result["per_operation"].items():
        by_process.append(f"| {kind} | " + " | ".join(
            f"{per['cpu_ms'][p]:.1f}" for p in result["idle_cpu_ms_per_s"]) + " |")
    by_process.append("| idle, per second | " + " | ".join(
        f"{v:.1f}" for v in result["idle_cpu_ms_per_s"].values()) + " |")
    synced = [f"{label}: " + ", ".join(f"{kind} {n:g}" for kind, n in by_file.items())
              for label, by_file in (
                  ("per wake one at a time",
                   result["per_operation"].get("wake, one at a time", {}).get("fsyncs_by_file")),
                  ("per second at idle", idle.get("fsyncs_by_file"))) if by_file]
    if synced:
        by_process += ["", "nats-server fsyncs by the file synced, " + "; ".join(synced) + "."]
    storm = result["per_operation"].get("wake, in a storm", {})
    where = ["", "Postgres statements per storm wake, by service and by statement (the 15 most):",
             "", "| statements | by |", "|---|---|"]
    where += [f"| {n:g} | {service} |" for service, n in storm.get(
        "statements_by_service", {}).items()]
    where += [f"| {n:g} | `{text}` |" for text, n in list(storm.get(
        "statements_by_text", {}).items())[:15]]
    if storm.get("api_requests_by_kind"):
        where += ["", "JetStream API requests per storm wake, pull requests aside: " + ", ".join(
            f"{kind} {n:g}" for kind, n in storm["api_requests_by_kind"].items()) + "."]
    return "\n".join(lines + by_process + where + _floor_lines(result)) + "\n"


def floor_ratio(result: dict) -> float:
    """Seedline's CPU per storm wake against the lean floor's of the same run."""
    return (result["per_operation"]["wake, in a storm"]["cpu_ms_total"]
            / result["floor"]["cpu_ms_per_wake"])


def _floor_lines(result: dict) -> list[str]:
    if "floor" not in result:
        return []
    from bench import lean_floor

    floor = result["floor"]
    return ["", "The lean floor (bench.lean_floor), run right after: the same durable work "
            "with nats-py and psycopg alone.", "",
            "| | CPU ms per storm wake | CPU ms per open | storm wakes/s | open p50 ms |",
            "|---|---|---|---|---|",
            f"| Seedline | {result['per_operation']['wake, in a storm']['cpu_ms_total']:g} | "
            f"{result['per_operation']['open, one at a time']['cpu_ms_total']:g} | "
            f"{result['storm_wakes_per_s']:g} | {result['open_p50_ms']:g} |",
            f"| floor | {floor['cpu_ms_per_wake']:g} | {floor['cpu_ms_per_open']:g} | "
            f"{floor['storm_wakes_per_s']:g} | {floor['open_p50_ms']:g} |",
            "", f"Seedline / floor, CPU per storm wake: {floor_ratio(result):.2f} (target <= "
            f"{result['floor_ratio_max']:g}).", "", lean_floor.markdown(floor).rstrip()]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--wakes", type=int, default=10)
    parser.add_argument("--opens", type=int, default=10)
    parser.add_argument("--storm", type=int, default=100)
    # CPU is read in 10 ms ticks per process: 30 s keeps the idle figure within 0.3 ms/s
    # per process of what it is.
    parser.add_argument("--idle", type=float, default=30.0)
    parser.add_argument("--runners", type=int, default=10,
                        help="runner machines; one hosts the conversations, all keep presence")
    parser.add_argument("--no-floor", action="store_true", help="leave out the lean floor")
    args = parser.parse_args()
    result = asyncio.run(run(args.wakes, args.opens, args.storm, args.idle, args.runners,
                             floor=not args.no_floor))
    text = markdown(result)
    report.write(NAME, result, text)
    print(text)


if __name__ == "__main__":
    main()
