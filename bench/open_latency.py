"""Open latency against repo size: does opening get slower as a repo's timeline grows?

Starts its own nats-server (JetStream, sync_interval: always) and Postgres in a
temporary folder, the four services each as its own process (their console scripts)
and one scripted runner as a process (`seedline runner`), as in production, and
measures `seedline.api.sessions.open` request -> reply (resolver, composer,
gateway, runner and back) over sequential opens on two repos: a small one filled
through the real ingest path and a large one whose rows are COPYed straight into
the timeline projection (the open path reads only the projection: the repo head
and its newest rows). The reply is sent after `seed_composed`, so it also bounds
request -> seed_composed; that moment is measured on its own too, from the event.
The small repo is also measured once before the large fill, while the table holds
nothing else, so a dependence on the table's size shows as well as one on the repo's.

    python -m bench.open_latency [--rounds 3] [--opens 200] [--large 1000000] [--profile]
                                 [--plan-cache-mode force_custom_plan]

Writes bench/results/open_latency.json and .md (open_latency_<mode>.* for a
--plan-cache-mode what-if) and prints the markdown table.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import os
import platform
import random
import shutil
import statistics
import tempfile
import time
import urllib.request
import uuid
from contextlib import AsyncExitStack
from pathlib import Path

SMALL_ENTRIES = 1_000
LARGE_ENTRIES = 1_000_000
INSTANCE = "benchopen"
REPOS = {"small": "bench/open-small", "large": "bench/open-large"}
NODE = "bench-node-1"
ENGINE = "scripted"
# chat_user is left out: a fresh one would wake a conversation (CONTRACT.md 4).
KINDS = ("chat_assistant", "terminal", "command", "brain", "outcome", "system")
ENTRIES_PER_CONVERSATION = 50
CONTENT_POOL = 1_000
CONTENT_MIN, CONTENT_MAX = 200, 2_000
WARMUP_OPENS = 10
PROFILE_OPENS = 50
TARGETS = {"ratio_max": 1.5, "p50_ms_max": 10.0, "p99_ms_max": 25.0}
RESULTS_DIR = Path(__file__).resolve().parent / "results"
COPY_CHUNK_ROWS = 20_000

_WORDS = (
    "the board move check pawn engine test failing passes branch commit diff file"
    " function returns value error trace line module import fixed opening rook knight"
    " bishop queen king castle rating puzzle lesson student review merge rebase build"
).split()


# -- synthetic timeline ----------------------------------------------------------------

def content_pool(seed: int = 20260817) -> list[str]:
    """Entry texts of varied length, COPY-safe (letters and spaces only)."""
    rng = random.Random(seed)
    text = " ".join(rng.choice(_WORDS) for _ in range(80_000))
    pool = []
    for _ in range(CONTENT_POOL):
        length = rng.randint(CONTENT_MIN, CONTENT_MAX)
        start = rng.randrange(0, len(text) - length)
        pool.append(text[start:start + length])
    return pool


def _at(ordinal: int) -> str:
    """One second apart from 2026-01-01T00:00:00Z (1,000,000 entries span 12 days)."""
    day, rest = divmod(ordinal, 86_400)
    hour, rest = divmod(rest, 3_600)
    minute, second = divmod(rest, 60)
    return f"2026-01-{day + 1:02d}T{hour:02d}:{minute:02d}:{second:02d}Z"


def entry_fields(tag: str, total: int, ordinal: int, pool: list[str]) -> tuple[str, str, str, str, str]:
    """(entry_id, session_id, kind, content, at) for a repo's entry `ordinal` of `total`.

    Content, kind and conversation boundaries are keyed by the distance from the
    newest entry, so the newest 1,000 entries of both repos are alike and their
    briefs have the same shape: only the repo's size differs.
    """
    back = total - ordinal
    return (
        f"bench-{tag}-{ordinal}",
        f"csess_bench{tag}{back // ENTRIES_PER_CONVERSATION:06d}",
        KINDS[back % len(KINDS)],
        pool[back % len(pool)],
        _at(ordinal),
    )


# -- system --------------------------------------------------------------------------

async def start_system(tmp: Path, stack: AsyncExitStack, plan_cache_mode: str | None = None,
                       nodes: tuple[str, ...] = (NODE,), partitions: int = 1,
                       engine: str = ENGINE, runner_args: tuple[str, ...] = (),
                       runner_env: dict[str, str] | None = None) -> dict:
    """The four services and one runner per node (`engine`, scripted unless said, with
    `runner_args` and `runner_env` added), each its own process; with `partitions` > 1 the
    server maps ingest to that many partitions, each with a writer."""
    import subprocess
    import sys

    import nats

    from seedline_contracts import subjects
    from seedline_devtools.embedded import start_nats, start_postgres
    from seedline_devtools.processes import stop_processes

    nats_proc = await asyncio.to_thread(  # sync_interval: always
        start_nats, tmp / "nats", ingest_partitions=partitions)
    stack.callback(nats_proc.stop)
    pg_proc = await asyncio.to_thread(start_postgres, tmp / "pg")
    stack.callback(pg_proc.stop)
    database_url = await asyncio.to_thread(pg_proc.ensure_database, "seedline_bench")
    if plan_cache_mode:  # a what-if for every service connection; no service code changes
        await asyncio.to_thread(
            pg_proc.admin_sql, f"ALTER DATABASE seedline_bench SET plan_cache_mode = {plan_cache_mode}")
    env = dict(
        os.environ,
        SEEDLINE_NATS_URL=nats_proc.url,
        SEEDLINE_NATS_MONITOR_URL=nats_proc.monitor_url,
        SEEDLINE_DATABASE_URL=database_url,
        SEEDLINE_HOME=str(tmp / "home"),
        SEEDLINE_STRICT_DURABILITY="1",  # refuses to start without sync_interval: always
        SEEDLINE_LOG_LEVEL="warning",
        SEEDLINE_HTTP_PORT="0",
        SEEDLINE_INGEST_PARTITIONS=str(partitions),
    )
    logs = tmp / "logs"
    logs.mkdir(exist_ok=True)
    bin_dir = Path(sys.executable).parent
    commands = {name: ([str(bin_dir / name)], {}) for name in SERVICES}
    for partition in range(1, partitions):
        commands[f"timeline-writer-{partition}"] = (
            [str(bin_dir / "timeline-writer")], {"SEEDLINE_INGEST_PARTITION": str(partition)})
    for node in nodes:
        commands["runner" if len(nodes) == 1 else f"runner-{node}"] = (
            [str(bin_dir / "seedline"), "runner", "--node-id", node,
             "--label", f"Bench box {node}", "--engine", engine, *runner_args],
            runner_env or {})
    procs = []
    for name, (command, extra) in commands.items():
        log = open(logs / f"{name}.log", "ab")
        procs.append(subprocess.Popen(command, env=dict(env, **extra), stdout=log,
                                      stderr=subprocess.STDOUT))

    stack.callback(stop_processes, procs)
    nc = await nats.connect(nats_proc.url, name="bench")
    stack.push_async_callback(nc.close)
    await _until_up(nc, subjects, procs, logs, nodes)
    from seedline_platform.settings import Settings

    settings = Settings.from_env({k: v for k, v in env.items() if k.startswith("SEEDLINE_")})
    return {"nc": nc, "settings": settings, "database_url": database_url, "nats": nats_proc,
            "postgres": pg_proc, "pids": {name: proc.pid for name, proc in zip(commands, procs)}}


SERVICES = ("timeline-writer", "continuity-resolver", "seed-composer", "runner-gateway")


async def _until_up(nc, subjects, procs, logs: Path, nodes: tuple[str, ...]) -> None:
    """Every service answers service discovery and every runner's presence is there."""
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        for proc in procs:
            if proc.poll() is not None:
                raise RuntimeError(f"a process exited with {proc.returncode}; see {logs}")
        names = set()
        inbox = nc.new_inbox()
        sub = await nc.subscribe(inbox)
        await nc.publish("$SRV.PING", b"", reply=inbox)
        await asyncio.sleep(0.2)
        while True:
            try:
                names.add(json.loads((await sub.next_msg(timeout=0.05)).data)["name"])
            except Exception:
                break
        await sub.unsubscribe()
        present = await _present(nc, subjects, nodes)
        if set(SERVICES) <= names and present:
            return
        await asyncio.sleep(0.2)
    raise RuntimeError(f"the services and the runner did not come up; see {logs}")


async def _present(nc, subjects, nodes: tuple[str, ...]) -> bool:
    try:
        kv = await nc.jetstream().key_value(subjects.RUNNERS_BUCKET)
        for node in nodes:
            await kv.get(subjects.presence_key(node))
    except Exception:  # the bucket or a key not there yet
        return False
    return True


def server_facts(monitor_url: str, database_url: str) -> dict:
    import psycopg

    with urllib.request.urlopen(f"{monitor_url}/varz", timeout=5) as response:
        varz = json.loads(response.read())
    with psycopg.connect(database_url) as conn:
        pg_version = conn.execute("SHOW server_version").fetchone()[0]
        settings = dict(conn.execute(
            "SELECT name, setting || COALESCE(unit, '') FROM pg_settings"
            " WHERE name IN ('shared_buffers', 'fsync', 'synchronous_commit')"
        ).fetchall())
    return {
        "nats_server": varz.get("version"),
        "nats_sync_always": bool(varz.get("jetstream", {}).get("config", {}).get("sync_always")),
        "postgres": pg_version,
        "postgres_settings": settings,
    }


# -- filling -------------------------------------------------------------------------

async def fill_by_ingest(nc, total: int, pool: list[str]) -> float:
    """Publish to seedline.ingest.timeline and wait until the newest entry is readable."""
    from seedline_contracts import subjects
    from seedline_contracts.codec import encode
    from seedline_platform.natsio import publish_window
    from seedline_devtools.testing import request

    started = time.perf_counter()
    js = nc.jetstream()
    repo = REPOS["small"]
    batch = []
    for ordinal in range(1, total + 1):
        entry_id, session_id, kind, content, at = entry_fields("s", total, ordinal, pool)
        body = {"entry_id": entry_id, "instance_id": INSTANCE, "repo": repo, "session_id": session_id,
                "kind": kind, "content": content, "at": at, "engine": ENGINE}
        batch.append((subjects.INGEST_TIMELINE, encode(body), {"Nats-Msg-Id": entry_id}))
        if len(batch) == 256:
            await publish_window(js, batch)
            batch = []
    if batch:
        await publish_window(js, batch)
    last_id = f"bench-s-{total}"
    deadline = time.monotonic() + 120
    while True:
        reply = await request(nc, subjects.API_TIMELINE_READ,
                              {"instance_id": INSTANCE, "repo": repo, "limit": 1})
        if reply.get("ok") and reply["entries"] and reply["entries"][-1]["entry_id"] == last_id:
            break
        if time.monotonic() > deadline:
            raise RuntimeError(f"the ingested entries were not readable in time: {reply}")
        await asyncio.sleep(0.05)
    return time.perf_counter() - started


def fill_by_copy(database_url: str, stream_last_seq: int, total: int, pool: list[str]) -> dict:
    """COPY the large repo into timeline_entries, seqs above the stream's, then move the offset."""
    import psycopg

    from seedline_timeline_writer.schema import COLUMNS, OFFSETS, TIMELINE_PROJECTION

    repo = REPOS["large"]
    started = time.perf_counter()
    with psycopg.connect(database_url) as conn:
        table_max = conn.execute("SELECT COALESCE(max(seq), 0) FROM timeline_entries").fetchone()[0]
        base = max(stream_last_seq, table_max) + 1_000
        prefix = f"\t{INSTANCE}\t{repo}\t"
        with conn.cursor() as cur:
            with cur.copy(f"COPY timeline_entries ({', '.join(COLUMNS)}) FROM STDIN") as copy:
                for first in range(1, total + 1, COPY_CHUNK_ROWS):
                    lines = []
                    for ordinal in range(first, min(first + COPY_CHUNK_ROWS, total + 1)):
                        entry_id, session_id, kind, content, at = entry_fields("l", total, ordinal, pool)
                        lines.append(f"{base + ordinal}\t{entry_id}{prefix}{session_id}\t{kind}\t"
                                     f"{content}\t{at}\t{ENGINE}\t\\N\t{ordinal}\n")
                    copy.write("".join(lines))
            cur.execute(
                f"UPDATE {OFFSETS.table} SET applied_seq = GREATEST(applied_seq, %s)"
                " WHERE projection = %s",
                (base + total, TIMELINE_PROJECTION),
            )
        conn.commit()
    copied = time.perf_counter() - started
    started = time.perf_counter()
    with psycopg.connect(database_url, autocommit=True) as conn:
        # What autovacuum would do after a million inserts; done now so it does not run mid-measurement.
        conn.execute("VACUUM (ANALYZE) timeline_entries")
        conn.execute("CHECKPOINT")
        size = conn.execute("SELECT pg_size_pretty(pg_total_relation_size('timeline_entries'))").fetchone()[0]
    return {"copy_seconds": copied, "vacuum_analyze_checkpoint_seconds": time.perf_counter() - started,
            "first_seq": base + 1, "last_seq": base + total, "table_size": size}


def check_repos(database_url: str, expected: dict[str, int]) -> dict:
    import psycopg

    out = {}
    with psycopg.connect(database_url) as conn:
        for size, repo in REPOS.items():
            count, max_ordinal, min_seq, max_seq = conn.execute(
                "SELECT count(*), max(repo_ordinal), min(seq), max(seq) FROM timeline_entries"
                " WHERE instance_id = %s AND repo = %s", (INSTANCE, repo)).fetchone()
            if count != expected[size] or max_ordinal != expected[size]:
                raise RuntimeError(f"{repo}: {count} rows, max ordinal {max_ordinal}, expected {expected[size]}")
            out[size] = {"rows": count, "seq_range": [min_seq, max_seq]}
    return out


# -- measuring -----------------------------------------------------------------------

class EventClock:
    """When this process saw each session event (core NATS subscription on the stream's subjects)."""

    def __init__(self) -> None:
        self.seen: dict[str, dict[str, float]] = {}

    async def on_event(self, msg) -> None:
        at = time.perf_counter()
        _, _, session_token, event_type = msg.subject.split(".", 3)
        self.seen.setdefault(session_token, {}).setdefault(event_type, at)


async def open_once(nc, repo: str, timeout: float = 30.0) -> tuple[float, float, dict]:
    from seedline_contracts import subjects
    from seedline_contracts.codec import encode

    body = encode({"request_id": f"bench-{uuid.uuid4().hex}", "instance_id": INSTANCE, "repo": repo,
                   "engine": ENGINE, "node_id": NODE})
    started = time.perf_counter()
    msg = await nc.request(subjects.API_SESSIONS_OPEN, body, timeout=timeout)
    done = time.perf_counter()
    return started, done, json.loads(msg.data)


async def request_json(nc, subject: str, body: dict, timeout: float = 60.0) -> dict:
    """One request of the platform's APIs, its reply decoded."""
    from seedline_contracts.codec import encode

    return json.loads((await nc.request(subject, encode(body), timeout=timeout)).data)


STOP_TRIES = 3


async def stop_live(nc, session_id: str, reason: str = "idle") -> None:
    """Stop a conversation the bench just opened, or say why it could not: a stop that is
    refused or finds it not live would leave it running under the measurement. An
    `unavailable` (the platform says to ask again) is asked again."""
    from seedline_contracts import subjects

    body = {"session_id": session_id, "reason": reason}
    for _ in range(STOP_TRIES):
        reply = await request_json(nc, subjects.API_SESSIONS_STOP, body)
        if reply.get("stopped") is True:
            return
        if (reply.get("error") or {}).get("code") != "unavailable":
            break
        await asyncio.sleep(1.0)
    raise RuntimeError(f"stopping {session_id} answered {reply}")


async def live_per_repo(nc, instances: set[str]) -> dict[tuple[str, str], int]:
    """How many conversations `sessions.list` says are live, per (instance, repo) listed."""
    from seedline_contracts import subjects

    counts: dict[tuple[str, str], int] = {}
    for instance in sorted(instances):
        listed = await request_json(nc, subjects.API_SESSIONS_LIST, {"instance_id": instance})
        for row in listed.get("conversations", []):
            key = (instance, row["repo"])
            counts[key] = counts.get(key, 0) + 1
    return counts


def percentile(values: list[float], q: float) -> float:
    """Nearest rank: the smallest value with at least q of the samples at or below it."""
    ordered = sorted(values)
    return ordered[max(0, math.ceil(q * len(ordered)) - 1)]


def summarise(values: list[float]) -> dict:
    return {"p50": statistics.median(values), "p99": percentile(values, 0.99),
            "min": min(values), "max": max(values), "mean": statistics.fmean(values)}


STAGES = (("continuity_decided", "resolver"), ("seed_composed", "composer"), ("opened", "gateway_runner"))


async def measure(nc, clock: EventClock, repo: str, opens: int, budget: float) -> dict:
    """`opens` sequential opens, or fewer when they take longer than `budget` seconds in all."""
    samples, composed, stages, outcomes, failures = [], [], {}, {}, []
    brief = None
    load = os.getloadavg()[0]  # the machine may be shared: other work shows here
    deadline = time.perf_counter() + budget
    for _ in range(opens):
        if time.perf_counter() > deadline:
            break
        started, done, reply = await open_once(nc, repo)
        if not reply.get("ok"):
            failures.append(reply.get("error"))
            continue
        samples.append((done - started) * 1000)
        key = (reply["outcome"], reply["continuity"]["reason_code"])
        outcomes[key] = outcomes.get(key, 0) + 1
        brief = reply.get("brief") or brief
        seen = clock.seen.pop(reply["session_id"], {})
        previous = started
        for event_type, stage in STAGES:
            if event_type in seen:
                stages.setdefault(stage, []).append((seen[event_type] - previous) * 1000)
                previous = seen[event_type]
        if "opened" in seen:
            stages.setdefault("reply", []).append((done - seen["opened"]) * 1000)
        if "seed_composed" in seen:
            composed.append((seen["seed_composed"] - started) * 1000)
    if not samples:
        raise RuntimeError(f"every open on {repo} failed: {failures[:3]}")
    return {
        "open_ms": summarise(samples),
        "seed_composed_ms": summarise(composed) if composed else None,
        "stage_p50_ms": {stage: statistics.median(v) for stage, v in stages.items()},
        "outcomes": {f"{o}/{r}": n for (o, r), n in sorted(outcomes.items())},
        "brief": {k: brief[k] for k in ("rows", "chars", "omitted_rows", "until_seq")} if brief else None,
        "opens": len(samples),
        "cut_short_by_time_budget": len(samples) + len(failures) < opens,
        "failures": len(failures),
        "load_average_1min_at_start": round(load, 2),
    }


async def warm_up(nc, repo: str, count: int) -> None:
    """Until the runner is seen and the repo is in its steady state (resume, briefed)."""
    deadline = time.monotonic() + 60
    done = 0
    while done < count:
        _, _, reply = await open_once(nc, repo)
        if reply.get("ok"):
            done += 1
        elif time.monotonic() > deadline:
            raise RuntimeError(f"warm-up opens on {repo} keep failing: {reply}")
        else:
            await asyncio.sleep(0.2)


def explain_open_queries(database_url: str, heads: dict[str, int]) -> dict:
    """Server time and plan of the open path's reads, per repo (EXPLAIN ANALYZE).

    Twice: with the values inlined (a custom plan, what psql shows) and as a
    prepared statement forced to its generic plan, which is what a service gets
    once psycopg has prepared a statement (after 5 executions on a connection)
    and Postgres has settled on the generic plan.
    """
    import psycopg
    from psycopg import sql

    from seedline_core.brief import MAX_ROWS
    from seedline_timeline_view.postgres import ROW_COLUMNS

    queries = {
        "resolver.repo_head (TimelineView.repo_head)": (
            "SELECT seq, repo_ordinal FROM timeline_entries WHERE instance_id = $1 AND repo = $2"
            " ORDER BY seq DESC LIMIT 1", lambda repo: (INSTANCE, repo)),
        "resolver.previous (postgres_repository.py)": (
            "SELECT session_id, last_activity FROM conversations WHERE instance_id = $1 AND repo = $2"
            " ORDER BY last_activity DESC NULLS LAST, activity_seq DESC,"
            " created_seq DESC NULLS LAST, session_id DESC LIMIT 1",
            lambda repo: (INSTANCE, repo)),
        "composer.newest_first (TimelineView)": (
            f"SELECT {ROW_COLUMNS} FROM timeline_entries WHERE instance_id = $1 AND repo = $2"
            " AND seq <= $3 ORDER BY seq DESC LIMIT $4",
            lambda repo: (INSTANCE, repo, heads[repo], MAX_ROWS + 1)),
    }

    def run(conn, statement, reps: int) -> dict:
        times, plan = [], None
        for _ in range(reps):
            (rows,) = conn.execute(statement).fetchone()
            times.append(rows[0]["Execution Time"])
            plan = rows[0]["Plan"]
        node = plan
        while node.get("Plans") and "Index Name" not in node:
            node = node["Plans"][0]
        return {"execution_ms_median": statistics.median(times), "node": node.get("Node Type"),
                "index": node.get("Index Name"), "rows_removed_by_filter": node.get("Rows Removed by Filter"),
                "shared_blocks": (node.get("Shared Hit Blocks") or 0) + (node.get("Shared Read Blocks") or 0)}

    out: dict = {}
    explain = "EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) "
    with psycopg.connect(database_url, autocommit=True) as conn:
        for index, (name, (text, params)) in enumerate(queries.items()):
            conn.execute(f"PREPARE bench_q{index} AS {text}")
            for size, repo in REPOS.items():
                values = [sql.Literal(v) for v in params(repo)]
                inlined = text
                for position in range(len(values), 0, -1):
                    inlined = inlined.replace(f"${position}", "{" + str(position - 1) + "}")
                conn.execute("SET plan_cache_mode = force_custom_plan")
                custom = run(conn, sql.SQL(explain + inlined).format(*values), 5)
                conn.execute("SET plan_cache_mode = force_generic_plan")
                generic = run(conn, sql.SQL(explain + f"EXECUTE bench_q{index} ({{}})").format(
                    sql.SQL(", ").join(values)), 3)
                out.setdefault(name, {})[size] = {"custom": custom, "generic": generic}
    return out


class Spies:
    """py-spy recording processes for `duration` seconds, summarised per process: how many
    samples it was busy (on CPU) and the functions that were busiest themselves. A
    process that is mostly idle waits on I/O (Postgres, NATS, fsyncs)."""

    RATE_HZ = 250
    TAIL_FRAMES = 6

    def __init__(self, pids: dict[str, int], duration: int) -> None:
        import shutil
        import subprocess
        import sys

        spy = shutil.which("py-spy") or str(Path(sys.executable).with_name("py-spy"))
        if not Path(spy).exists():
            raise FileNotFoundError("py-spy is not installed (make bench installs it)")
        self.duration = duration
        self.out_dir = Path(tempfile.mkdtemp(prefix="seedline-spy-"))
        self.procs = {
            name: subprocess.Popen(
                [spy, "record", "--pid", str(pid), "--duration", str(duration), "--rate",
                 str(self.RATE_HZ), "--format", "raw", "--nonblocking",
                 "-o", str(self.out_dir / f"{name}.txt")],
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            for name, pid in pids.items()
        }

    async def summary(self, per: int, unit: str) -> dict:
        """Once every recording ended: busy ms per `unit` (there were `per` of them)."""
        import shutil

        for proc in self.procs.values():
            await asyncio.to_thread(proc.wait)
        result: dict = {"sample_rate_hz": self.RATE_HZ, "seconds": self.duration, "processes": {}}
        for name in self.procs:
            leaves: dict[str, int] = {}
            tails: dict[str, int] = {}  # the innermost frames: who called the busy function
            total = 0
            path = self.out_dir / f"{name}.txt"
            for line in path.read_text().splitlines() if path.exists() else []:
                stack, _, samples = line.rpartition(" ")
                if not samples.isdigit():
                    continue
                total += int(samples)
                frames = stack.split(";")
                leaves[frames[-1]] = leaves.get(frames[-1], 0) + int(samples)
                tail = " < ".join(reversed(frames[-self.TAIL_FRAMES:]))
                tails[tail] = tails.get(tail, 0) + int(samples)
            top = sorted(leaves.items(), key=lambda kv: kv[1], reverse=True)[:8]
            top_tails = sorted(tails.items(), key=lambda kv: kv[1], reverse=True)[:5]
            result["processes"][name] = {
                "busy_samples": total,
                f"busy_ms_per_{unit}": total / self.RATE_HZ * 1000 / max(1, per),
                "top_self": [{"frame": frame, "samples": n} for frame, n in top],
                "top_stacks": [{"stack": tail, "samples": n} for tail, n in top_tails],
            }
        shutil.rmtree(self.out_dir, ignore_errors=True)
        return result


async def profile_opens(nc, repo: str, opens: int, budget: float, pids: dict) -> dict:
    """py-spy samples every service process and the runner while opens run (Spies)."""
    try:
        spies = Spies(pids, max(2, int(budget)))
    except FileNotFoundError as exc:
        return {"error": str(exc)}
    await asyncio.sleep(0.5)
    started = time.perf_counter()
    count = 0
    while count < opens and time.perf_counter() - started < spies.duration - 1:
        await open_once(nc, repo)
        count += 1
    elapsed = time.perf_counter() - started
    result = await spies.summary(count, "open")
    return {"opens": count, "wall_ms_per_open": elapsed * 1000 / max(1, count), **result}


# -- the run -------------------------------------------------------------------------

SERIES_BUDGET_SECONDS = 20.0
PROFILE_BUDGET_SECONDS = 10.0


async def _run(rounds: int, opens: int, small: int, large: int, profile: bool | None,
               plan_cache_mode: str | None) -> dict:
    from seedline_contracts import subjects
    from seedline_platform.logging import configure_logging
    from seedline_platform.replay import last_seq

    configure_logging("error", "bench")
    clock_start = time.perf_counter()
    timings: dict[str, float] = {}
    tmp = Path(tempfile.mkdtemp(prefix="seedline-bench-open-"))
    try:
        async with AsyncExitStack() as stack:
            system = await start_system(tmp, stack, plan_cache_mode)
            nc, database_url = system["nc"], system["database_url"]
            timings["start_seconds"] = time.perf_counter() - clock_start
            facts = await asyncio.to_thread(server_facts, system["settings"].nats_monitor_url, database_url)
            if not facts["nats_sync_always"]:
                raise RuntimeError("nats-server is not running with sync_interval: always")
            clock = EventClock()
            await nc.subscribe(subjects.SESSION_EVENTS_ALL, cb=clock.on_event)

            pool = content_pool()
            timings["fill_small_ingest_seconds"] = await fill_by_ingest(nc, small, pool)
            # Baseline: the small repo while the table holds nothing else.
            started = time.perf_counter()
            await warm_up(nc, REPOS["small"], WARMUP_OPENS)
            alone = await measure(nc, clock, REPOS["small"], opens, SERIES_BUDGET_SECONDS)
            timings["small_alone_seconds"] = time.perf_counter() - started
            print(f"small alone  : p50 {alone['open_ms']['p50']:.2f} ms, p99 {alone['open_ms']['p99']:.2f} ms"
                  f" (load {alone['load_average_1min_at_start']})", flush=True)

            stream_last = await last_seq(nc.jetstream(), subjects.TIMELINE_STREAM)
            copy_info = await asyncio.to_thread(fill_by_copy, database_url, stream_last, large, pool)
            timings["fill_large_copy_seconds"] = copy_info["copy_seconds"]
            timings["vacuum_analyze_checkpoint_seconds"] = copy_info["vacuum_analyze_checkpoint_seconds"]
            repos_check = await asyncio.to_thread(check_repos, database_url, {"small": small, "large": large})

            measure_start = time.perf_counter()
            load_before = os.getloadavg()
            for size in ("small", "large"):
                await warm_up(nc, REPOS[size], WARMUP_OPENS)
            per_round: dict[str, list[dict]] = {"small": [], "large": []}
            for index in range(rounds):
                # Alternate the order so drift (growing session stream and tables) hits both alike.
                order = ("small", "large") if index % 2 == 0 else ("large", "small")
                for size in order:
                    result = await measure(nc, clock, REPOS[size], opens, SERIES_BUDGET_SECONDS)
                    result["round"] = index + 1
                    per_round[size].append(result)
                    print(f"round {index + 1} {size:5}: p50 {result['open_ms']['p50']:.2f} ms, "
                          f"p99 {result['open_ms']['p99']:.2f} ms ({result['opens']} opens,"
                          f" load {result['load_average_1min_at_start']})", flush=True)
            timings["measure_seconds"] = time.perf_counter() - measure_start
            facts["load_average_1_5_15_before_and_after_rounds"] = [
                [round(x, 2) for x in load_before], [round(x, 2) for x in os.getloadavg()]]

            started = time.perf_counter()
            heads = {REPOS["small"]: repos_check["small"]["seq_range"][1],
                     REPOS["large"]: repos_check["large"]["seq_range"][1]}
            plans = await asyncio.to_thread(explain_open_queries, database_url, heads)
            timings["explain_seconds"] = time.perf_counter() - started
            result = assemble(per_round, alone, rounds, opens, small, large, facts, copy_info,
                              repos_check, plans, plan_cache_mode)
            if profile or (profile is None and not result["verdict"]["all_met"]):
                started = time.perf_counter()
                result["profile"] = {
                    size: await profile_opens(nc, REPOS[size], PROFILE_OPENS,
                                              PROFILE_BUDGET_SECONDS, system["pids"])
                    for size in ("small", "large")
                }
                timings["profile_seconds"] = time.perf_counter() - started
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    timings["total_seconds"] = time.perf_counter() - clock_start
    result["runtime"] = timings
    return result


def _median_of(rounds: list[dict], path: tuple[str, str]) -> float | None:
    values = [r[path[0]][path[1]] for r in rounds if r.get(path[0])]
    return statistics.median(values) if values else None


def _repo_summary(repo: str, entries: int, results: list[dict]) -> dict:
    return {
        "repo": repo,
        "entries": entries,
        "median_over_rounds_ms": {
            stat: _median_of(results, ("open_ms", stat)) for stat in ("p50", "p99", "min", "max", "mean")
        },
        "seed_composed_median_over_rounds_ms": {
            stat: _median_of(results, ("seed_composed_ms", stat)) for stat in ("p50", "p99")
        },
        "stage_p50_median_over_rounds_ms": {
            stage: statistics.median(r["stage_p50_ms"][stage] for r in results if stage in r["stage_p50_ms"])
            for stage in ("resolver", "composer", "gateway_runner", "reply")
            if any(stage in r["stage_p50_ms"] for r in results)
        },
        "opens_measured": sum(r["opens"] for r in results),
        "rounds": results,
    }


def assemble(per_round, alone, rounds, opens, small, large, facts, copy_info, repos_check, plans,
             plan_cache_mode) -> dict:
    repos = {size: _repo_summary(REPOS[size], small if size == "small" else large, results)
             for size, results in per_round.items()}
    repos["small_alone"] = _repo_summary(REPOS["small"], small, [alone])
    med = {size: repos[size]["median_over_rounds_ms"] for size in repos}

    def ratio(a: str, b: str) -> dict:
        return {"p50": med[a]["p50"] / med[b]["p50"], "p99": med[a]["p99"] / med[b]["p99"]}

    ratios = {
        "large/small": ratio("large", "small"),
        "large/small_alone": ratio("large", "small_alone"),
        "small/small_alone": ratio("small", "small_alone"),
        "large/small per round p50": [b["open_ms"]["p50"] / a["open_ms"]["p50"]
                                      for a, b in zip(per_round["small"], per_round["large"])],
        "large/small per round p99": [b["open_ms"]["p99"] / a["open_ms"]["p99"]
                                      for a, b in zip(per_round["small"], per_round["large"])],
    }
    limit = TARGETS["ratio_max"]
    verdict = {
        "ratio_large_small_met": max(ratios["large/small"].values()) <= limit,
        # The open path should not depend on how big the table is either: a small repo
        # next to a big one should open as fast as it did alone.
        "ratio_small_shared_vs_alone_met": max(ratios["small/small_alone"].values()) <= limit,
        **{f"{size}_p50_met": med[size]["p50"] <= TARGETS["p50_ms_max"] for size in ("small", "large")},
        **{f"{size}_p99_met": med[size]["p99"] <= TARGETS["p99_ms_max"] for size in ("small", "large")},
    }
    verdict["all_met"] = all(verdict.values())
    return {
        "benchmark": "open_latency",
        "measured": "seedline.api.sessions.open request -> reply, sequential, one open in flight",
        "conditions": {
            "machine": {"cpus": os.cpu_count(), "python": platform.python_version(),
                        "platform": platform.platform()},
            "servers": facts,
            "plan_cache_mode": plan_cache_mode or "Postgres default (auto)",
            "processes": "each of the four services (its console script), one scripted runner"
                         " (seedline runner), this client, nats-server and Postgres: seven processes"
                         " on the machine's cores",
            "rounds": rounds, "opens_per_round": opens, "warmup_opens_per_repo": WARMUP_OPENS,
            "time_budget_per_series_seconds": SERIES_BUDGET_SECONDS,
            "round_order": "small then large in odd rounds, large then small in even rounds",
            "request_ids": "a new request_id for every open",
            "open_body": "instance_id, repo, engine scripted, node_id, request_id; no instruction (so no"
                         " timeline write during opens)",
            "content_chars": f"{CONTENT_MIN}-{CONTENT_MAX}, uniform, from a pool of {CONTENT_POOL}; newest"
                             " 1,000 entries of both repos identical in content and kind, so the briefs match",
            "small_fill": f"{small:,} entries published to seedline.ingest.timeline (the real ingest path:"
                          " writer -> SEEDLINE_TIMELINE -> projection), waited until readable",
            "small_alone": "one series on the small repo after its fill, before the large fill (the"
                           " table then holds only the small repo)",
            "large_fill": f"{large:,} rows written straight into the projection table timeline_entries"
                          f" with COPY (repo_ordinal 1..{large:,}, seq {copy_info['first_seq']:,}.."
                          f"{copy_info['last_seq']:,}, above the stream's), projection_offsets 'timeline'"
                          " moved to the last seq. These rows are NOT in SEEDLINE_TIMELINE, so the"
                          " resolver's conversation projection never saw them; both repos are warmed up"
                          " into the same steady state (resuming the previous open). Then VACUUM (ANALYZE)"
                          " and CHECKPOINT, as autovacuum would do, so neither runs mid-measurement",
            "timeline_table_size": copy_info["table_size"],
            "repos_checked": repos_check,
            "percentiles": "p50 = median, p99 = nearest rank over each series' opens; tables show the"
                           " median over rounds of each statistic",
            "seed_composed": "the moment this process saw the seed_composed event on a core NATS"
                             " subscription; the reply is sent after it, so open latency bounds it",
        },
        "targets": TARGETS,
        "repos": repos,
        "ratios": ratios,
        "verdict": verdict,
        "query_plans": plans,
        "profile": None,
    }


def _fmt(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"


def markdown(result: dict) -> str:
    label = {"small_alone": "small, table holds only it", "small": "small", "large": "large"}
    rows = ["| repo | entries | opens | p50 ms | p99 ms | min ms | max ms | seed_composed p50 / p99 ms |",
            "|---|---:|---:|---:|---:|---:|---:|---:|"]
    for size in ("small_alone", "small", "large"):
        r = result["repos"][size]
        m, c = r["median_over_rounds_ms"], r["seed_composed_median_over_rounds_ms"]
        rows.append(f"| {r['repo']} ({label[size]}) | {r['entries']:,} | {r['opens_measured']} | {m['p50']:.2f}"
                    f" | {m['p99']:.2f} | {m['min']:.2f} | {m['max']:.2f} | {_fmt(c['p50'])} / {_fmt(c['p99'])} |")
    ratios, verdict, t = result["ratios"], result["verdict"], result["targets"]
    for name in ("large/small", "large/small_alone", "small/small_alone"):
        rows.append(f"| **{name}** | | | **{ratios[name]['p50']:.2f}x** | **{ratios[name]['p99']:.2f}x** | | | |")
    lines = ["# Open latency against repo size", "",
             f"plan_cache_mode: {result['conditions']['plan_cache_mode']}", "", *rows, "",
             f"Targets: ratio <= {t['ratio_max']}x, p50 <= {t['p50_ms_max']:.0f} ms, p99 <= {t['p99_ms_max']:.0f} ms"
             " (small and large in the shared table, medians over rounds).",
             "Verdict: " + ", ".join(f"{k} {'yes' if v else 'NO'}" for k, v in verdict.items()),
             "Per-round large/small p50: " + ", ".join(f"{x:.2f}" for x in ratios["large/small per round p50"])
             + "; p99: " + ", ".join(f"{x:.2f}" for x in ratios["large/small per round p99"]), "",
             "Stage p50 (ms, median over rounds; when this process saw each event):", "",
             "| repo | resolver (request->continuity_decided) | composer (->seed_composed) |"
             " gateway+runner (->opened) | reply (opened->reply) |", "|---|---:|---:|---:|---:|"]
    for size in ("small_alone", "small", "large"):
        st = result["repos"][size]["stage_p50_median_over_rounds_ms"]
        lines.append(f"| {label[size]} | " + " | ".join(_fmt(st.get(k)) for k in
                                                        ("resolver", "composer", "gateway_runner", "reply")) + " |")
    lines += ["", "Open-path queries, server time (EXPLAIN ANALYZE; custom = values inlined,"
              " generic = prepared statement's generic plan):", "",
              "| query | repo | custom ms | custom plan | generic ms | generic plan | rows removed by filter (generic) |",
              "|---|---|---:|---|---:|---|---:|"]
    for name, per_repo in result["query_plans"].items():
        for size, p in per_repo.items():
            c, g = p["custom"], p["generic"]
            lines.append(f"| {name} | {size} | {c['execution_ms_median']:.3f} | {c['index'] or c['node']} |"
                         f" {g['execution_ms_median']:.3f} | {g['index'] or g['node']} |"
                         f" {g['rows_removed_by_filter'] or 0:,} |")
    lines += ["", "Conditions:", ""]
    lines += [f"- {key}: {value}" for key, value in result["conditions"].items()]
    for size in ("small_alone", "small", "large"):
        first = result["repos"][size]["rounds"][0]
        lines.append(f"- {label[size]}: outcomes (round 1) {first['outcomes']}, brief {first['brief']},"
                     f" 1-min load at series start {[r['load_average_1min_at_start'] for r in result['repos'][size]['rounds']]},"
                     f" cut short by time budget in {sum(r['cut_short_by_time_budget'] for r in result['repos'][size]['rounds'])}"
                     f" of {len(result['repos'][size]['rounds'])} series")
    lines += ["", "Runtime (s): " + ", ".join(f"{k.replace('_seconds', '')} {v:.1f}"
                                              for k, v in result.get("runtime", {}).items())]
    if result.get("profile"):
        lines += ["", "Profile (py-spy, each process sampled at 250 Hz while opens ran; busy is"
                  " on-CPU time, the rest of an open is waiting on Postgres, NATS and fsyncs):", ""]
        for size, p in result["profile"].items():
            if "error" in p:
                lines.append(f"- {size}: {p['error']}")
                continue
            lines.append(f"- {size} ({p['opens']} opens): wall {p['wall_ms_per_open']:.2f} ms/open")
            for name, proc in p["processes"].items():
                top = ", ".join(f"{t['frame']} ({t['samples']})" for t in proc["top_self"][:3])
                lines.append(f"  - {name}: busy {proc['busy_ms_per_open']:.2f} ms/open; busiest: {top}")
    return "\n".join(lines) + "\n"


def run_open_bench(rounds: int = 3, opens: int = 200, *, small_entries: int = SMALL_ENTRIES,
                   large_entries: int = LARGE_ENTRIES, profile: bool | None = None,
                   plan_cache_mode: str | None = None, write: bool = True) -> dict:
    """Run the benchmark; profile=None profiles only when a target is missed.

    plan_cache_mode (e.g. "force_custom_plan") is set on the database before the
    services connect: a what-if, reported in the conditions.
    """
    result = asyncio.run(_run(rounds, opens, small_entries, large_entries, profile, plan_cache_mode))
    result["markdown"] = markdown(result)
    if write:
        RESULTS_DIR.mkdir(parents=True, exist_ok=True)
        suffix = f"_{plan_cache_mode}" if plan_cache_mode else ""
        (RESULTS_DIR / f"open_latency{suffix}.json").write_text(
            json.dumps({k: v for k, v in result.items() if k != "markdown"}, indent=2) + "\n")
        (RESULTS_DIR / f"open_latency{suffix}.md").write_text(result["markdown"])
    return result


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--opens", type=int, default=200)
    parser.add_argument("--small", type=int, default=SMALL_ENTRIES)
    parser.add_argument("--large", type=int, default=LARGE_ENTRIES)
    parser.add_argument("--profile", action=argparse.BooleanOptionalAction, default=None,
                        help="profile the open path (default: only when a target is missed)")
    parser.add_argument("--plan-cache-mode", choices=("auto", "force_custom_plan", "force_generic_plan"),
                        help="what-if: set Postgres plan_cache_mode for every service connection")
    args = parser.parse_args(argv)
    result = run_open_bench(args.rounds, args.opens, small_entries=args.small, large_entries=args.large,
                            profile=args.profile, plan_cache_mode=args.plan_cache_mode)
    print(result["markdown"])


if __name__ == "__main__":
    main()
