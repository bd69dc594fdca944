"""Starting the hosts' processes, each once the ones it needs answer, and the probes that
tell when a part answers (the harness's loop runs on the client host)."""

from __future__ import annotations

import asyncio
import json
import time
import urllib.request
from pathlib import Path

import psycopg

from seedline_contracts import subjects

from .cluster import MACHINES, NODES, SERVICE_HOSTS, SERVICES, WEB, Cluster
from .workload import connect

READY_SECONDS = 90.0

async def start_system(cluster: Cluster, template: Path) -> None:
    for node in NODES:
        cluster.add_node(node).start()
    for node in NODES:
        await until(lambda n=node: _listens(cluster.address[n], 4222), 30, f"{node} listening")
    cluster.add_postgres(template).start()
    await until(lambda: _postgres_answers(cluster.database_url), 60, "Postgres answering")
    nc = await connect(cluster.nats_urls, "harness")
    try:
        await until(lambda: _jetstream_ready(nc), 60, "the cluster's JetStream leader")
        seen: dict[str, set[str]] = {}
        # The first writer alone: it makes the streams the others bind to.
        cluster.add_service(SERVICES[0], SERVICE_HOSTS[0]).start()
        await until(lambda: _new_copy(nc, SERVICES[0], seen), READY_SECONDS,
                     f"{SERVICES[0]} on {SERVICE_HOSTS[0]}")
        for host in SERVICE_HOSTS:
            for name in (*SERVICES, WEB):
                if f"{name}@{host}" not in cluster.procs:
                    cluster.add_service(name, host).start()
        for name in SERVICES:
            for host in SERVICE_HOSTS[1 if name == SERVICES[0] else 0:]:
                await until(lambda n=name: _new_copy(nc, n, seen), READY_SECONDS,
                             f"{name} on {host}")
        for host in SERVICE_HOSTS:
            await until(lambda h=host: web_ready(cluster.web_url(h)), READY_SECONDS,
                         f"{WEB} on {host}")
        for host in MACHINES:
            cluster.add_runner(host).start()
        kv = await nc.jetstream().key_value(subjects.RUNNERS_BUCKET)
        for host, (node_id, _) in MACHINES.items():
            await until(lambda n=node_id: _present(kv, n), READY_SECONDS, f"runner {node_id}")
    finally:
        await nc.close()


async def until(probe, seconds: float, what: str):
    deadline = time.monotonic() + seconds
    while True:
        try:
            value = await probe()
        except Exception:
            value = None
        if value:
            return value
        if time.monotonic() > deadline:
            raise RuntimeError(f"not within {seconds:.0f} s: {what}")
        await asyncio.sleep(0.1)


async def _listens(address: str, port: int) -> bool:
    _, writer = await asyncio.wait_for(asyncio.open_connection(address, port), 1)
    writer.close()
    return True


async def _postgres_answers(url: str) -> bool:
    async with await psycopg.AsyncConnection.connect(url, connect_timeout=2):
        return True


async def _jetstream_ready(nc) -> bool:
    await nc.jetstream().account_info()
    return True


async def _new_copy(nc, name: str, seen: dict[str, set[str]]) -> bool:
    """A copy of the service not seen before answers its discovery ping."""
    msg = await nc.request(f"$SRV.INFO.{name}", b"", timeout=0.5)
    service_id = json.loads(msg.data).get("id")
    known = seen.setdefault(name, set())
    if not service_id or service_id in known:
        return False
    known.add(service_id)
    return True


async def copies_answering(nc, name: str) -> int:
    """How many copies of a service answer a discovery ping within half a second."""
    inbox = nc.new_inbox()
    ids: set[str] = set()
    sub = await nc.subscribe(inbox, cb=None)
    await nc.publish(f"$SRV.PING.{name}", b"", reply=inbox)
    deadline = time.monotonic() + 0.5
    try:
        while time.monotonic() < deadline:
            try:
                msg = await sub.next_msg(timeout=max(0.05, deadline - time.monotonic()))
            except Exception:
                break
            ids.add(json.loads(msg.data).get("id"))
    finally:
        await sub.unsubscribe()
    return len(ids)


def _web_ready_sync(url: str) -> bool:
    with urllib.request.urlopen(f"{url}/readyz", timeout=2) as answer:
        return answer.status == 200


async def web_ready(url: str) -> bool:
    # urllib blocks: fine on this loop's own thread (an executor thread would not be on
    # the client host).
    return _web_ready_sync(url)


async def _present(kv, node_id: str) -> bool:
    entry = await kv.get(subjects.presence_key(node_id))
    return bool(entry.value)
