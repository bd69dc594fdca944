"""One run of the fault harness: hosts up, the workload under a seed's faults, every fault
healed, the system caught up, then the checker over what happened.

    python tests/hosts/campaign.py --seed 1234 --seconds 60     # one run, replayed by its seed

Prints the seed and the schedule first, the history's file and the checker's verdict last.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import subprocess
import time
import urllib.request
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import psycopg

from seedline_contracts import subjects
from seedline_platform.replay import last_seq, replay

from . import checker
from .client_loop import ClientLoop
from .cluster import (BIN, HOST_NUMBERS, MACHINES, NODES, SERVICE_HOSTS, SERVICES, WEB,
                      Cluster, postgres_template)
from .faults import Fault, Plan, plan as plan_of
from .network import Network
from .workload import History, World, Workload, connect

READY_SECONDS = 90.0
CATCH_UP_SECONDS = 150.0
RECOVERY_CAP_SECONDS = 150.0
MIN_QUIET = 3.0  # seconds of a serving system between a recovery and the next fault
CONSUMER_STREAMS = (subjects.INGEST_STREAM, subjects.TIMELINE_STREAM, subjects.SESSIONS_STREAM)


@dataclass
class Report:
    seed: int
    kind: str
    schedule: str
    seconds: float
    operations: int = 0
    acknowledged: int = 0
    lost: int = 0
    duplicates: int = 0
    live_twice: int = 0
    opens_without_reply: int = 0
    requests_unanswered: int = 0  # requests that got no answer in time (asked again)
    longest_recovery: float = 0.0
    recoveries: list[float] = field(default_factory=list)
    problems: dict[str, list[str]] = field(default_factory=dict)
    folder: str = ""
    how_links: str = ""
    wall_seconds: float = 0.0

    @property
    def ok(self) -> bool:
        return not any(self.problems.values())

    def verdict(self) -> str:
        lines = [f"seed {self.seed} ({self.kind}): {self.operations} operations, "
                 f"{self.acknowledged} entries acknowledged, {self.lost} lost, "
                 f"{self.duplicates} twice, {self.live_twice} repos live twice, "
                 f"{self.opens_without_reply} opens without a reply "
                 f"({self.requests_unanswered} requests asked again after no answer), "
                 f"longest recovery "
                 f"{self.longest_recovery:.1f} s after a heal; {self.wall_seconds:.0f} s "
                 f"in all; history and logs in {self.folder}"]
        for name, found in self.problems.items():
            for problem in found:
                lines.append(f"  FAILED {name}: {problem}")
        lines.append("  every check passed" if self.ok else
                     f"  replay: SEEDLINE_HOSTS_SEED={self.seed}")
        return "\n".join(lines)


def run_once(seed: int, seconds: float, root: Path, kind: str | None = None,
             say=print) -> Report:
    began = time.monotonic()
    plan = plan_of(seed, seconds, kind)
    say(f"hosts: seed {seed} (replay: SEEDLINE_HOSTS_SEED={seed}); {plan.describe()}")
    folder = root / f"hosts-{seed}-{os.getpid()}"
    shutil.rmtree(folder, ignore_errors=True)
    (folder / "logs").mkdir(parents=True)
    template = postgres_template(root)
    network = Network.of(HOST_NUMBERS, HOST_NUMBERS)
    network.create()
    cluster = Cluster(network, folder)
    loop = ClientLoop(network.namespace("client"))
    report = Report(seed, plan.kind, plan.describe(), seconds, folder=str(folder))
    try:
        loop.run(_run(cluster, network, plan, seconds, template, report, say), timeout=900)
    finally:
        network.heal()
        cluster.kill_all()
        loop.close()
        network.remove()
        report.wall_seconds = time.monotonic() - began
    (folder / "report.json").write_text(json.dumps(report.__dict__, indent=1, default=str))
    return report


async def _run(cluster: Cluster, network: Network, plan: Plan, seconds: float, template: Path,
               report: Report, say) -> None:
    t0 = time.monotonic()
    await start_system(cluster, template)
    say(f"hosts: {len(cluster.procs)} processes on {len(network.hosts)} hosts ready in "
        f"{time.monotonic() - t0:.0f} s")
    history = History()
    world = World.named(network.token)
    workload = Workload(cluster.nats_urls, world, history, plan.seed)
    try:
        await workload.start()
        nemesis = Nemesis(cluster, network, workload, history, report)
        if plan.links:
            report.how_links = network.degrade(plan.links.delay_ms, plan.links.loss_percent)
            history.op("links", how=report.how_links, delay_ms=plan.links.delay_ms,
                       loss=plan.links.loss_percent)
        try:
            await nemesis.play(plan.faults, seconds)
        finally:
            network.heal()
            history.op("everything healed")
        await workload.stop()
        t1 = time.monotonic()
        await nemesis.settle()
        t2 = time.monotonic()
        problems = await caught_up(cluster, workload, history)
        t3 = time.monotonic()
        streams = await gather(cluster, world, workload)
        say(f"hosts: recovered {t2 - t1:.0f} s, caught up {t3 - t2:.0f} s, read and rebuilt "
            f"{time.monotonic() - t3:.0f} s")
        history.dump(Path(report.folder) / "history.jsonl")
        _dump_events(Path(report.folder) / "events.jsonl", streams)
        report.problems = {"caught up": problems, **checker.check(history, streams),
                           "recovery": nemesis.problems}
        _figures(report, history, streams)
    finally:
        await workload.stop()
        await workload.close()


# -- starting ----------------------------------------------------------------------------


async def start_system(cluster: Cluster, template: Path) -> None:
    for node in NODES:
        cluster.add_node(node).start()
    for node in NODES:
        await _until(lambda n=node: _listens(cluster.address[n], 4222), 30, f"{node} listening")
    cluster.add_postgres(template).start()
    await _until(lambda: _postgres_answers(cluster.database_url), 60, "Postgres answering")
    nc = await connect(cluster.nats_urls, "harness")
    try:
        await _until(lambda: _jetstream_ready(nc), 60, "the cluster's JetStream leader")
        seen: dict[str, set[str]] = {}
        # The first writer alone: it makes the streams the others bind to.
        cluster.add_service(SERVICES[0], SERVICE_HOSTS[0]).start()
        await _until(lambda: _new_copy(nc, SERVICES[0], seen), READY_SECONDS,
                     f"{SERVICES[0]} on {SERVICE_HOSTS[0]}")
        for host in SERVICE_HOSTS:
            for name in (*SERVICES, WEB):
                if f"{name}@{host}" not in cluster.procs:
                    cluster.add_service(name, host).start()
        for name in SERVICES:
            for host in SERVICE_HOSTS[1 if name == SERVICES[0] else 0:]:
                await _until(lambda n=name: _new_copy(nc, n, seen), READY_SECONDS,
                             f"{name} on {host}")
        for host in SERVICE_HOSTS:
            await _until(lambda h=host: _web_ready(cluster.web_url(h)), READY_SECONDS,
                         f"{WEB} on {host}")
        for host in MACHINES:
            cluster.add_runner(host).start()
        kv = await nc.jetstream().key_value(subjects.RUNNERS_BUCKET)
        for host, (node_id, _) in MACHINES.items():
            await _until(lambda n=node_id: _present(kv, n), READY_SECONDS, f"runner {node_id}")
    finally:
        await nc.close()


async def _until(probe, seconds: float, what: str):
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


async def _copies_answering(nc, name: str) -> int:
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


async def _web_ready(url: str) -> bool:
    # urllib blocks: fine on this loop's own thread (an executor thread would not be on
    # the client host).
    return _web_ready_sync(url)


async def _present(kv, node_id: str) -> bool:
    entry = await kv.get(subjects.presence_key(node_id))
    return bool(entry.value)


# -- faults ------------------------------------------------------------------------------


class Nemesis:
    """Applies each fault of the plan at its time and heals it when its span ends; after
    each heal a probe measures how long until the system serves again."""

    def __init__(self, cluster: Cluster, network: Network, workload: Workload,
                 history: History, report: Report) -> None:
        self.cluster, self.network, self.workload = cluster, network, workload
        self.h, self.report = history, report
        self.probes: list[asyncio.Task] = []
        self.problems: list[str] = []
        self._probe_n = 0

    async def play(self, faults: tuple[Fault, ...], seconds: float) -> None:
        """Each fault at its time, or once the system serves again after the last heal if
        that is later (a fault is never laid over an unfinished recovery, so each recovery
        is measured alone); one that would outlast the run is left out, and says so."""
        start = self.h.began
        end = start + seconds
        for fault in faults:
            if self.probes:
                await asyncio.wait([self.probes[-1]], timeout=max(0.0, end - time.monotonic()))
            begin = max(start + fault.at, time.monotonic() + (MIN_QUIET if self.probes else 0))
            if begin + fault.lasts > end - 2:
                self.h.op("fault left out", kind=fault.kind, target=fault.target,
                          why="it would outlast the run")
                break
            await asyncio.sleep(begin - time.monotonic())
            await self.apply(fault)
            await asyncio.sleep(fault.lasts)
            await self.heal(fault)
        await asyncio.sleep(max(0.0, end - time.monotonic()))

    async def apply(self, fault: Fault) -> None:
        self.h.op("fault", kind=fault.kind, target=fault.target, lasts=fault.lasts)
        c, net, target = self.cluster, self.network, fault.target
        others = [n for n in NODES if n != target]
        if fault.kind == "partition-node":
            net.cut((target, other) for other in others)
        elif fault.kind == "majority-without-services":
            minority = [target, *SERVICE_HOSTS, *MACHINES, "db"]
            net.cut((m, o) for m in minority for o in others)
        elif fault.kind == "isolate-service":
            net.cut((target, n) for n in NODES)
        elif fault.kind in ("pause-node", "pause-service"):
            c.procs[target].pause()
        elif fault.kind in ("kill-node", "lose-disk"):
            c.procs[target].kill()
            if fault.kind == "lose-disk":
                c.wipe_node(target)
        elif fault.kind == "runner-cut-mid-turn":
            await self._turn_under_way(target)
            net.cut((target, n) for n in NODES)
        elif fault.kind == "postgres-away":
            net.cut(("db", host) for host in net.hosts if host != "db")

    async def heal(self, fault: Fault) -> None:
        proc = self.cluster.procs.get(fault.target)
        if fault.kind in ("pause-node", "pause-service"):
            proc.resume()
        elif fault.kind in ("kill-node", "lose-disk"):
            proc.start()
        else:
            self.network.heal()
        self.h.op("healed", kind=fault.kind, target=fault.target)
        self.probes.append(asyncio.create_task(self._probe(fault)))

    async def _turn_under_way(self, host: str) -> None:
        """A slow turn running on the machine when it is cut off: a conversation opened on
        it (or the one there), then a person's message that takes a while to answer."""
        node_id = MACHINES[host][0]
        instance, repo = self.workload.world.hot[0]
        self._probe_n += 1
        reply = await asyncio.wait_for(self.workload.open(
            instance, repo, node_id, f"cut-{self.network.token}-{self._probe_n}",
            stopping=asyncio.Event()), 40)
        if reply and reply.get("ok"):
            await self.workload.message(instance, repo, "Rework it all (take 8 seconds)",
                                        f"slow-{self.network.token}-{self._probe_n}")
            await asyncio.sleep(1.0)

    async def _probe(self, fault: Fault) -> None:
        """Seconds from a heal until an entry is appended and read back and an open
        succeeds on each machine."""
        healed = time.monotonic()
        w, world = self.workload, self.workload.world
        self._probe_n += 1
        n = self._probe_n
        deadline = healed + RECOVERY_CAP_SECONDS
        failures: list[str] = []  # why each try failed, in order, repeats left out
        while time.monotonic() < deadline:
            try:
                why = await self._why_not_serving(w, world, n)
            except Exception as exc:
                why = type(exc).__name__
            if why is None:
                took = round(time.monotonic() - healed, 1)
                self.report.recoveries.append(took)
                self.h.op("recovered", kind=fault.kind, target=fault.target, seconds=took,
                          failed_first=failures)
                return
            if not failures or failures[-1] != why:
                failures.append(why)
            await asyncio.sleep(0.5)
        self.problems.append(f"{fault.describe()}: not serving {RECOVERY_CAP_SECONDS:.0f} s "
                             f"after the heal ({'; '.join(failures)})")

    async def _why_not_serving(self, w: Workload, world: World, n: int) -> str | None:
        """None when an entry is appended and read back and an open succeeds on each
        machine; else the step that failed, and how."""
        entry = {"entry_id": f"probe-{world.token}-{n}-{time.monotonic_ns()}",
                 "instance_id": world.probe_instance, "repo": "probe/reads",
                 "session_id": "probe", "kind": "terminal", "content": "probe"}
        try:
            appended = await w.request(subjects.API_TIMELINE_APPEND, entry, 5.0)
        except Exception as exc:
            return f"append: {type(exc).__name__}"
        if not appended.get("ok"):
            return f"append: {appended['error']['code']}"
        w.h.acked[entry["entry_id"]] = {"producer": None, "instance": world.probe_instance,
                                        "t": w.h.now(), "seq": appended["seq"]}
        try:
            read = await w.request(subjects.API_TIMELINE_READ, {
                "instance_id": world.probe_instance, "repo": "probe/reads", "limit": 1,
                "min_seq": appended["seq"]}, 8.0)
        except Exception as exc:
            return f"read: {type(exc).__name__}"
        if not read.get("ok") or read["entries"][-1]["entry_id"] != entry["entry_id"]:
            return f"read: {read.get('error', {}).get('code', 'another entry')}"
        for node_id in ("m1", "m2"):
            request_id = f"probe-{world.token}-{n}-{node_id}-{time.monotonic_ns()}"
            reply = await w.open(world.probe_instance, f"probe/{node_id}", node_id, request_id,
                                 stopping=_SET)
            if not reply:
                attempt = w.h.opens[request_id]["attempts"][-1]
                return f"open on {node_id}: {attempt.get('error', 'no reply')}"
            if not reply.get("ok"):
                return f"open on {node_id}: {reply['error']['code']}"
        return None

    async def settle(self) -> None:
        """Every fault healed: each process running and going, every probe done."""
        for proc in self.cluster.procs.values():
            if proc.paused:
                proc.resume()
        for node in NODES:
            if not self.cluster.procs[node].running:
                self.cluster.procs[node].start()
        await asyncio.gather(*self.probes)
        self.report.longest_recovery = max(self.report.recoveries, default=0.0)


_SET = asyncio.Event()
_SET.set()  # a probe's open asks once per try: the probe itself tries again


# -- afterwards --------------------------------------------------------------------------


async def caught_up(cluster: Cluster, workload: Workload, history: History) -> list[str]:
    """Everything healed: every process running, every copy answering, every durable
    consumer idle, and every open without a reply asked again by its request_id."""
    problems = [f"{p.name} exited by itself (code {p.popen.returncode})"
                for p in cluster.procs.values() if not p.running]
    nc = workload.nc
    try:
        await _until(lambda: _all_copies(nc), CATCH_UP_SECONDS, "every service copy answering")
    except RuntimeError as exc:
        problems.append(str(exc))
    try:
        await _until(lambda: _consumers_idle(nc), CATCH_UP_SECONDS, "every consumer idle")
    except RuntimeError as exc:
        problems.append(str(exc))
    for host in SERVICE_HOSTS:
        try:
            await _until(lambda h=host: _web_ready(cluster.web_url(h)), 30, f"web on {host}")
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
        if await _copies_answering(nc, name) < len(SERVICE_HOSTS):
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


def _dump_events(path: Path, streams: checker.Streams) -> None:
    """The session events and notices the checker read (their sealed parts left out)."""
    with open(path, "w") as out:
        for stream, records in (("sessions", streams.events), ("notices", streams.notices)):
            for record in records:
                kept = {k: record[k] for k in KEPT_FIELDS if k in record}
                if "reply" in record and isinstance(record["reply"], dict):
                    kept["reply_node"] = record["reply"].get("node_id")
                out.write(json.dumps({"stream": stream, **kept}) + "\n")


def _figures(report: Report, history: History, streams: checker.Streams) -> None:
    counts = Counter(e["entry_id"] for e in streams.timeline)
    report.acknowledged = len(history.acked)
    report.lost = len(set(history.acked) - set(counts))
    report.duplicates = sum(1 for n in counts.values() if n > 1)
    report.operations = (sum(len(s) for s in history.sent.values()) + len(history.ops)
                         + sum(len(o["attempts"]) for o in history.opens.values()))
    report.opens_without_reply = sum(1 for o in history.opens.values() if "final" not in o)
    report.requests_unanswered = (
        sum(1 for o in history.opens.values() for a in o["attempts"] if "error" in a)
        + sum(len(op.get("errors", [])) for op in history.ops)
        + sum(1 for op in history.ops if op["op"] in ("relocate", "stop") and "error" in op))
    twice = report.problems.get("one live engine", [])
    report.live_twice = sum(1 for p in twice if "sessions.list" not in p)
