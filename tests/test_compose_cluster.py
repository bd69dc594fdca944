"""docker-compose.cluster.yml: three NATS nodes, Postgres, two copies of every service and of
the web, checked against docker-compose.yml, the settings and real nats-servers.

`make test-containers` runs the file for real on podman and kills a node under load
(deploy/containers/test.sh); this checks what it can without containers: each copy is
docker-compose.yml's service with every node in its connection and monitoring lists and R3
streams, it waits for every node, and the nodes' one config makes a cluster that elects a
leader and keeps an R3 stream through the loss of one node.
"""

from __future__ import annotations

import asyncio
import os
import re
import subprocess
from pathlib import Path

import nats
import pytest
import yaml

from seedline_devtools.embedded import free_port, nats_server_binary, wait_for_port
from seedline_platform.settings import SETTINGS_DOC

REPO = Path(__file__).resolve().parents[1]
BASE = yaml.safe_load((REPO / "docker-compose.yml").read_text())["services"]
CLUSTER_FILE = REPO / "docker-compose.cluster.yml"
CLUSTER = yaml.safe_load(CLUSTER_FILE.read_text())
SERVICES = CLUSTER["services"]
CONFIG = REPO / "deploy" / "cluster" / "container.conf"
NODES = ("nats-1", "nats-2", "nats-3")
COPIED = {"timeline-writer": "timeline-writer", "continuity-resolver": "continuity-resolver",
          "seed-composer": "seed-composer", "runner-gateway": "runner-gateway", "web": "web"}


def copies() -> dict[str, list[str]]:
    return {base: sorted(n for n in SERVICES if re.fullmatch(rf"{base}-\d", n))
            for base in COPIED}


def test_every_service_and_the_web_run_twice_as_docker_compose_runs_them_once():
    for base, names in copies().items():
        assert names == [f"{base}-1", f"{base}-2"], base
        for name in names:
            spec, one = SERVICES[name], BASE[COPIED[base]]
            assert spec["image"] == one["image"], name
            assert spec["healthcheck"]["test"] == one["healthcheck"]["test"], name
            assert spec["restart"] == one["restart"], name
            assert not {"container_name", "hostname"} & spec.keys(), name
        assert SERVICES[names[0]]["build"] == BASE[COPIED[base]]["build"], base


def test_each_copy_is_given_every_node_and_makes_streams_with_three_replicas():
    urls = ",".join(f"nats://{n}:4222" for n in NODES)
    monitors = ",".join(f"http://{n}:8222" for n in NODES)
    for base, names in copies().items():
        for name in names:
            env, one = SERVICES[name]["environment"], BASE[COPIED[base]]["environment"]
            assert (env["SEEDLINE_NATS_URL"], env["SEEDLINE_NATS_MONITOR_URL"]) == (urls, monitors)
            assert env["SEEDLINE_STREAM_REPLICAS"] == "3"
            assert {k: v for k, v in env.items() if k not in (
                "SEEDLINE_NATS_URL", "SEEDLINE_NATS_MONITOR_URL", "SEEDLINE_STREAM_REPLICAS")} \
                == {k: v for k, v in one.items() if "NATS" not in k}, name
            waits = SERVICES[name]["depends_on"]
            assert {n for n in NODES} | {"postgres"} <= set(waits), name
            assert all(waits[n]["condition"] == "service_healthy" for n in waits), name
    runner = SERVICES["demo-runner"]
    assert runner["environment"]["SEEDLINE_NATS_URL"] == urls
    assert runner["command"] == BASE["demo-runner"]["command"]


def test_every_seedline_variable_is_a_setting_or_one_compose_reads():
    text = CLUSTER_FILE.read_text()
    read_by_compose = set(re.findall(r"\$\{([A-Z0-9_]+)", text))
    assert read_by_compose == {
        "SEEDLINE_NATS_IMAGE", "SEEDLINE_POSTGRES_IMAGE", "SEEDLINE_HOST_NATS_PORT",
        "SEEDLINE_HOST_NATS_PORT_2", "SEEDLINE_HOST_NATS_PORT_3",
        "SEEDLINE_HOST_NATS_MONITOR_PORT", "SEEDLINE_HOST_POSTGRES_PORT",
        "SEEDLINE_HOST_WEB_PORT"}
    used = set(re.findall(r"\bSEEDLINE_[A-Z0-9_]+", text)) - read_by_compose
    assert used - set(SETTINGS_DOC) == {"SEEDLINE_NODE"}  # the nodes' config reads it


def test_the_nodes_share_one_config_naming_every_node_as_the_loopback_ones_do():
    text = CONFIG.read_text()
    names = []
    for node in NODES:
        spec = SERVICES[node]
        assert f"./deploy/cluster/container.conf:{spec['command'][1]}:ro" in spec["volumes"]
        names.append(spec["environment"]["SEEDLINE_NODE"])
        assert f"nats-route://{node}:6222" in text
    assert names == ["seedline-n1", "seedline-n2", "seedline-n3"]
    loopback = (REPO / "deploy" / "cluster" / "n1.conf").read_text()
    for setting in ("sync_interval: always", "max_payload: 4MB", 'ping_interval: "5s"',
                    "ping_max: 3", "name: seedline"):
        assert setting in text and setting in loopback, setting
    for name in names:
        checked = subprocess.run([nats_server_binary(), "-t", "-c", str(CONFIG)],
                                 env={**os.environ, "SEEDLINE_NODE": name},
                                 capture_output=True, text=True)
        assert checked.returncode == 0, checked.stderr


@pytest.mark.servers
@pytest.mark.timeout(120)
async def test_the_config_makes_a_cluster_that_keeps_an_r3_stream_through_a_lost_node(tmp_path):
    """The three nodes from container.conf itself, each container's names and ports put on
    loopback: they elect a leader, store to a stream of three replicas, and with one node
    killed still take writes and keep every acknowledged one."""
    ports = {n: {p: free_port() for p in (4222, 6222, 8222)} for n in NODES}
    procs = {}
    try:
        for node in NODES:
            text = CONFIG.read_text()
            for other in NODES:
                text = text.replace(f"nats-route://{other}:6222",
                                    f"nats-route://127.0.0.1:{ports[other][6222]}")
            for port, free in ports[node].items():
                text = text.replace(f"0.0.0.0:{port}", f"127.0.0.1:{free}")
            text = text.replace('store_dir: "/data"', f'store_dir: "{tmp_path / node}"')
            config = tmp_path / f"{node}.conf"
            config.write_text(text)
            name = SERVICES[node]["environment"]["SEEDLINE_NODE"]
            procs[node] = subprocess.Popen(
                [nats_server_binary(), "-c", str(config)], env={**os.environ,
                                                                 "SEEDLINE_NODE": name},
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        for node in NODES:
            wait_for_port(ports[node][4222], proc=procs[node])
        nc = await nats.connect([f"nats://127.0.0.1:{ports[n][4222]}" for n in NODES])
        js = nc.jetstream()
        for _ in range(300):
            try:
                await js.add_stream(name="R3", subjects=["r3.>"], num_replicas=3)
                break
            except Exception:
                await asyncio.sleep(0.1)
        info = await js.stream_info("R3")
        assert info.config.num_replicas == 3 and len(info.cluster.replicas or []) == 2
        acked = [(await js.publish("r3.x", b"%d" % n)).seq for n in range(50)]
        procs[info.cluster.leader.replace("seedline-n", "nats-")].kill()
        for n in range(50, 100):
            for _ in range(100):
                try:
                    acked.append((await js.publish("r3.x", b"%d" % n, timeout=1)).seq)
                    break
                except Exception:
                    await asyncio.sleep(0.1)
        assert len(acked) == 100
        assert (await js.stream_info("R3")).state.messages == 100
        await nc.close()
    finally:
        for proc in procs.values():
            proc.kill()
            proc.wait()
