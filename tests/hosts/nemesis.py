"""The faults of a plan, applied at their times and healed when their spans end; after each
heal a probe measures how long until the system serves again."""

from __future__ import annotations

import asyncio
import time

from seedline_contracts import subjects

from .cluster import MACHINES, NODES, SERVICE_HOSTS, Cluster
from .faults import Fault
from .network import Network
from .workload import History, Workload, World

RECOVERY_CAP_SECONDS = 150.0
MIN_QUIET = 3.0  # seconds of a serving system between a recovery and the next fault

class Nemesis:
    """Applies each fault of the plan at its time and heals it when its span ends; after
    each heal a probe measures how long until the system serves again."""

    def __init__(self, cluster: Cluster, network: Network, workload: Workload,
                 history: History) -> None:
        self.cluster, self.network, self.workload = cluster, network, workload
        self.h = history
        self.recoveries: list[float] = []  # seconds from each heal until it served again
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
                self.recoveries.append(took)
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


_SET = asyncio.Event()
_SET.set()  # a probe's open asks once per try: the probe itself tries again
