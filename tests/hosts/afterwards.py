"""Afterwards: everything healed and caught up, then what the streams, the projections and
the APIs hold, read for the checker."""

from __future__ import annotations

import asyncio
import json
import subprocess
from collections import Counter
from pathlib import Path

import psycopg

from seedline_contracts import subjects
from seedline_platform.replay import last_seq, replay

from . import checker
from .cluster import BIN, SERVICE_HOSTS, SERVICES, WEB, Cluster
from .starting import copies_answering, until, web_ready
from .workload import History, Workload, World

CATCH_UP_SECONDS = 150.0
CONSUMER_STREAMS = (subjects.INGEST_STREAM, subjects.TIMELINE_STREAM, subjects.SESSIONS_STREAM)

async def caught_up(cluster: Cluster, workload: Workload, history: History) -> list[str]:
    """Everything healed: every process running, every copy answering, every durable
    consumer idle, and every open without a reply asked again by its request_id."""
    problems = [f"{p.name} exited by itself (code {p.popen.returncode})"
                for p in cluster.procs.values() if not p.running]
    nc = workload.nc
    try:
        await until(lambda: _all_copies(nc), CATCH_UP_SECONDS, "every service copy answering")
    except RuntimeError as exc:
        problems.append(str(exc))
    try:
        await until(lambda: _consumers_idle(nc), CATCH_UP_SECONDS, "every consumer idle")
    except RuntimeError as exc:
        problems.append(str(exc))
    for host in SERVICE_HOSTS:
        try:
            await until(lambda h=host: web_ready(cluster.web_url(h)), 30, f"web on {host}")
        except RuntimeError as exc:
            problems.append(str(exc))
    unanswered = [r for r, o in history.opens.items() if "final" not in o]
    for _ in range(3):
        await asyncio.gather(*(workload.ask_again(r) for r in unanswered))
        unanswered = [r for r in unanswered if "final" not in history.opens[r]]
        if not unanswered:
            break
        await asyncio.sleep(2)
    return problems


async def _all_copies(nc) -> bool:
    for name in (*SERVICES, WEB):
        if await copies_answering(nc, name) < len(SERVICE_HOSTS):
            return False
    return True


async def _consumers_idle(nc) -> bool:
    js = nc.jetstream()
    for stream in CONSUMER_STREAMS:
        for info in await js.consumers_info(stream):
            if info.config.durable_name and (info.num_pending or info.num_ack_pending):
                return False
    return True


async def _stream(js, stream: str, subject: str) -> list[dict]:
    out = []
    end = await last_seq(js, stream)
    async for msgs in replay(js, stream, subject, 1, end):
        for msg in msgs:
            body = json.loads(msg.data)
            body["_seq"] = msg.metadata.sequence.stream
            out.append(body)
    return out


async def gather(cluster: Cluster, world: World, workload: Workload) -> checker.Streams:
    js = workload.nc.jetstream()
    timeline = await _stream(js, subjects.TIMELINE_STREAM, subjects.TIMELINE_ALL)
    events = await _stream(js, subjects.SESSIONS_STREAM, "seedline.session.>")
    notices = await _stream(js, subjects.NOTICES_STREAM, subjects.NOTIFY_ALL)
    async with await psycopg.AsyncConnection.connect(cluster.database_url) as conn:
        rows = await (await conn.execute(
            "SELECT entry_id, count(*) FROM timeline_entries GROUP BY entry_id")).fetchall()
    listed = {}
    for instance in (*world.instances, world.probe_instance):
        reply = await workload.request(subjects.API_SESSIONS_LIST, {"instance_id": instance}, 15)
        listed[instance] = {c["session_id"] for c in reply.get("conversations", [])}
    rebuilds = {name: _rebuild(cluster, service)
                for name, service in (("timeline", "timeline-writer"),
                                      ("conversations", "continuity-resolver"))}
    return checker.Streams(timeline, events, notices, Counter(dict(rows)), listed, rebuilds)


def _rebuild(cluster: Cluster, service: str) -> tuple[str, str]:
    """`<service> rebuild`, run on the client host (this loop's thread is there)."""
    env = cluster.service_env("a")
    done = subprocess.run([str(BIN / service), "rebuild"], env=env, capture_output=True,
                          text=True, timeout=300)
    for line in done.stdout.splitlines():
        try:
            result = json.loads(line).get("result")
        except ValueError:
            continue
        if result:
            return result["before_digest"], result["after_digest"]
    return "failed: " + (done.stderr.strip().splitlines() or ["?"])[-1], ""


KEPT_FIELDS = ("_seq", "type", "session_id", "at", "instance_id", "repo", "node_id",
               "request_id", "reason", "from_node_id", "to_node_id", "kind")


def dump_events(path: Path, streams: checker.Streams) -> None:
    """The session events and notices the checker read (their sealed parts left out)."""
    with open(path, "w") as out:
        for stream, records in (("sessions", streams.events), ("notices", streams.notices)):
            for record in records:
                kept = {k: record[k] for k in KEPT_FIELDS if k in record}
                if "reply" in record and isinstance(record["reply"], dict):
                    kept["reply_node"] = record["reply"].get("node_id")
                out.write(json.dumps({"stream": stream, **kept}) + "\n")
