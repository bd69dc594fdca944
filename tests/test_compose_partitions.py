"""docker-compose.partitions.yml: two timeline-writers over ingest partitioned by instance.

Read as data, merged over docker-compose.yml the way compose merges an override file,
and checked against the base file's writer, the contract's mappings and a real
nats-server that routes each instance to the partition the mapping names.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import yaml

from seedline_contracts import subjects
from seedline_devtools.embedded import mappings_block, start_nats

REPO = Path(__file__).resolve().parents[1]
BASE = yaml.safe_load((REPO / "docker-compose.yml").read_text())["services"]
OVERRIDE = yaml.safe_load((REPO / "docker-compose.partitions.yml").read_text())["services"]
NATS_CONF = REPO / "deploy" / "nats-partitions.conf"
PARTITIONS = 2


def merged(name: str) -> dict:
    """A service as compose runs it: the override's mappings merged into the base's."""
    base, extra = BASE.get(name, {}), OVERRIDE.get(name, {})
    out = {**base, **extra}
    for key in ("environment",):
        if key in base and key in extra:
            out[key] = {**base[key], **extra[key]}
    return out


def test_each_writer_is_the_base_writer_taking_its_own_partition():
    writers = [merged("timeline-writer"), merged("timeline-writer-1")]
    base = BASE["timeline-writer"]
    for number, writer in enumerate(writers):
        assert writer["environment"]["SEEDLINE_INGEST_PARTITIONS"] == str(PARTITIONS)
        assert writer["environment"]["SEEDLINE_INGEST_PARTITION"] == str(number)
        assert {k: v for k, v in writer["environment"].items() if "PARTITION" not in k} == \
            base["environment"]
        for key in ("build", "image", "healthcheck", "restart", "stop_grace_period"):
            assert writer[key] == base[key], key
    assert set(writers[1]["depends_on"]) == set(base["depends_on"])


def test_the_server_config_is_the_base_config_with_the_contract_mappings():
    text = NATS_CONF.read_text()
    assert (REPO / "deploy" / "nats.conf").read_text().rstrip("\n") in text
    assert mappings_block(PARTITIONS) in text
    mount = f"./deploy/nats-partitions.conf:{BASE['nats']['command'][1]}:ro"
    assert OVERRIDE["nats"]["volumes"] == [mount]


def test_the_mappings_send_each_instance_to_one_partition(tmp_path):
    """The override's mapping block on a real server: every entry of an instance lands on
    the partition subject the contract's partition filter names, whichever form it used."""

    async def check() -> None:
        import nats

        server = start_nats(tmp_path / "nats", ingest_partitions=PARTITIONS)
        try:
            nc = await nats.connect(server.url)
            seen: dict[str, set[str]] = {}

            async def on_message(msg) -> None:
                seen.setdefault(json.loads(msg.data)["instance"], set()).add(msg.subject)

            await nc.subscribe("seedline.ingest.p.>", cb=on_message)
            instances = [f"inst{n}" for n in range(12)]
            for instance in instances:
                body = json.dumps({"instance": instance}).encode()
                await nc.publish(subjects.ingest_timeline_subject(instance), body)
                await nc.publish(subjects.ingest_runner_subject("mac-mini", instance), body)
            await nc.flush()
            await asyncio.sleep(0.2)
            await nc.close()
        finally:
            server.stop()
        partitions = {}
        for instance in instances:
            numbers = {subject.split(".")[3] for subject in seen[instance]}
            assert len(numbers) == 1, (instance, seen[instance])
            partitions[instance] = numbers.pop()
        assert set(partitions.values()) == {"0", "1"}

    asyncio.run(check())
