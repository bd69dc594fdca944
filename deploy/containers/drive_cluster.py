"""Drive docker-compose.cluster.yml from the host, with one NATS node killed under load.

Run by deploy/containers/test.sh once `podman-compose -f docker-compose.cluster.yml up` has
returned with every health check passing. Everything goes through the published ports (each
node's client port, the first node's monitoring port, Postgres, the web) and the `seedline`
command's --json output, as drive.py does for docker-compose.yml:

1. the three nodes are one JetStream cluster and every stream has three replicas; both copies
   of each service and of the web answer;
2. a conversation opens on the demo runner (scripted engine) and answers;
3. while `seedline publish --file` sends 3,000 entries, the node leading SEEDLINE_TIMELINE is
   killed (SIGKILL); the publish finishes through the other two, and another conversation
   opens and answers while that node is down;
4. the node is started again and catches up; every entry is in the projection once, and a
   rebuild from the stream gives the projection's digest.

Prints each step with the time it took; exits 1 with the reason on the first failure.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import nats

from drive import (CheckFailed, check, finished, host_port, podman, publish_file, seedline,
                   step, timeline, wait_for)
import drive

PROJECT = "seedline-cluster"
NODES = ("nats-1", "nats-2", "nats-3")
NATS_PORTS = [host_port("SEEDLINE_HOST_NATS_PORT", 4222),
              host_port("SEEDLINE_HOST_NATS_PORT_2", 4223),
              host_port("SEEDLINE_HOST_NATS_PORT_3", 4224)]
URLS = [f"nats://127.0.0.1:{port}" for port in NATS_PORTS]
INSTANCE, REPO, LOAD_REPO, ENTRIES = "cluster", "apps/cluster-check", "apps/cluster-load", 3000
COPIES = ("timeline-writer", "continuity-resolver", "seed-composer", "runner-gateway",
          "seedline-web")

# drive.py's helpers, pointed at every node of the cluster.
drive.ENV["SEEDLINE_NATS_URL"] = ",".join(URLS)
drive.INSTANCE = INSTANCE


def container(service: str) -> str:
    return podman("ps", "-a", "--filter", f"label=com.docker.compose.project={PROJECT}",
                  "--filter", f"label=com.docker.compose.service={service}",
                  "--format", "{{.Names}}")


async def _cluster() -> dict:
    nc = await nats.connect(URLS, connect_timeout=3, max_reconnect_attempts=3)
    try:
        js = nc.jetstream()
        streams = {}
        for name in ("SEEDLINE_INGEST", "SEEDLINE_TIMELINE", "SEEDLINE_SESSIONS"):
            info = await js.stream_info(name)
            streams[name] = (info.config.num_replicas, info.cluster.leader,
                             len(info.cluster.replicas or []))
        copies = {}
        for name in COPIES:
            inbox = nc.new_inbox()
            sub = await nc.subscribe(inbox)
            await nc.publish(f"$SRV.PING.{name}", b"", reply=inbox)
            ids = set()
            deadline = time.monotonic() + 1.0
            while time.monotonic() < deadline:
                try:
                    msg = await sub.next_msg(timeout=deadline - time.monotonic())
                except Exception:
                    break
                ids.add(json.loads(msg.data).get("id"))
            await sub.unsubscribe()
            copies[name] = len(ids)
        return {"streams": streams, "copies": copies}
    finally:
        await nc.close()


def cluster() -> dict:
    return asyncio.run(_cluster())


@step("three nodes, streams with three replicas, two copies of every service and the web")
def formed() -> str:
    state = wait_for("both copies of every service answering",
                     lambda: (lambda s: s if all(n == 2 for n in s["copies"].values())
                              else None)(cluster()), timeout=90)
    for name, (replicas, leader, followers) in state["streams"].items():
        check(replicas == 3 and followers == 2, f"{name}: {replicas} replicas, {followers} "
                                                f"followers, led by {leader}")
    leader = state["streams"]["SEEDLINE_TIMELINE"][1]
    print(f"   streams R3; SEEDLINE_TIMELINE led by {leader}; copies {state['copies']}")
    return leader


def opened_and_answered(repo: str, question: str) -> str:
    """Asked again with the same request id while the answer is `unavailable` or `timeout`,
    as the contract says to: right after a node is lost the cluster elects new leaders for a
    few seconds, and an open asked then cannot be stored yet."""
    request_id = f"drive-{repo.rsplit('/', 1)[-1]}-{len(question)}-{time.time_ns()}"
    answers: list[str] = []
    began = time.monotonic()

    def open_once():
        reply = seedline("open", "--instance", INSTANCE, "--repo", repo, "--engine", "scripted",
                         "--node", "demo-runner", "--request-id", request_id, question,
                         ok=False)
        code = (reply.get("error") or {}).get("code")
        answers.append(code or "ok")
        return None if code in ("unavailable", "timeout") else reply

    opened = wait_for("an answer to the open", open_once, timeout=60, every=1.0)
    check(opened.get("ok") is True, f"open: {opened}")
    print(f"   opened in {time.monotonic() - began:.1f} s, asked {len(answers)} time(s): "
          f"{', '.join(answers)}")

    def answered():
        return [e for e in timeline(repo, session_id=opened["session_id"])
                if e["kind"] == "chat_assistant" and question in e["content"]]

    wait_for("the engine's answer in the timeline", answered)
    return opened["session_id"]


@step("open a conversation on the demo runner; the engine answers")
def open_one() -> None:
    print(f"   {opened_and_answered(REPO, 'What is in this repo?')} answered")


@step("kill -9 the node leading SEEDLINE_TIMELINE while 3,000 entries arrive")
def kill_leader(leader: str, folder: Path) -> str:
    node = f"nats-{leader.rsplit('n', 1)[1]}"
    path = folder / "load.jsonl"
    with path.open("w") as out:
        for n in range(ENTRIES):
            out.write(json.dumps({"entry_id": f"load-{n}", "instance_id": INSTANCE,
                                  "repo": LOAD_REPO, "session_id": "load", "kind": "terminal",
                                  "content": f"line {n}"}) + "\n")
    publishing = publish_file(path)
    time.sleep(1.0)
    podman("kill", "--signal", "KILL", container(node))
    killed_at = time.monotonic()
    summary = finished(publishing, "publish while a node dies")
    print(f"   killed {node} ({leader}); the publish finished through the other two "
          f"({summary.get('published', '?')} acknowledged) {time.monotonic() - killed_at:.1f} s "
          "after the kill")
    return node


@step("with that node down: another conversation opens and answers")
def open_while_down(node: str) -> None:
    state = podman("inspect", "-f", "{{.State.Status}}", container(node))
    print(f"   {node} is {state}; {opened_and_answered(REPO, 'And now?')} answered")


@step("start the node again; every entry once in the projection, its digest a rebuild's")
def restart_and_check(node: str) -> None:
    podman("start", container(node))
    wait_for(f"{node} healthy", lambda: subprocess.run(
        ["podman", "healthcheck", "run", container(node)], capture_output=True).returncode == 0,
        timeout=90)
    entries = wait_for(f"all {ENTRIES} entries in the projection",
                       lambda: (lambda rows: rows if len(rows) >= ENTRIES else None)(
                           timeline(LOAD_REPO)), timeout=180, every=1.0)
    ids = [e["entry_id"] for e in entries]
    check(len(ids) == len(set(ids)), f"{len(ids) - len(set(ids))} entries stored twice")
    check(set(ids) == {f"load-{n}" for n in range(ENTRIES)}, "entries missing or extra")
    order = [int(i.split("-")[1]) for i in ids]
    check(order == sorted(order), "the entries are not in the order they were published")
    rebuilt = seedline("rebuild", "timeline", ok=False)
    check(rebuilt.get("equal") is True, f"the rebuild differs: {rebuilt}")
    state = cluster()
    check(all(n == 2 for n in state["copies"].values()), f"copies: {state['copies']}")
    print(f"   {len(ids)} entries, each once and in order; rebuild equal; streams "
          f"{state['streams']['SEEDLINE_TIMELINE']}")


def main() -> int:
    try:
        leader = formed()
        open_one()
        with tempfile.TemporaryDirectory(prefix="seedline-cluster-") as folder:
            node = kill_leader(leader, Path(folder))
        open_while_down(node)
        restart_and_check(node)
    except CheckFailed as exc:
        print(f"FAILED: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
