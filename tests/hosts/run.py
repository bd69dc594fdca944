"""One run of the fault harness: hosts up, the workload under a seed's faults, every fault
healed, the system caught up, then the checker over what happened.

    python tests/hosts/campaign.py --seed 1234 --seconds 60     # one run, replayed by its seed

Prints the seed and the schedule first, the history's file and the checker's verdict last.
"""

from __future__ import annotations

import json
import os
import shutil
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from . import checker
from .afterwards import caught_up, dump_events, gather
from .client_loop import ClientLoop
from .cluster import HOST_NUMBERS, Cluster, postgres_template
from .faults import Plan, plan as plan_of
from .nemesis import Nemesis
from .network import Network
from .starting import start_system
from .workload import History, World, Workload


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
        nemesis = Nemesis(cluster, network, workload, history)
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
        report.recoveries = nemesis.recoveries
        report.longest_recovery = max(nemesis.recoveries, default=0.0)
        t2 = time.monotonic()
        problems = await caught_up(cluster, workload, history)
        t3 = time.monotonic()
        streams = await gather(cluster, world, workload)
        say(f"hosts: recovered {t2 - t1:.0f} s, caught up {t3 - t2:.0f} s, read and rebuilt "
            f"{time.monotonic() - t3:.0f} s")
        history.dump(Path(report.folder) / "history.jsonl")
        dump_events(Path(report.folder) / "events.jsonl", streams)
        report.problems = {"caught up": problems, **checker.check(history, streams),
                           "recovery": nemesis.problems}
        _figures(report, history, streams)
    finally:
        await workload.stop()
        await workload.close()


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
