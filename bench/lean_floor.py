"""The lean floor: the durable work of one wake and one open, done with nats-py and psycopg
alone, so Seedline's CPU per operation can be set against what the same work costs at least.

Same stack and shape as bench.durable_work measures Seedline on: nats-server with
`sync_interval: always` and Postgres (seedline_devtools.embedded), the platform's stream
configurations, and five processes of its own (this module run as `--worker ROLE`) playing
the four services and the runner. Each process does its part of an operation as the table
below says, and nothing else: the messages it appends per stream, the durable pull consumers
it takes them from (one ack per delivery, or per batch where Seedline's does), the Postgres
statements and transactions it runs (simple tables, one key each), and the launch as a
request the runner answers. No FastStream,
no project code on the way of a message: only the contract's stream configurations at set-up.

Counted and timed as durable_work counts Seedline (its Counter and windows): a storm of wakes
published at once, then opens one at a time.

    python -m bench.lean_floor [--storm 100] [--opens 10]

Writes bench/results/lean_floor.json and .md and prints the markdown table.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from contextlib import AsyncExitStack
from dataclasses import dataclass
from pathlib import Path

NAME = "lean_floor"
INGEST, TIMELINE, SESSIONS = "SEEDLINE_INGEST", "SEEDLINE_TIMELINE", "SEEDLINE_SESSIONS"
ROLES = ("timeline-writer", "continuity-resolver", "seed-composer", "runner-gateway", "runner")

# -- the work, from Seedline's own counts ----------------------------------------------------
#
# Every figure below is what `python -m bench.durable_work --storm 50 --opens 5` counted for
# Seedline at commit b8b8fff (this machine): per storm wake, and per open one at a time.
# When Seedline's counts shrink, change them here; the floor and its test follow.
#
# The messages of one operation in order: (name, stream, appended while handling which
# delivery). "driver" is the bench itself, "open" the open request the resolver answers,
# "launch" the runner as it answers its launch and "launched" the gateway once it has.
# Seedline: per wake 2 ingest entries (the person's message, the engine's reply), 2 timeline
# entries, 5 session events; per open 2, 2 and 4 (durable_work: events, ingest_entries,
# timeline_entries).
MESSAGES = {
    "wake": (
        ("message", INGEST, "driver"),
        ("entry", TIMELINE, "timeline-writer message"),
        ("wake_requested", SESSIONS, "runner-gateway-timeline entry"),
        ("open_requested", SESSIONS, "continuity-resolver-wakes wake_requested"),
        ("continuity_decided", SESSIONS, "continuity-resolver-wakes wake_requested"),
        ("seed_composed", SESSIONS, "seed-composer continuity_decided"),
        ("opened", SESSIONS, "launched"),
        ("reply", INGEST, "launch"),
        ("reply_entry", TIMELINE, "timeline-writer reply"),
    ),
    "open": (
        ("instruction", INGEST, "open"),
        ("open_requested", SESSIONS, "open"),
        ("continuity_decided", SESSIONS, "open"),
        ("instruction_entry", TIMELINE, "timeline-writer instruction"),
        ("seed_composed", SESSIONS, "seed-composer continuity_decided"),
        ("opened", SESSIONS, "launched"),
        ("reply", INGEST, "launch"),
        ("reply_entry", TIMELINE, "timeline-writer reply"),
    ),
}
# The delivery on which the gateway asks the runner to launch (request/reply).
LAUNCH_ON = "runner-gateway-launch seed_composed"

# Durable pull consumers: name -> (role, stream, the messages it takes; None: all of the
# stream). Seedline's deliveries per storm wake (durable_work: deliveries_by_consumer):
# resolver-sessions 3, gateway-sessions 3, writer 2, resolver-timeline 2, resolver-wakes 1,
# composer 1, gateway-launch 1, gateway-timeline 1: 14; per open the same without
# resolver-wakes and with 2 lifecycle events: 11. The two lifecycle folds take only the
# events that move a lifecycle (seedline_platform.lifecycle_events.LIFECYCLE_EVENTS; of an
# operation's, these three), the writer learns a launch from the machine's first output, and
# the gateway's timeline follower takes a person's messages alone (at commit 240ec6e).
LIFECYCLE = ("wake_requested", "open_requested", "opened")
CONSUMERS = {
    "timeline-writer": ("timeline-writer", INGEST, None),
    "continuity-resolver-wakes": ("continuity-resolver", SESSIONS, ("wake_requested",)),
    "continuity-resolver-timeline": ("continuity-resolver", TIMELINE, None),
    "continuity-resolver-sessions": ("continuity-resolver", SESSIONS, LIFECYCLE),
    "seed-composer": ("seed-composer", SESSIONS, ("continuity_decided",)),
    "runner-gateway-launch": ("runner-gateway", SESSIONS, ("seed_composed",)),
    "runner-gateway-timeline": ("runner-gateway", TIMELINE, ("entry", "instruction_entry")),
    "runner-gateway-sessions": ("runner-gateway", SESSIONS, LIFECYCLE),
}
# The projections that skip what they applied settle a fetched batch with one ack
# (AckPolicy.ALL), as Seedline's do; the others ack each delivery.
ACK_ALL = ("continuity-resolver-timeline", "continuity-resolver-sessions",
           "runner-gateway-sessions")


@dataclass(frozen=True)
class Statements:
    """A role's Postgres work for one operation, run while handling one delivery (`at`).
    Counted as durable_work counts: BEGIN and COMMIT are statements, and a transaction is
    an explicit BEGIN ... COMMIT or a statement outside one."""

    at: str
    statements: int
    transactions: int
    explicit: int  # of the transactions, BEGIN ... COMMIT
    writes: int  # of the statements, INSERT/UPDATE/COPY (upserts here); the rest are reads

    @property
    def inside(self) -> int:
        """Statements inside the explicit transactions, BEGIN and COMMIT aside."""
        return self.statements - self.transactions - self.explicit


# Per role and operation (durable_work: statements_by_service, transactions_by_service,
# BEGINs and writes from transactions_by_shape), rounded to whole statements, at commit
# 5c00130. Per storm wake: writer 1.9 statements in 1.9 transactions (no BEGIN: the append
# is one statement with its offset; the message's dedupe read; its launches are written a
# burst at a time), resolver 5.4 in 5.4 (no BEGIN: the folds write what they folded in a
# statement that checks the offset's row, most often from the rows their last write left,
# with no read; the wake's claim with its repo's read, the message with its conversation),
# gateway 8.2 in 4.2 (1 BEGIN: the launch's repo turn, which its reads ride in; the
# message's read of its repo; the fold's write as the resolver's). Per open: writer 4 in 4
# (no BEGIN), resolver 7 in 7 (no BEGIN), gateway 8 in 4 (1 BEGIN; at commit 240ec6e, one
# write fewer: the engine's reply is no longer the gateway's to note). The seed-composer and
# the runner run none.
STATEMENTS = {
    "wake": {
        "timeline-writer": Statements("timeline-writer message", 2, 2, 0, 1),
        "continuity-resolver": Statements("continuity-resolver-wakes wake_requested",
                                          5, 5, 0, 4),
        "runner-gateway": Statements(LAUNCH_ON, 8, 4, 1, 2),
    },
    "open": {
        "timeline-writer": Statements("timeline-writer instruction", 4, 4, 0, 2),
        "continuity-resolver": Statements("open", 7, 7, 0, 5),
        "runner-gateway": Statements(LAUNCH_ON, 8, 4, 1, 3),
    },
}


def appended(op: str) -> dict[str, int]:
    """Messages appended per stream by one operation."""
    out: dict[str, int] = {}
    for _, stream, _ in MESSAGES[op]:
        out[stream] = out.get(stream, 0) + 1
    return out


def deliveries(op: str) -> dict[str, int]:
    """Deliveries per durable consumer for one operation."""
    out = {}
    for name, (_, stream, takes) in CONSUMERS.items():
        n = sum(1 for message, s, _ in MESSAGES[op]
                if s == stream and (takes is None or message in takes))
        if n:
            out[name] = n
    return out


# -- the workers -------------------------------------------------------------------------------

PREFIX = {INGEST: "seedline.ingest.floor", TIMELINE: "seedline.timeline.floor",
          SESSIONS: "seedline.session.floor"}
OPEN_SUBJECT = "seedline.floor.open"
LAUNCH_SUBJECT = "seedline.floor.launch"
OPENED = f"{PREFIX[SESSIONS]}.opened"
CONTENT = "Good morning. Where were we?"
FETCH_BATCH = 100
TIMEOUT = 30.0


def subject(name: str, stream: str) -> str:
    return f"{PREFIX[stream]}.{name}"


def table(role: str) -> str:
    return "floor_" + role.replace("-", "_")


class Worker:
    """One role's process: its consumers, its statements, its appends."""

    def __init__(self, role: str, nats_url: str, database_url: str) -> None:
        self.role, self.nats_url, self.database_url = role, nats_url, database_url
        self.db_lock = asyncio.Lock()  # one connection: one unit of work at a time
        self.waiting: dict[str, asyncio.Future] = {}  # open id -> its `opened`

    async def run(self) -> None:
        import nats
        import psycopg

        # An inbox of its own, as each service has: the Counter tells its requests from the
        # bench's own by it.
        self.nc = await nats.connect(self.nats_url, name=f"floor-{self.role}",
                                     inbox_prefix=f"_INBOX_floor-{self.role}")
        self.js = self.nc.jetstream()
        self.db = await psycopg.AsyncConnection.connect(
            self.database_url, autocommit=True, application_name=self.role)
        tasks = [asyncio.create_task(self.consume(name))
                 for name, (role, _, _) in CONSUMERS.items() if role == self.role]
        if self.role == "runner":
            await self.nc.subscribe(LAUNCH_SUBJECT, cb=self.launch)
        if self.role == "continuity-resolver":
            await self.nc.subscribe(OPEN_SUBJECT, cb=self.open)
            await self.nc.subscribe(OPENED, cb=self.opened)
        await self.nc.flush()
        print("ready", flush=True)
        await asyncio.gather(*tasks, asyncio.Event().wait())

    async def consume(self, durable: str) -> None:
        import nats.errors

        stream = CONSUMERS[durable][1]
        sub = await self.js.pull_subscribe_bind(durable, stream)
        while True:
            try:
                batch = await sub.fetch(FETCH_BATCH, timeout=5.0)
            except nats.errors.TimeoutError:
                continue
            for msg in batch:
                body = json.loads(msg.data)
                await self.handle(f"{durable} {msg.subject.rsplit('.', 1)[1]}", body)
                if durable not in ACK_ALL:
                    await msg.ack()
            if durable in ACK_ALL:
                await batch[-1].ack()

    async def handle(self, delivery: str, body: dict) -> None:
        """What the table says this delivery does: statements, appends, the launch."""
        op = body["op"]
        await self.statements(op, delivery, body["id"])
        await self.append(op, delivery, body)
        if delivery == LAUNCH_ON:
            reply = await self.nc.request(LAUNCH_SUBJECT, json.dumps(body).encode(),
                                          timeout=TIMEOUT)
            assert json.loads(reply.data)["accepted"]
            await self.append(op, "launched", body)

    async def append(self, op: str, on: str, body: dict) -> None:
        for name, stream, after in MESSAGES[op]:
            if after == on:
                await self.js.publish(
                    subject(name, stream), json.dumps(dict(body, name=name)).encode(),
                    headers={"Nats-Msg-Id": f"{body['id']}-{name}"})

    async def statements(self, op: str, on: str, key: str) -> None:
        work = STATEMENTS[op].get(self.role)
        if work is None or work.at != on:
            return
        name = table(self.role)
        write = (f"INSERT INTO {name} (k, n, body) VALUES (%s, %s, %s) ON CONFLICT (k)"
                 " DO UPDATE SET n = EXCLUDED.n, body = EXCLUDED.body")
        read = f"SELECT n, body FROM {name} WHERE k = %s"

        async def one(i: int) -> None:
            if i < work.writes:
                await self.db.execute(write, (f"{key}:{i}", i, CONTENT))
            else:
                await self.db.execute(read, (f"{key}:0",))

        async with self.db_lock:
            for t in range(work.explicit):
                async with self.db.transaction():
                    for i in range(t, work.inside, work.explicit):  # spread over them
                        await one(i)
            for i in range(work.inside, work.inside + work.transactions - work.explicit):
                await one(i)

    async def open(self, msg) -> None:
        body = json.loads(msg.data)
        self.waiting[body["id"]] = asyncio.get_running_loop().create_future()
        await self.statements("open", "open", body["id"])
        await self.append("open", "open", body)
        await asyncio.wait_for(self.waiting[body["id"]], TIMEOUT)
        del self.waiting[body["id"]]
        await msg.respond(json.dumps({"ok": True, "id": body["id"]}).encode())

    async def opened(self, msg) -> None:
        future = self.waiting.get(json.loads(msg.data)["id"])
        if future is not None and not future.done():
            future.set_result(None)

    async def launch(self, msg) -> None:
        body = json.loads(msg.data)
        await msg.respond(b'{"accepted": true}')
        await self.append(body["op"], "launch", body)


# -- the driver --------------------------------------------------------------------------------

async def start_floor(tmp: Path, stack: AsyncExitStack) -> dict:
    """nats-server and Postgres as durable_work's Seedline has them, the platform's streams,
    the consumers and tables of the table above, and one process per role; the same shape
    of dict as bench.open_latency.start_system, so durable_work's Counter reads it."""
    import nats
    import psycopg
    from nats.js import api

    from seedline_contracts.streams import ALL_STREAMS
    from seedline_devtools.embedded import start_nats, start_postgres
    from seedline_devtools.processes import stop_processes
    from seedline_platform.natsio import stream_config

    nats_proc = await asyncio.to_thread(start_nats, tmp / "nats")  # sync_interval: always
    stack.callback(nats_proc.stop)
    pg = await asyncio.to_thread(start_postgres, tmp / "pg")
    stack.callback(pg.stop)
    database_url = await asyncio.to_thread(pg.ensure_database, "seedline_bench")
    with psycopg.connect(database_url, autocommit=True) as conn:
        for role in ROLES:
            conn.execute(f"CREATE TABLE IF NOT EXISTS {table(role)}"
                         " (k text PRIMARY KEY, n bigint NOT NULL, body text NOT NULL)")
    nc = await nats.connect(nats_proc.url, name="bench")
    stack.push_async_callback(nc.close)
    js = nc.jetstream()
    for spec in ALL_STREAMS:
        await js.add_stream(stream_config(spec))
    for durable, (_, stream, takes) in CONSUMERS.items():
        await js.add_consumer(stream, api.ConsumerConfig(
            durable_name=durable,
            ack_policy=api.AckPolicy.ALL if durable in ACK_ALL else api.AckPolicy.EXPLICIT,
            deliver_policy=api.DeliverPolicy.ALL, max_ack_pending=1_000,
            filter_subjects=[subject(name, stream) for name in takes] if takes else None))
    logs = tmp / "logs"
    logs.mkdir()
    procs = {}
    for role in ROLES:
        procs[role] = subprocess.Popen(
            [sys.executable, "-m", "bench.lean_floor", "--worker", role, "--nats",
             nats_proc.url, "--database", database_url],
            cwd=Path(__file__).resolve().parents[1], stdout=subprocess.PIPE,
            stderr=open(logs / f"{role}.log", "ab"), text=True)
    stack.callback(stop_processes, list(procs.values()))
    for role, proc in procs.items():
        line = await asyncio.to_thread(proc.stdout.readline)
        if line != "ready\n":
            raise RuntimeError(f"the floor's {role} did not start; see {logs}/{role}.log")
    return {"nc": nc, "nats": nats_proc, "postgres": pg,
            "pids": {role: proc.pid for role, proc in procs.items()}}


class Done:
    """Each operation whose `opened` event the driver has seen."""

    def __init__(self) -> None:
        self.ids: set[str] = set()

    async def on_opened(self, msg) -> None:
        self.ids.add(json.loads(msg.data)["id"])

    async def until(self, ids: set[str], timeout: float = 300.0) -> None:
        deadline = time.monotonic() + timeout
        while not ids <= self.ids:
            if time.monotonic() > deadline:
                raise RuntimeError(f"{len(ids - self.ids)} operations never opened")
            await asyncio.sleep(0.02)


async def storm(js, done: Done, n: int) -> int:
    """`n` wakes published at once; returns when every one has opened."""
    ids = [f"wake-{uuid.uuid4().hex}" for _ in range(n)]
    acks = [await js.publish_async(subject("message", INGEST), json.dumps(
        {"op": "wake", "id": i, "name": "message", "content": CONTENT}).encode(),
        headers={"Nats-Msg-Id": f"{i}-message"}) for i in ids]
    await asyncio.gather(*acks)
    await done.until(set(ids))
    return n


async def opens(nc, n: int, latencies: list[float]) -> int:
    """`n` opens one at a time, each answered before the next."""
    for _ in range(n):
        began = time.perf_counter()
        reply = await nc.request(OPEN_SUBJECT, json.dumps(
            {"op": "open", "id": f"open-{uuid.uuid4().hex}", "content": CONTENT}).encode(),
            timeout=TIMEOUT)
        latencies.append((time.perf_counter() - began) * 1000)
        assert json.loads(reply.data)["ok"]
    return n


WARMUP = 5  # wakes and opens before the windows: connections, caches, prepared statements


async def run(storm_wakes: int, open_count: int) -> dict:
    from bench import durable_work, report

    with tempfile.TemporaryDirectory(prefix="seedline-floor-") as folder:
        tmp = Path(folder)
        async with AsyncExitStack() as stack:
            system = await start_floor(tmp, stack)
            nc = system["nc"]
            js = nc.jetstream(publish_async_max_pending=1_000)
            done = Done()
            await nc.subscribe(OPENED, cb=done.on_opened)
            counter = durable_work.Counter(system)
            await counter.start()
            await storm(js, done, WARMUP)
            await opens(nc, WARMUP, [])
            windows = {"wake, in a storm": await durable_work._window(
                counter, tmp, "storm", lambda: storm(js, done, storm_wakes))}
            latencies: list[float] = []
            windows["open, one at a time"] = await durable_work._window(
                counter, tmp, "open", lambda: opens(nc, open_count, latencies))
    per = {kind: durable_work.per_operation(c) for kind, c in windows.items()}
    storm_window = windows["wake, in a storm"]
    return {
        "conditions": {"storm": storm_wakes, "opens": open_count, "roles": list(ROLES),
                       "sync_interval": "always", "machine": report.machine()},
        "work": {op: {"appended": appended(op), "deliveries": deliveries(op),
                      "statements": {r: vars(s) for r, s in STATEMENTS[op].items()}}
                 for op in MESSAGES},
        "per_operation": per,
        "cpu_ms_per_wake": per["wake, in a storm"]["cpu_ms_total"],
        "cpu_ms_per_open": per["open, one at a time"]["cpu_ms_total"],
        "storm_wakes_per_s": round(storm_window["operations"] / storm_window["seconds"], 1),
        "open_p50_ms": round(statistics.median(latencies), 2),
        "windows": windows,
    }


def markdown(result: dict) -> str:
    from bench import durable_work

    lines = ["| operation | " + " | ".join(
        c.replace("_", " ") for c in durable_work.COLUMNS if c != "fsyncs") + " |",
        "|---|" + "---|" * (len(durable_work.COLUMNS) - 1)]
    for kind, per in result["per_operation"].items():
        lines.append(f"| {kind} (floor) | " + " | ".join(
            f"{per[c]:g}" for c in durable_work.COLUMNS if c != "fsyncs") + " |")
    lines += ["", f"Storm: {result['storm_wakes_per_s']:g} wakes/s; open p50 "
                  f"{result['open_p50_ms']:g} ms; CPU ms per wake by process: " + ", ".join(
                      f"{p} {v:g}" for p, v in
                      result["per_operation"]["wake, in a storm"]["cpu_ms"].items())]
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--storm", type=int, default=100)
    parser.add_argument("--opens", type=int, default=10)
    parser.add_argument("--worker", choices=ROLES, help=argparse.SUPPRESS)
    parser.add_argument("--nats", help=argparse.SUPPRESS)
    parser.add_argument("--database", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        asyncio.run(Worker(args.worker, args.nats, args.database).run())
        return
    from bench import report

    result = asyncio.run(run(args.storm, args.opens))
    text = markdown(result)
    report.write(NAME, result, text)
    print(text)


if __name__ == "__main__":
    main()
